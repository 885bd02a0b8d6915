// An LLM request trace in Mooncake's JSONL format (github.com/kvcache-ai/Mooncake,
// FAST'25 traces): one JSON object per line with `timestamp` (ms since the trace start),
// `input_length` and `output_length` (tokens) and `hash_ids`, one id per 512-token block of
// the prompt, equal ids meaning equal content with an equal prefix.
// Invariants of a read trace: requests sorted by arrival (stable), input_length >= 1,
// output_length >= 1, hash_ids.size() == ceil(input_length / block_tokens).
// Plain data and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/error.h"

namespace toposched::router {

inline constexpr int kMooncakeBlockTokens = 512;

struct LlmRequest {
  double arrival_s = 0;
  int input_tokens = 0;
  int output_tokens = 0;
  std::vector<std::uint64_t> block_ids;  // the trace's hash_ids
};

struct RequestTrace {
  std::string source;
  std::vector<LlmRequest> requests;
  std::size_t skipped_rows = 0;  // malformed lines skipped under skip_bad_rows
};

struct TraceReadOptions {
  bool skip_bad_rows = false;  // skip malformed lines (counted) instead of failing
  int block_tokens = kMooncakeBlockTokens;
};

// Errors: kIo, or kParse with file:line:col, what was expected and what was found.
Result<RequestTrace> read_mooncake_trace(const std::string& path, const TraceReadOptions& options = {});
Result<RequestTrace> parse_mooncake_trace(std::string_view text, const std::string& source, const TraceReadOptions& options = {});

// What the trace allows any cache at all: block_reuse is the share of all blocks (hash_ids
// entries) whose id appeared earlier in the trace; token_hit_upper_bound the share of input
// tokens a single unlimited cache would serve (the longest already-seen prefix of each
// request, in tokens, capped at its input length).
struct TraceStats {
  std::size_t requests = 0;
  std::size_t blocks = 0;
  std::size_t unique_blocks = 0;
  double input_tokens = 0;
  double output_tokens = 0;
  double duration_s = 0;
  double block_reuse = 0;
  double token_hit_upper_bound = 0;
};
TraceStats trace_stats(const RequestTrace& trace, int block_tokens = kMooncakeBlockTokens);

}  // namespace toposched::router
