#include "formats/text_scan.h"

#include <fmt/format.h>

namespace toposched {

std::vector<TextLine> split_lines(std::string_view text) {
  std::vector<TextLine> lines;
  int number = 1;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (end < text.size() || !line.empty()) lines.push_back({line, number});
    ++number;
    start = end + 1;
  }
  return lines;
}

std::vector<Token> tokenize(std::string_view line) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_ascii_space(line[i])) ++i;
    if (i >= line.size()) break;
    std::size_t j = i;
    while (j < line.size() && !is_ascii_space(line[j])) ++j;
    tokens.push_back({line.substr(i, j - i), static_cast<int>(i) + 1});
    i = j;
  }
  return tokens;
}

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (s.size() > max) out += "...";
  return out;
}

Result<std::vector<PdshLine>> pdsh_lines(std::string_view text, const std::string& file, std::string_view expected) {
  std::vector<PdshLine> out;
  for (const TextLine& line : split_lines(text)) {
    if (trim(line.text).empty()) continue;
    const std::size_t colon = line.text.find(": ");
    const std::string_view host = colon == std::string_view::npos ? std::string_view() : trim(line.text.substr(0, colon));
    if (host.empty())
      return make_error(ErrorCode::kParse, fmt::format("expected {}, found '{}'", expected, printable(line.text, 80)),
                        at(file, line.number, 1));
    const std::string_view rest = line.text.substr(colon + 2);
    std::size_t lead = 0;
    while (lead < rest.size() && is_ascii_space(rest[lead])) ++lead;
    out.push_back({line.number, host, trim(rest), static_cast<int>(colon + 3 + lead)});
  }
  return out;
}

}  // namespace toposched
