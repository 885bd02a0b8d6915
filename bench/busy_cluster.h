// The 100,000-GPU cluster the placement and scale benches decide on, and the busy state they
// start from: 12,500 DGX H100 nodes, each independently fully busy (85%), wholly free (7%)
// or partly busy (8%, 1-7 of its 8 GPUs, uniform), in random positions (89-90% busy).
// One definition so both benches measure the same occupancy.
//
// Thread-safety: big_cluster() is a function-local static (initialised once, then
// read-only); busy_state() builds a new state per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "placement/placement.h"
#include "topology/presets.h"

namespace toposched::bench {

inline const Cluster& big_cluster() {
  static const Cluster c = *build_preset("dgx-h100?nodes=12500");
  return c;
}

inline AllocationState busy_state(std::uint64_t seed) {
  const Cluster& c = big_cluster();
  AllocationState s(c);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<GpuId> gpus;
  for (std::uint32_t n = 0; n < c.node_count(); ++n) {
    double x = u(rng);
    int busy = x < 0.85 ? 8 : x < 0.92 ? 0 : 1 + static_cast<int>(rng() % 7);
    if (!busy) continue;
    std::vector<int> local(8);
    for (int i = 0; i < 8; ++i) local[static_cast<std::size_t>(i)] = i;
    std::shuffle(local.begin(), local.end(), rng);
    gpus.clear();
    for (int i = 0; i < busy; ++i) gpus.push_back(c.node_gpu(NodeId(n), local[static_cast<std::size_t>(i)]));
    std::sort(gpus.begin(), gpus.end());
    (void)s.allocate("bg-" + std::to_string(n), gpus);
  }
  return s;
}

}  // namespace toposched::bench
