// Fragmentation metrics of an allocation state: wholly free nodes, leaves (tier-0
// switches) and accelerator domains; the largest job placeable at each level (one node, one
// switch of each tier, one domain, anywhere); and the expected number of free GPUs that a
// job drawn from a size distribution cannot use (the fragmentation measure of "Beware of
// Fragmentation", Weng et al., USENIX ATC'23, applied to whole GPUs: a node's free GPUs are
// fragmented for a job size that cannot use them). Pure functions; thread-safe on a const
// state.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/allocation_state.h"
#include "topology/error.h"

namespace toposched {

struct JobSizeWeight {
  int gpus = 1;
  double weight = 1;  // relative; normalised by the metric
};

// A mix of 1- to 64-GPU jobs used when none is given (docs/placement.md).
std::vector<JobSizeWeight> default_job_sizes();
// Parses "1:0.4,8:0.4,64:0.2" (GPUs:weight, comma-separated).
Result<std::vector<JobSizeWeight>> parse_job_sizes(std::string_view text);

struct LevelCapacity {
  std::string level;            // "node", a tier name, "accel-domain", "cluster"
  long largest_free_gpus = 0;   // most free GPUs under one node / switch / domain
  long largest_free_nodes = 0;  // most wholly free nodes under one
};

struct FragmentationReport {
  long free_gpus = 0;
  long total_gpus = 0;
  long free_whole_nodes = 0;
  long total_nodes = 0;
  long free_whole_leaves = 0;
  long total_leaves = 0;
  long free_whole_domains = 0;
  long total_domains = 0;
  long partially_used_nodes = 0;
  std::vector<LevelCapacity> levels;  // node, tiers closest first, accel-domain, cluster
  // Expected free GPUs unusable by a job drawn from the distribution, and as a fraction of
  // the free GPUs.
  double expected_unusable_gpus = 0;
  double unusable_fraction = 0;
};

FragmentationReport fragmentation(const AllocationState& state, const std::vector<JobSizeWeight>& sizes);

// One node's share of expected_unusable_gpus: of its `free` GPUs (of `node_gpus`), how many
// a job drawn from `sizes` cannot use, in expectation. A placement policy compares this
// before and after taking GPUs (fragmentation gradient descent, Weng et al.).
double expected_unusable_on_node(int free, int node_gpus, const std::vector<JobSizeWeight>& sizes);

// The `frag` JSON (also GET /v1/fragmentation): the report's counters, "largest_placeable",
// "job_sizes", "expected_unusable_gpus", "unusable_fraction".
nlohmann::ordered_json fragmentation_to_json(const FragmentationReport& report, const std::vector<JobSizeWeight>& sizes);

}  // namespace toposched
