#include "formats/json_output.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace toposched {

namespace {

// A JSON pointer token (RFC 6901), shown with invalid bytes as \xNN.
std::string printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

// The bytes around `at`, printable, so a message about one bad byte in a long value (a
// hostlist of millions of names) stays one line: up to 40 bytes on each side, "..." where cut.
std::string excerpt_around(std::string_view text, std::size_t at) {
  constexpr std::size_t kSide = 40;
  const std::size_t begin = at > kSide ? at - kSide : 0;
  const std::size_t end = std::min(text.size(), at + kSide);
  return (begin > 0 ? "..." : "") + printable(text.substr(begin, end - begin)) + (end < text.size() ? "..." : "");
}

template <class Json>
Result<void> check_utf8(const Json& root) {
  // Iterative walk (outputs are built by us, but stay safe on any depth).
  std::vector<std::pair<const Json*, std::string>> pending{{&root, ""}};
  auto fail = [](const std::string& path, std::string_view text, std::size_t at, bool key) {
    return make_error(ErrorCode::kValidation,
                      fmt::format("cannot write JSON: the {} at '{}' is not valid UTF-8 (byte 0x{:02x} at offset {} "
                                  "of '{}'); JSON output requires UTF-8 text, so names written to JSON must be UTF-8",
                                  key ? "key" : "string", path.empty() ? "/" : path,
                                  static_cast<unsigned char>(text[at]), at, excerpt_around(text, at)));
  };
  while (!pending.empty()) {
    auto [node, path] = std::move(pending.back());
    pending.pop_back();
    if (node->is_string()) {
      const auto& s = node->template get_ref<const std::string&>();
      if (auto bad = first_invalid_utf8(s)) return fail(path, s, *bad, false);
    } else if (node->is_object()) {
      const std::size_t first_child = pending.size();
      for (auto it = node->begin(); it != node->end(); ++it) {
        std::string child = path + "/" + printable(it.key());
        if (auto bad = first_invalid_utf8(it.key())) return fail(child, it.key(), *bad, true);
        if (it->is_structured() || it->is_string()) pending.emplace_back(&*it, std::move(child));
      }
      // Visit children in document order, so the error names the first bad string.
      std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(first_child), pending.end());
    } else if (node->is_array()) {
      for (std::size_t i = node->size(); i-- > 0;) {
        const Json& item = (*node)[i];
        if (item.is_structured() || item.is_string()) pending.emplace_back(&item, path + "/" + std::to_string(i));
      }
    }
  }
  return {};
}

template <class Json>
Result<std::string> dump_checked(const Json& j, int indent) {
  TOPOSCHED_CHECK(check_utf8(j));
  return j.dump(indent);
}

}  // namespace

Result<void> check_json_utf8(const nlohmann::json& j) { return check_utf8(j); }
Result<void> check_json_utf8(const nlohmann::ordered_json& j) { return check_utf8(j); }
double round_decimals(double v, int decimals) {
  if (!std::isfinite(v)) return 0;
  const double f = std::pow(10.0, decimals);
  const double r = std::round(v * f) / f;
  return r == 0 ? 0.0 : r;  // no "-0.0"
}

Result<std::string> dump_json(const nlohmann::json& j, int indent) { return dump_checked(j, indent); }
Result<std::string> dump_json(const nlohmann::ordered_json& j, int indent) { return dump_checked(j, indent); }

}  // namespace toposched
