// What a GPU draws in each state the simulator tells apart, for the energy split of a run:
//  - busy_w: computing (a job's ideal work): the board's power limit (TDP), which dense
//    training reaches;
//  - comm_w: running but stalled on communication (the time a placement adds to a job):
//    NCCL kernels poll on few SMs, so the draw sits between idle and TDP;
//  - idle_w: allocated to no job, driver loaded (what a scheduled-but-empty GPU draws).
// Defaults per GPU product from the hardware table (topology/hardware.h: TDP and idle draw
// per product, with sources; docs/simulator.md); a node type's `gpu.power` in the cluster spec
// overrides any of them. Invariant: 0 <= idle_w <= comm_w <= busy_w for the defaults (an
// override is taken as given). Constant data and pure functions; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "topology/cluster.h"

namespace toposched::sim {

struct GpuPower {
  double busy_w = 0;
  double comm_w = 0;
  double idle_w = 0;
};

// One row of the defaults: the product (the hardware table's key, matched as a
// case-insensitive substring of the GPU model name, spaces and dashes ignored, first row
// that matches wins) and where the figures come from.
struct GpuPowerRow {
  std::string_view key;
  std::string_view product;
  GpuPower power;
  std::string_view source;
};
const std::vector<GpuPowerRow>& gpu_power_table();

// The defaults for a GPU model name; an unknown model gets the A100's figures (the
// simulator's compute-time fallback is the A100 as well).
GpuPower default_gpu_power(std::string_view gpu_model);

// A node type's figures: the spec's `gpu.power` where set, else the product's defaults.
GpuPower gpu_power(const NodeType& type);

}  // namespace toposched::sim
