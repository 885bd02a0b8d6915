// Small helpers shared by the line-oriented readers (topo -m, ibnetdiscover, topology.conf,
// nvidia-smi fabric output): splitting text into numbered lines and lines into
// whitespace-separated tokens that remember their 1-based column, so errors can name
// file:line:col. Pure functions over string_views into the caller's text; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/error.h"
#include "topology/text.h"  // trim, which the readers use beside these

namespace toposched {

struct TextLine {
  std::string_view text;  // without the line terminator ("\n", "\r\n")
  int number = 0;         // 1-based
};

struct Token {
  std::string_view text;
  int column = 0;  // 1-based, counted in bytes
};

std::vector<TextLine> split_lines(std::string_view text);
// Calls line(text) for each line of `text` (the bytes between '\n's, a '\r' kept), in
// order, until it returns false: false then, else true. Allocates nothing, for the fast
// paths of the 50 MB readers (millions of lines, where split_lines would build a vector).
template <class Line>
bool for_each_line(std::string_view text, Line line) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (!line(text.substr(start, end - start))) return false;
    start = end + 1;
  }
  return true;
}
// One line of pdsh's output: pdsh prefixes each line a host prints with "HOST: ".
struct PdshLine {
  int number = 0;               // 1-based line in the file
  std::string_view host;        // trimmed
  std::string_view output;      // after "HOST: ", trimmed; may be empty
  int output_column = 0;        // 1-based column where `output` starts
};
// The non-blank lines of `text` (split_lines); a line without "HOST: " is an error at its
// line: "expected EXPECTED, found 'LINE'".
Result<std::vector<PdshLine>> pdsh_lines(std::string_view text, const std::string& file, std::string_view expected);

// Splits on spaces, tabs and other ASCII whitespace.
std::vector<Token> tokenize(std::string_view line);
// Printable rendering of untrusted input for messages: control bytes become '?', long text is cut.
std::string printable(std::string_view s, std::size_t max = 60);

inline SourceLocation at(const std::string& file, int line, int column = 0) {
  return SourceLocation{file, line, column};
}

}  // namespace toposched
