#include "topology/hostlist.h"

#include <cctype>
#include <cstdint>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace toposched {
namespace {

// One piece of an item: literal text, or a bracket group already turned into strings.
struct Piece {
  bool is_group = false;
  std::string literal;
  std::vector<std::string> values;
};

tl::unexpected<Error> hostlist_error(std::size_t pos, std::string what) {
  return make_error(ErrorCode::kParse, std::move(what),
                    SourceLocation{"", 0, static_cast<int>(pos + 1)});
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

Result<std::uint64_t> parse_bound(std::string_view s, std::size_t pos) {
  if (!all_digits(s))
    return hostlist_error(pos, fmt::format("expected a number in the bracket, found '{}'", s));
  if (s.size() > 18)
    return hostlist_error(pos, fmt::format("number '{}' is too large", s));
  std::uint64_t v = 0;
  for (char c : s) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return v;
}

// Parses the inside of "[...]" starting at `base` (the position after '[').
Result<std::vector<std::string>> parse_group(std::string_view body, std::size_t base,
                                             std::size_t max_names) {
  std::vector<std::string> out;
  if (body.empty()) return hostlist_error(base, "empty bracket group '[]'");
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    std::string_view part = body.substr(start, comma - start);
    std::size_t part_pos = base + start;
    if (part.empty()) return hostlist_error(part_pos, "empty element in bracket group");
    std::size_t dash = part.find('-');
    std::string_view lo_s = part.substr(0, dash);
    std::string_view hi_s = dash == std::string_view::npos ? lo_s : part.substr(dash + 1);
    auto lo = parse_bound(lo_s, part_pos);
    if (!lo) return tl::unexpected(lo.error());
    auto hi = parse_bound(hi_s, part_pos + (dash == std::string_view::npos ? 0 : dash + 1));
    if (!hi) return tl::unexpected(hi.error());
    if (*hi < *lo)
      return hostlist_error(part_pos, fmt::format("range '{}' runs backwards", part));
    if (*hi - *lo >= max_names || out.size() + (*hi - *lo) >= max_names)
      return hostlist_error(part_pos, fmt::format("range '{}' is too large (more than {} names)", part, max_names));
    // Slurm pads to the width of the first bound when it has a leading zero.
    std::size_t width = (lo_s.size() > 1 && lo_s[0] == '0') ? lo_s.size() : 0;
    for (std::uint64_t v = *lo; v <= *hi; ++v) out.push_back(fmt::format("{:0{}}", v, width));
    if (comma == body.size()) break;
    start = comma + 1;
  }
  return out;
}

Result<std::vector<Piece>> parse_item(std::string_view expr, std::size_t begin,
                                      std::size_t end, std::size_t max_names) {
  std::vector<Piece> pieces;
  std::size_t i = begin;
  while (i < end) {
    if (expr[i] == '[') {
      std::size_t close = expr.find(']', i);
      if (close == std::string_view::npos || close >= end)
        return hostlist_error(i, "'[' without a matching ']'");
      std::string_view body = expr.substr(i + 1, close - i - 1);
      if (body.find('[') != std::string_view::npos)
        return hostlist_error(i + 1 + body.find('['), "nested '[' in bracket group");
      auto values = parse_group(body, i + 1, max_names);
      if (!values) return tl::unexpected(values.error());
      pieces.push_back(Piece{true, {}, std::move(*values)});
      i = close + 1;
    } else if (expr[i] == ']') {
      return hostlist_error(i, "']' without a matching '['");
    } else {
      std::size_t next = i;
      while (next < end && expr[next] != '[' && expr[next] != ']') ++next;
      std::string_view lit = expr.substr(i, next - i);
      for (std::size_t k = 0; k < lit.size(); ++k) {
        unsigned char c = static_cast<unsigned char>(lit[k]);
        if (std::isspace(c) || std::iscntrl(c))
          return hostlist_error(i + k, "unexpected whitespace or control character in hostlist");
      }
      pieces.push_back(Piece{false, std::string(lit), {}});
      i = next;
    }
  }
  return pieces;
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view expr, std::size_t max_names) {
  std::vector<std::string> names;
  std::size_t item_start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= expr.size(); ++i) {
    if (i < expr.size()) {
      if (expr[i] == '[') ++depth;
      if (expr[i] == ']') --depth;
      if (depth < 0) return hostlist_error(i, "']' without a matching '['");
      if (expr[i] != ',' || depth > 0) continue;
    }
    if (i == item_start) {
      if (expr.empty()) return hostlist_error(0, "empty hostlist");
      return hostlist_error(i, "empty name in hostlist (two commas or a trailing comma)");
    }
    auto pieces = parse_item(expr, item_start, i, max_names);
    if (!pieces) return tl::unexpected(pieces.error());
    std::vector<std::string> acc{""};
    for (const Piece& p : *pieces) {
      if (!p.is_group) {
        for (auto& a : acc) a += p.literal;
        continue;
      }
      if (acc.size() * p.values.size() + names.size() > max_names)
        return hostlist_error(item_start, fmt::format("hostlist expands to too many names (more than {})", max_names));
      std::vector<std::string> next;
      next.reserve(acc.size() * p.values.size());
      for (const auto& a : acc)
        for (const auto& v : p.values) next.push_back(a + v);
      acc = std::move(next);
    }
    for (auto& a : acc) names.push_back(std::move(a));
    item_start = i + 1;
  }
  if (depth != 0) return hostlist_error(expr.size() - 1, "'[' without a matching ']'");
  return names;
}

namespace {

// A name split around one run of digits: prefix + number + suffix.
// Views into one name: the text before its last free number, the number, the rest.
struct Split {
  std::string_view prefix;
  std::string_view digits;
  std::string_view suffix;
};

// Splits at the last digit run that is outside any bracket group.
std::optional<Split> split_last_number(std::string_view s) {
  int depth = 0;
  std::optional<std::pair<std::size_t, std::size_t>> found;
  for (std::size_t i = 0; i < s.size();) {
    char c = s[i];
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth == 0 && std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      found = {i, j};
      i = j;
      continue;
    }
    ++i;
  }
  if (!found || found->second - found->first > 18) return std::nullopt;
  return Split{s.substr(0, found->first), s.substr(found->first, found->second - found->first),
               s.substr(found->second)};
}

// Width class of a number: its length if zero-padded, 0 if it is written plainly.
std::size_t pad_width(std::string_view digits) { return (digits.size() > 1 && digits[0] == '0') ? digits.size() : 0; }

// The value of at most 18 decimal digits (split_last_number's), as std::stoull reads them.
std::uint64_t number_of(std::string_view digits) {
  std::uint64_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return v;
}

// One pass: merges consecutive names that differ only in their last free number. The
// splits are views into `names` (no copy per name: describe() compresses the nodes of
// jobs of thousands of GPUs).
std::vector<std::string> compress_pass(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::vector<std::string_view> members;
  std::size_t i = 0;
  while (i < names.size()) {
    auto head = split_last_number(names[i]);
    if (!head) {
      out.push_back(names[i++]);
      continue;
    }
    std::size_t width = pad_width(head->digits);
    members.assign(1, head->digits);
    std::size_t j = i + 1;
    for (; j < names.size(); ++j) {
      auto s = split_last_number(names[j]);
      if (!s || s->prefix != head->prefix || s->suffix != head->suffix) break;
      std::size_t w = pad_width(s->digits);
      // "10" fits a width-2 padded group; a padded number never joins a plain group.
      bool same_width = w == width || (width > 0 && w == 0 && s->digits.size() == width);
      if (!same_width) break;
      members.push_back(s->digits);
    }
    if (members.size() == 1) {
      out.push_back(names[i]);
      i = j;
      continue;
    }
    std::string item(head->prefix);
    item += '[';
    bool first = true;
    for (std::size_t k = 0; k < members.size();) {
      std::uint64_t lo = number_of(members[k]);
      std::size_t r = k + 1;
      while (r < members.size() && number_of(members[r]) == lo + (r - k)) ++r;
      if (!first) item += ',';
      first = false;
      item += members[k];
      if (r - k > 1) {
        item += '-';
        item += members[r - 1];
      }
      k = r;
    }
    item += ']';
    item += head->suffix;
    out.push_back(std::move(item));
    i = j;
  }
  return out;
}

}  // namespace

std::string compress_hostlist(const std::vector<std::string>& names) {
  // Names that contain brackets or commas themselves cannot be written in a hostlist
  // without changing their meaning; the passes below never merge such names.
  auto join = [](const std::vector<std::string>& v) {
    std::string joined;
    for (const auto& s : v) {
      if (!joined.empty()) joined += ',';
      joined += s;
    }
    return joined;
  };
  // Each pass merges one more dimension, right to left:
  // rack1-n[01-18],rack2-n[01-18] -> rack[1-2]-n[01-18]. A pass is kept only while the
  // result still expands to exactly the given names.
  std::string best = join(names);
  std::vector<std::string> items = names;
  for (int pass = 0; pass < 8; ++pass) {
    std::vector<std::string> next = compress_pass(items);
    if (next == items) break;
    std::string joined = join(next);
    auto back = expand_hostlist(joined);
    if (!back || *back != names) break;
    best = std::move(joined);
    items = std::move(next);
  }
  return best;
}

}  // namespace toposched
