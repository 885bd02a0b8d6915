// The 100,000-GPU cluster the placement and scale benches decide on, and the busy state they
// start from: 12,500 DGX H100 nodes, each independently fully busy (85%), wholly free (7%)
// or partly busy (8%, 1-7 of its 8 GPUs, uniform), in random positions (89-90% busy).
// Also the job-size mix both draw from and the per-thread CPU clock they time with. One
// definition so both benches measure the same occupancy, jobs and clock.
//
// Job-size mix (GPUs: share): 1: 20%, 2: 10%, 4: 10%, 8: 15%, 16: 10%, 32: 10%, 64: 8%,
// 128: 6%, 256: 5%, 512: 3%, 1024: 1.5%, 2048: 0.8%, 4096: 0.7%; tp = min(size, 8), pp = 4
// from 256 GPUs.
//
// Thread-safety: for one bench thread at a time: cluster_of_nodes() (and big_cluster()) keep
// the clusters built in a function-local map, read-only once built; busy_state() builds a
// new state per call; draw_request() shares one distribution object.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "placement/placement.h"
#include "topology/presets.h"

namespace toposched::bench {

// `nodes` DGX H100 nodes, built once per size (the growth benches use 1,250 and 3,750 too).
inline const Cluster& cluster_of_nodes(int nodes) {
  static std::map<int, Cluster> built;
  auto it = built.find(nodes);
  if (it == built.end()) it = built.emplace(nodes, *build_preset(fmt::format("dgx-h100?nodes={}", nodes))).first;
  return it->second;
}

inline const Cluster& big_cluster() { return cluster_of_nodes(12500); }

inline AllocationState busy_state(std::uint64_t seed, const Cluster& c = big_cluster()) {
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

// A request of the mix, of at most max_gpus GPUs (redrawn until it is; with the default,
// every draw is kept).
inline JobRequest draw_request(std::mt19937_64& rng, int max_gpus = 4096) {
  static const int kSizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  static const double kShare[] = {20, 10, 10, 15, 10, 10, 8, 6, 5, 3, 1.5, 0.8, 0.7};
  static std::discrete_distribution<int> pick(std::begin(kShare), std::end(kShare));
  JobRequest r;
  do r.gpus = kSizes[pick(rng)];
  while (r.gpus > max_gpus);
  r.tp = std::min(r.gpus, 8);
  r.pp = r.gpus >= 256 ? 4 : 1;
  return r;
}

// CPU time of this thread, in microseconds: the VM's two cores are shared with other users,
// so wall-clock quantiles measure their load more than ours.
inline double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

}  // namespace toposched::bench
