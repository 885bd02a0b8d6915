#include "router/request_trace.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/json_input.h"
#include "topology/file_io.h"

namespace toposched::router {

namespace {

using Json = nlohmann::json;

Error row_error(const std::string& source, std::size_t line, std::size_t column, std::string message) {
  return Error{ErrorCode::kParse, std::move(message), SourceLocation{source, static_cast<int>(line), static_cast<int>(column)}};
}

// Column of `key` in the line, for messages (1-based; 1 when absent).
std::size_t key_column(std::string_view line, std::string_view key) {
  std::size_t at = line.find(fmt::format("\"{}\"", key));
  return at == std::string_view::npos ? 1 : at + 1;
}

Result<std::int64_t> integer_field(const Json& row, std::string_view line, const char* key, std::int64_t min,
                                   const std::string& source, std::size_t lineno) {
  auto it = row.find(key);
  if (it == row.end()) return tl::unexpected(row_error(source, lineno, 1, fmt::format("expected key \"{}\", found none", key)));
  if (!it->is_number_integer() && !(it->is_number_float() && it->get<double>() == static_cast<double>(static_cast<std::int64_t>(it->get<double>()))))
    return tl::unexpected(row_error(source, lineno, key_column(line, key), fmt::format("\"{}\": expected an integer, found {}", key, it->dump())));
  std::int64_t v = it->is_number_integer() ? it->get<std::int64_t>() : static_cast<std::int64_t>(it->get<double>());
  if (v < min)
    return tl::unexpected(row_error(source, lineno, key_column(line, key), fmt::format("\"{}\": expected an integer >= {}, found {}", key, min, v)));
  return v;
}

Result<LlmRequest> parse_row(std::string_view line, const std::string& source, std::size_t lineno, int block_tokens) {
  // The strict reader (repeated keys, depth) on the line alone, numbered as in the file.
  auto parsed = parse_json_document(line, source, static_cast<int>(lineno));
  if (!parsed) {
    Error e = parsed.error();
    e.message = "expected one JSON object per line: " + e.message;
    return tl::unexpected(std::move(e));
  }
  const Json& row = *parsed;
  if (!row.is_object()) return tl::unexpected(row_error(source, lineno, 1, fmt::format("expected a JSON object, found {}", row.type_name())));
  auto ts = row.find("timestamp");
  if (ts == row.end()) return tl::unexpected(row_error(source, lineno, 1, "expected key \"timestamp\", found none"));
  if (!ts->is_number() || ts->get<double>() < 0)
    return tl::unexpected(row_error(source, lineno, key_column(line, "timestamp"), fmt::format("\"timestamp\": expected milliseconds >= 0, found {}", ts->dump())));
  LlmRequest r;
  r.arrival_s = ts->get<double>() / 1000.0;
  TOPOSCHED_TRY(in, integer_field(row, line, "input_length", 1, source, lineno));
  TOPOSCHED_TRY(out, integer_field(row, line, "output_length", 1, source, lineno));
  if (in > (1 << 24) || out > (1 << 24))
    return tl::unexpected(row_error(source, lineno, 1, fmt::format("expected lengths below 16M tokens, found input {} output {}", in, out)));
  r.input_tokens = static_cast<int>(in);
  r.output_tokens = static_cast<int>(out);
  auto ids = row.find("hash_ids");
  if (ids == row.end() || !ids->is_array())
    return tl::unexpected(row_error(source, lineno, ids == row.end() ? 1 : key_column(line, "hash_ids"), "expected \"hash_ids\": an array of block ids"));
  std::size_t want = (static_cast<std::size_t>(in) + block_tokens - 1) / block_tokens;
  if (ids->size() != want)
    return tl::unexpected(row_error(source, lineno, key_column(line, "hash_ids"),
                                    fmt::format("expected {} hash_ids for input_length {} ({}-token blocks), found {}", want, in, block_tokens, ids->size())));
  r.block_ids.reserve(want);
  for (const Json& id : *ids) {
    if (!id.is_number_unsigned() && !(id.is_number_integer() && id.get<std::int64_t>() >= 0))
      return tl::unexpected(row_error(source, lineno, key_column(line, "hash_ids"), fmt::format("\"hash_ids\": expected integers >= 0, found {}", id.dump())));
    r.block_ids.push_back(id.get<std::uint64_t>());
  }
  return r;
}

}  // namespace

Result<RequestTrace> parse_mooncake_trace(std::string_view text, const std::string& source, const TraceReadOptions& options) {
  RequestTrace trace;
  trace.source = source;
  std::size_t lineno = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    auto row = parse_row(line, source, lineno, options.block_tokens);
    if (!row) {
      if (options.skip_bad_rows) {
        ++trace.skipped_rows;
        continue;
      }
      return tl::unexpected(row.error());
    }
    trace.requests.push_back(std::move(*row));
  }
  if (trace.requests.empty()) return make_error(ErrorCode::kParse, fmt::format("{}: expected at least one request, found none", source));
  std::stable_sort(trace.requests.begin(), trace.requests.end(),
                   [](const LlmRequest& a, const LlmRequest& b) { return a.arrival_s < b.arrival_s; });
  return trace;
}

Result<RequestTrace> read_mooncake_trace(const std::string& path, const TraceReadOptions& options) {
  TOPOSCHED_TRY(text, read_text_file(path));
  return parse_mooncake_trace(text, path, options);
}

TraceStats trace_stats(const RequestTrace& trace, int block_tokens) {
  TraceStats s;
  std::unordered_set<std::uint64_t> seen;
  double reused = 0, hit_tokens = 0;
  for (const LlmRequest& r : trace.requests) {
    std::size_t prefix = 0;
    bool in_prefix = true;
    for (std::uint64_t id : r.block_ids) {
      bool was = seen.contains(id);
      reused += was;
      if (in_prefix && was) ++prefix;
      else in_prefix = false;
    }
    for (std::uint64_t id : r.block_ids) seen.insert(id);
    hit_tokens += std::min<double>(static_cast<double>(prefix) * block_tokens, r.input_tokens);
    s.blocks += r.block_ids.size();
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
  }
  s.requests = trace.requests.size();
  s.unique_blocks = seen.size();
  s.block_reuse = s.blocks ? reused / static_cast<double>(s.blocks) : 0;
  s.token_hit_upper_bound = s.input_tokens > 0 ? hit_tokens / s.input_tokens : 0;
  if (!trace.requests.empty()) s.duration_s = trace.requests.back().arrival_s - trace.requests.front().arrival_s;
  return s;
}

}  // namespace toposched::router
