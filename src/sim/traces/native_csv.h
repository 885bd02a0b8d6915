// Reader for toposched's own trace format (docs/traces.md): a CSV file with a header;
// required columns id,submit_s,gpus,duration_s, optional tp,pp,dp,ep,gpu_model,kind,
// priority,estimate_s, in any order. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "sim/trace.h"

namespace toposched::sim {

Result<Trace> read_native_csv(std::string_view text, const std::string& file, const TraceReadOptions& options = {});
// Writes a trace in the same format (what the generator's --write-trace produces).
std::string write_native_csv(const Trace& trace);

}  // namespace toposched::sim
