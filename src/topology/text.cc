#include "topology/text.h"

#include <algorithm>

namespace toposched {
namespace {

char lower_char(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
char upper_char(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

}  // namespace

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), lower_char);
  return out;
}

std::string ascii_upper(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), upper_char);
  return out;
}

bool equals_ignoring_ascii_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return lower_char(x) == lower_char(y); });
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_ascii_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_ascii_space(text.back())) text.remove_suffix(1);
  return text;
}

SourceLocation location_of(std::string_view text, std::size_t offset, const std::string& file) {
  offset = std::min(offset, text.size());
  std::string_view before = text.substr(0, offset);
  int line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
  std::size_t line_start = before.rfind('\n');
  int column = 1 + static_cast<int>(line_start == std::string_view::npos ? offset : offset - line_start - 1);
  return SourceLocation{file, line, column};
}

SourceLocation OffsetLocator::at(std::size_t offset) {
  offset = std::min(offset, text_.size());
  if (offset < scanned_) scanned_ = 0, line_ = 1, line_start_ = 0;
  for (; scanned_ < offset; ++scanned_)
    if (text_[scanned_] == '\n') ++line_, line_start_ = scanned_ + 1;
  return SourceLocation{file_, line_, 1 + static_cast<int>(offset - line_start_)};
}

}  // namespace toposched
