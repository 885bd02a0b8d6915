#include "sim/trace.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace toposched::sim {

Result<void> finalize_trace(Trace& trace) {
  std::unordered_set<std::string> ids;
  ids.reserve(trace.jobs.size());
  for (const SimJob& j : trace.jobs) {
    if (j.gpus < 1) return make_error(ErrorCode::kValidation, fmt::format("job '{}' asks for {} GPUs", j.id, j.gpus));
    if (!(j.duration_s > 0 && j.duration_s <= kMaxTraceSeconds)) return make_error(ErrorCode::kValidation, fmt::format("job '{}' has duration {} s", j.id, j.duration_s));
    if (!(j.submit_s >= 0 && j.submit_s <= kMaxTraceSeconds)) return make_error(ErrorCode::kValidation, fmt::format("job '{}' is submitted at {} s", j.id, j.submit_s));
    if (!ids.insert(j.id).second)
      return make_error(ErrorCode::kValidation, fmt::format("job id '{}' appears twice in {}", j.id, trace.source));
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const SimJob& a, const SimJob& b) { return a.submit_s < b.submit_s; });
  return {};
}

Result<void> reject_row(Trace& trace, const TraceReadOptions& options, Error error) {
  if (!options.skip_bad_rows) return tl::unexpected(std::move(error));
  if (trace.skipped_rows++ == 0) trace.first_skip_reason = error.to_string();
  return {};
}

}  // namespace toposched::sim
