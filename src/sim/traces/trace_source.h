// Loads a trace file in any supported format: "native" (docs/traces.md), "alibaba-v2023",
// "pai-v2020", "philly", "helios", or "auto" (detected from the header / content; a
// directory holding pai_task_table.csv is a PAI trace, its pai_job_table.csv read too).
// Pure function of the files; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.h"

namespace toposched::sim {

const std::vector<std::string>& trace_formats();  // the names above, "auto" first

Result<Trace> load_trace(const std::string& path, std::string_view format = "auto", const TraceReadOptions& options = {});

// Detects the format of text already read ("" when unknown).
std::string detect_trace_format(std::string_view text, const std::string& file);

}  // namespace toposched::sim
