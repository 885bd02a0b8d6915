#include "formats/k8s_quantity.h"

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

namespace toposched {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The length of the signed decimal number at the start of `text` (0: none): an optional sign,
// digits, an optional point and digits, at least one digit in all.
std::size_t number_length(std::string_view text) {
  std::size_t i = 0, digits = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  for (; i < text.size() && is_digit(text[i]); ++i) ++digits;
  if (i < text.size() && text[i] == '.')
    for (++i; i < text.size() && is_digit(text[i]); ++i) ++digits;
  return digits == 0 ? 0 : i;
}

// The factor a suffix stands for; nullopt for text that is no suffix.
std::optional<double> suffix_factor(std::string_view suffix) {
  static constexpr std::array<std::pair<std::string_view, double>, 16> kSuffixes{{
      {"", 1},
      {"n", 1e-9},
      {"u", 1e-6},
      {"m", 1e-3},
      {"k", 1e3},
      {"M", 1e6},
      {"G", 1e9},
      {"T", 1e12},
      {"P", 1e15},
      {"E", 1e18},
      {"Ki", 1024.0},
      {"Mi", 1048576.0},
      {"Gi", 1073741824.0},
      {"Ti", 1099511627776.0},
      {"Pi", 1125899906842624.0},
      {"Ei", 1152921504606846976.0},
  }};
  for (const auto& [s, f] : kSuffixes)
    if (suffix == s) return f;
  // A decimal exponent: e or E, then a signed integer.
  if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return std::nullopt;
  std::string_view exponent = suffix.substr(1);
  if (exponent.size() > 1 && exponent[0] == '+' && is_digit(exponent[1])) exponent.remove_prefix(1);
  int e = 0;
  auto [end, ec] = std::from_chars(exponent.data(), exponent.data() + exponent.size(), e);
  if (ec != std::errc() || end != exponent.data() + exponent.size() || e < -30 || e > 30) return std::nullopt;
  return std::pow(10.0, e);
}

}  // namespace

std::optional<double> parse_k8s_quantity(std::string_view text) {
  const std::size_t n = number_length(text);
  if (n == 0) return std::nullopt;
  auto factor = suffix_factor(text.substr(n));
  if (!factor) return std::nullopt;
  std::string_view number = text.substr(0, n);
  if (number[0] == '+') number.remove_prefix(1);  // from_chars takes '-' only
  double mantissa = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), mantissa);
  if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
  const double value = mantissa * *factor;
  if (!std::isfinite(value) || std::fabs(value) > 1e30) return std::nullopt;
  return value;
}

}  // namespace toposched
