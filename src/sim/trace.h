// Trace: the jobs a simulation replays, in the one shape every trace reader produces.
//
// A SimJob is one gang-scheduled request: `gpus` GPUs at once, arriving at `submit_s`,
// running `duration_s` seconds on an ideal placement (no communication penalty). The
// parallelism plan (tp x pp x dp, ep) and the workload class (`kind`: llm-dense, llm-moe,
// dp-vision, inference, or empty = derived from the size) say how it communicates.
// Invariants after a reader returns: gpus >= 1, submit_s >= 0, duration_s > 0, ids unique,
// jobs sorted by (submit_s, input order). Plain values; safe to share read-only across threads.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "topology/error.h"

namespace toposched::sim {

struct SimJob {
  std::string id;
  double submit_s = 0;
  int gpus = 1;
  double duration_s = 1;
  int tp = 0, pp = 0, dp = 0, ep = 0;  // 0 = not given
  std::string gpu_model;              // empty = any
  std::string kind;                   // workload class; empty = derived
  int priority = 0;                   // larger runs first under the `priority` discipline
  double estimate_s = -1;             // user runtime estimate for backfill; < 0 = none
};

struct Trace {
  std::string source;            // file name or "generator"
  std::string format;            // reader that produced it
  std::vector<SimJob> jobs;
  std::size_t skipped_rows = 0;  // rows dropped under --skip-bad-rows
  std::size_t ignored_rows = 0;  // rows that are valid but hold no GPU job (e.g. 0 GPUs)
  std::string first_skip_reason; // the first skipped row's error, for the user
  // False when the source has no submit/run times (e.g. Alibaba's multigpu50 pod list):
  // every submit_s is 0 and duration_s 1 until assign_synthetic_times (generator.h) draws them.
  bool has_times = true;
};

struct TraceReadOptions {
  bool skip_bad_rows = false;  // drop malformed rows (counted) instead of failing
};

// Sorts by submit time (stable) and checks the invariants above; readers call it last.
Result<void> finalize_trace(Trace& trace);

// Largest time a trace may give (submit, duration, estimate), about 317 years. Beyond it a
// double cannot add a second to it (1e23 + 3600 == 1e23), so the simulation would be wrong
// without a word; readers reject such values with their position.
inline constexpr double kMaxTraceSeconds = 1e10;

// A reader found a malformed row: with skip_bad_rows, counts it (keeping the first reason)
// and returns success so the reader goes on; otherwise returns the error.
Result<void> reject_row(Trace& trace, const TraceReadOptions& options, Error error);

}  // namespace toposched::sim
