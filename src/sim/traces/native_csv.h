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
// One CSV field as the writers here quote it (RFC 4180): a field holding a comma, a quote or
// a line break, or starting with '#' (the reader's comment mark), is quoted, quotes doubled.
std::string csv_field(const std::string& s);

}  // namespace toposched::sim
