// Loads a trace file in any supported format: "native" (docs/traces.md), "alibaba-v2023",
// "pai-v2020", "philly", "helios", or "auto" (detected from the header / content; a
// directory holding pai_task_table.csv is a PAI trace, its pai_job_table.csv read too).
// Pure function of the files; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.h"
#include "topology/cluster.h"
#include "topology/registry.h"

namespace toposched::sim {

// The readers by format name, "auto" first (its reader is null: load_trace detects the
// format and reads with that one's).
using TraceReader = Result<Trace> (*)(std::string_view text, const std::string& file, const TraceReadOptions& options);
const Registry<TraceReader>& trace_readers();
const std::vector<std::string>& trace_formats();  // trace_readers().names()

Result<Trace> load_trace(const std::string& path, std::string_view format = "auto", const TraceReadOptions& options = {});

// Detects the format of text already read ("" when unknown).
std::string detect_trace_format(std::string_view text, const std::string& file);

}  // namespace toposched::sim

namespace toposched::sim {

// A cluster for the simulator: an Alibaba v2023 node list (detected by its header
// "sn,cpu_milli,memory_mib,gpu,model") becomes a cluster (alibaba_v2023.h); anything else
// goes to load_cluster (a spec file or preset:NAME).
Result<Cluster> load_sim_cluster(const std::string& spec);

}  // namespace toposched::sim
