// The job and placement files of `toposched cost --job FILE --placement FILE` (formats in
// docs/cost-model.md, "Job and placement files"). Both are YAML or JSON (JSON is read as
// YAML). Errors carry file:line:column and say what was expected and what was found;
// unknown keys in a job file are errors (they are usually typos). yaml-cpp's exceptions are
// caught here and never leave the layer. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cost/job_comm.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

struct JobSpec {
  std::string name;
  ParallelPlan plan;
  WorkloadModel model;
};

// `file` names the input in errors.
Result<JobSpec> parse_job_text(std::string_view text, const std::string& file);
Result<JobSpec> read_job_file(const std::string& path);

// The GPU of each rank, rank 0 first. `gpus:` is a GPU selection string (SEL), a list of
// "NODE:INDEX" strings, or a list of {node, gpu, rank} mappings as `toposched place
// --format json` prints them (rank optional; when given, every rank 0..n-1 exactly once).
// Other top-level keys are ignored, so a `place` output file can be passed as it is.
Result<std::vector<GpuId>> parse_placement_text(const Cluster& cluster, std::string_view text, const std::string& file);
Result<std::vector<GpuId>> read_placement_file(const Cluster& cluster, const std::string& path);

}  // namespace toposched
