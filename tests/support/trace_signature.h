// Test helper: everything a trace reader's answer holds that two paths reading the same
// text must agree on (source, format, row counts, each job in order; or the error with its
// file:line:col), as one string, so tests and fuzz targets compare and print it. Pure;
// thread-safe.
#pragma once

#include <string>

#include <fmt/format.h>

#include "sim/trace.h"

namespace toposched::testing {

inline std::string trace_signature(const Result<sim::Trace>& t) {
  if (!t) return "error " + t.error().to_string();
  std::string out = fmt::format("{} {} ignored {} skipped {} {}\n", t->source, t->format, t->ignored_rows, t->skipped_rows,
                                t->first_skip_reason);
  for (const sim::SimJob& j : t->jobs)
    out += fmt::format("{} {} {} {} {}/{}/{}/{} {} {} {} {}\n", j.id, j.submit_s, j.gpus, j.duration_s, j.tp, j.pp, j.dp,
                       j.ep, j.gpu_model, j.kind, j.priority, j.estimate_s);
  return out;
}

}  // namespace toposched::testing
