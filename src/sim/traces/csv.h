// A small CSV tokenizer for trace files: comma-separated fields, optional double quotes
// ("" escapes a quote), blank lines and lines starting with '#' skipped, CRLF accepted.
// Each record keeps its 1-based line number and the column of every field, so readers can
// report FILE:LINE:COL. Also number parsing helpers with the same error positions.
// Stateless apart from the text it walks; one reader per thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/trace.h"
#include "topology/error.h"
#include "topology/text.h"

namespace toposched::sim::csv {

struct Record {
  int line = 0;
  std::vector<std::string> fields;
  std::vector<int> columns;  // 1-based column of each field's first character
};

class Reader {
 public:
  Reader(std::string_view text, std::string file, char sep = ',');
  // Next non-blank, non-comment record; nullopt at the end; an error for an unterminated quote.
  Result<std::optional<Record>> next();
  const std::string& file() const { return file_; }

 private:
  std::string_view text_;
  std::string file_;
  char sep_;
  std::size_t pos_ = 0;
  int line_ = 0;
};

// Column name -> index of a header record; names trimmed and lower-cased.
std::unordered_map<std::string, int> header_index(const Record& header);

SourceLocation where(const std::string& file, const Record& r, int field);
tl::unexpected<Error> field_error(const std::string& file, const Record& r, int field, std::string message);

// Parse a field; errors say which column and what was found.
Result<double> to_double(const std::string& file, const Record& r, int field, std::string_view what);
Result<long long> to_int(const std::string& file, const Record& r, int field, std::string_view what);

// Calls `row` for every record after `header`, in order, once its field count matched the
// header's (else that error). Stops at the first error `row` returns.
Result<void> for_each_row(Reader& reader, const Record& header, const std::function<Result<void>(const Record&)>& row);

// The row loop of the trace readers: `parse` turns a row into a job, setting `ignored` for a
// row that describes a job that never ran (counted in trace.ignored_rows, not kept); a
// malformed row fails the read, or with options.skip_bad_rows is counted (reject_row).
Result<void> read_job_rows(Reader& reader, const Record& header, Trace& trace, const TraceReadOptions& options,
                           const std::function<Result<SimJob>(const Record&, bool& ignored)>& parse);

// "YYYY-MM-DD HH:MM:SS" (or with 'T'), as seconds since 1970 in UTC; nullopt if malformed.
std::optional<double> parse_datetime(std::string_view s);

}  // namespace toposched::sim::csv
