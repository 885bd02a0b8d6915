// Small text helpers shared by every reader and writer in every layer: ASCII case mapping,
// whitespace trimming, and the 1-based line:column of a byte offset for error messages.
// They live in the lowest layer so that no layer writes its own copy (issue 29 found four
// `lower`s, three `trim`s and four offset-to-line:column loops). ASCII only, on purpose:
// the names and keys they serve (Slurm keywords, Kubernetes names, CSV headers, policy
// names) are ASCII, and a locale must not change how a file reads.
// Free functions are pure and thread-safe; an OffsetLocator is used by one thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "topology/error.h"

namespace toposched {

// `text` with A-Z mapped to a-z (ascii_upper: a-z to A-Z); every other byte unchanged.
std::string ascii_lower(std::string_view text);
std::string ascii_upper(std::string_view text);

// Whether a and b are equal ignoring ASCII case.
bool equals_ignoring_ascii_case(std::string_view a, std::string_view b);

// Space, tab, CR, LF, VT and FF: what std::isspace accepts in the "C" locale.
bool is_ascii_space(char c);

// `text` without leading and trailing is_ascii_space bytes (a view into `text`).
std::string_view trim(std::string_view text);

// 1-based line and column of byte `offset` of `text`, named `file` (columns count bytes;
// an offset past the end is the end).
SourceLocation location_of(std::string_view text, std::size_t offset, const std::string& file);

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
