// Strict parsing of one JSON document with nlohmann-json, for the readers that take JSON
// only (e.g. the Philly trace) and every HTTP request body: a syntax error, trailing content
// after the document, a key repeated within one object (nlohmann alone keeps the last
// value), or arrays and objects nested deeper than kMaxJsonDepth is an error with its
// file:line:col. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "topology/error.h"

namespace toposched {

// Deepest nesting of arrays and objects accepted. nlohmann parses iteratively, but dump(),
// comparison and every reader that walks a value recurse: a 100,000-deep value in a 200 kB
// body overflowed the stack of the error message that quoted it. No format toposched reads
// nests deeper than a dozen levels.
inline constexpr int kMaxJsonDepth = 128;

Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& file);

// A value as an error message quotes it: scalars as JSON cut to about 60 bytes, arrays and
// objects by their type and size ("an array of 3 elements"), never a recursive dump of what
// the client sent; invalid UTF-8 is replaced, not thrown.
std::string quote_json(const nlohmann::json& value);

// 1-based line and column of byte `offset` of `text` (columns count bytes).
SourceLocation location_of_offset(std::string_view text, std::size_t offset, const std::string& file);

// The same for many offsets in increasing order, in time linear in the text overall (a
// smaller offset than the last restarts from the beginning). One instance per text.
class OffsetLocator {
 public:
  OffsetLocator(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}
  SourceLocation at(std::size_t offset);

 private:
  std::string_view text_;
  std::string file_;
  std::size_t scanned_ = 0;     // bytes before this offset are counted
  int line_ = 1;                // line of text_[scanned_]
  std::size_t line_start_ = 0;  // offset where that line starts
};

}  // namespace toposched
