// Strict parsing of one JSON document with nlohmann-json, for the readers that take JSON
// only (e.g. the Philly trace): a syntax error, trailing content after the document, or a
// key repeated within one object (nlohmann alone keeps the last value) is an error with its
// file:line:col. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "topology/error.h"

namespace toposched {

Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& file);

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
