#include "formats/plain_yaml.h"

#include <cctype>

#include "topology/utf8.h"

namespace toposched::plain_yaml {
namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-'; }

bool is_null(std::string_view s) { return s == "null" || s == "Null" || s == "NULL"; }

}  // namespace

bool plain_text(std::string_view text) { return !text.starts_with("\xEF\xBB\xBF") && !first_invalid_utf8(text); }

bool plain_name(std::string_view s) {
  if (s.empty() || std::isalnum(static_cast<unsigned char>(s[0])) == 0) return false;
  for (char c : s)
    if (!name_char(c)) return false;
  return !is_null(s);
}

bool hostlist_text(std::string_view s, bool quoted) {
  if (s.empty() || (!quoted && std::isalnum(static_cast<unsigned char>(s[0])) == 0)) return false;
  for (char c : s)
    if (!name_char(c) && c != '[' && c != ']' && c != ',') return false;
  return quoted || !is_null(s);
}

bool plain_line(std::string_view c) {
  for (char ch : c) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u >= 0x7f) return false;
    switch (ch) {
      case '#':
      case '\'':
      case '&':
      case '*':
      case '!':
      case '|':
      case '>':
      case '%':
      case '@':
      case '`':
      case '\\':
      case '?':
        return false;
      default:
        break;
    }
  }
  return true;
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool split_key(std::string_view c, std::string_view& key, std::string_view& value) {
  const std::size_t colon = c.find(':');
  if (colon == kNone) return false;
  key = c.substr(0, colon);
  const std::string_view rest = c.substr(colon + 1);
  if (!plain_name(key) || (!rest.empty() && rest[0] != ' ')) return false;
  value = trim_spaces(rest);
  return true;
}

bool scalar(std::string_view value, std::string_view& text, bool& quoted) {
  quoted = value.size() >= 2 && value.front() == '"' && value.back() == '"';
  text = quoted ? value.substr(1, value.size() - 2) : value;
  if (quoted) return text.find('"') == kNone;
  // Plain: a name, or a hostlist-like text with no flow indicator.
  return hostlist_text(text, false) && text.find_first_of("[],") == kNone;
}

}  // namespace toposched::plain_yaml
