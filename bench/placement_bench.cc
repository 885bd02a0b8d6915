// Placement engine at scale: a 100,000-GPU cluster (12,500 DGX H100 nodes, SuperPOD tree)
// at about 90% random occupancy.
//
//  - BM_TopoDecide: one `topo` decision (select + check_placement, state unchanged) for a
//    request drawn from the job-size mix below; p50/p99/max per decision as counters.
//    BM_TopoPlaceWithPrediction: the same through place(), which also runs the cost model on
//    the chosen GPUs and writes the explanation. BM_TopoDecideBySize, BM_TopoPlaceBySize:
//    one size at a time.
//  - BM_AllocateRelease: allocate + release of a whole-node job at a random free spot;
//    reports the time per node touched.
//
// Occupancy: every node independently is fully busy (85%), wholly free (7%) or partly busy
// (8%, 1-7 of its 8 GPUs busy, uniform), in random positions: 89-90% of GPUs busy.
// Job-size mix (GPUs: share): 1: 20%, 2: 10%, 4: 10%, 8: 15%, 16: 10%, 32: 10%, 64: 8%,
// 128: 6%, 256: 5%, 512: 3%, 1024: 1.5%, 2048: 0.8%, 4096: 0.7%; jobs of 8+ GPUs use tp=8,
// of 256+ GPUs also pp=4; smaller ones tp = their size.

#include <algorithm>
#include <chrono>
#include <random>

#include <benchmark/benchmark.h>

#include "busy_cluster.h"

#include "placement/placement.h"
#include "topology/presets.h"

namespace toposched {
namespace {

using bench::big_cluster;
using bench::busy_state;
using bench::draw_request;
using bench::thread_cpu_us;

// The decision: the policy's choice of GPUs and rank order, checked against the request
// (PlacementPolicy::select + check_placement). `full` adds what place() derives for the
// report: the cost model's prediction of the chosen placement and the explanation.
void run_decisions(benchmark::State& st, bool full) {
  const Cluster& c = big_cluster();
  static const AllocationState s = busy_state(42);
  const PlacementPolicy& topo = **find_policy("topo");
  std::mt19937_64 rng(7);
  std::vector<double> us, wall_us;
  long feasible = 0;
  for (auto _ : st) {
    JobRequest r = *normalize(draw_request(rng), c);
    const double c0 = thread_cpu_us();
    auto t0 = std::chrono::steady_clock::now();
    bool ok;
    if (full) {
      auto p = place(s, r, topo);
      ok = p.has_value();
      benchmark::DoNotOptimize(p);
    } else {
      auto g = topo.select(s, r, {});
      ok = g && check_placement(s, r, *g);
      benchmark::DoNotOptimize(g);
    }
    auto t1 = std::chrono::steady_clock::now();
    const double c1 = thread_cpu_us();
    feasible += ok;
    us.push_back(c1 - c0);
    wall_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::sort(wall_us.begin(), wall_us.end());
  auto q = [](const std::vector<double>& v, double f) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(f * static_cast<double>(v.size())))];
  };
  st.counters["p50_us"] = q(us, 0.50);
  st.counters["p99_us"] = q(us, 0.99);
  st.counters["max_us"] = us.back();
  st.counters["wall_p99_us"] = q(wall_us, 0.99);
  st.counters["feasible_pct"] = 100.0 * static_cast<double>(feasible) / static_cast<double>(us.size());
  st.counters["free_gpus"] = static_cast<double>(s.total_free_gpus());
}

void BM_TopoDecide(benchmark::State& st) { run_decisions(st, false); }
void BM_TopoPlaceWithPrediction(benchmark::State& st) { run_decisions(st, true); }
BENCHMARK(BM_TopoDecide)->Iterations(3000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopoPlaceWithPrediction)->Iterations(1000)->Unit(benchmark::kMicrosecond);

// A request of the mix's shape for `gpus` GPUs: tp up to 8, pp 4 from 256 GPUs.
JobRequest request_of_size(const Cluster& c, int gpus) {
  JobRequest r;
  r.gpus = gpus;
  r.tp = std::min(r.gpus, 8);
  r.pp = r.gpus >= 256 ? 4 : 1;
  return *normalize(r, c);
}

// One request size at a time (same shapes as the mix), to see where the time goes.
void BM_TopoDecideBySize(benchmark::State& st) {
  const Cluster& c = big_cluster();
  static const AllocationState s = busy_state(42);
  const PlacementPolicy& topo = **find_policy("topo");
  const JobRequest r = request_of_size(c, static_cast<int>(st.range(0)));
  for (auto _ : st) {
    auto g = topo.select(s, r, {});
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK(BM_TopoDecideBySize)->Arg(1)->Arg(8)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMicrosecond);

// place() with the prediction and the explanation, one size at a time: the jobs that set
// BM_TopoPlaceWithPrediction's p99 (1,024-4,096 GPUs), for profiles and A/B runs.
void BM_TopoPlaceBySize(benchmark::State& st) {
  const Cluster& c = big_cluster();
  static const AllocationState s = busy_state(42);
  const PlacementPolicy& topo = **find_policy("topo");
  const JobRequest r = request_of_size(c, static_cast<int>(st.range(0)));
  for (auto _ : st) {
    auto p = place(s, r, topo);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_TopoPlaceBySize)->Arg(256)->Arg(1024)->Arg(2048)->Arg(4096)->Unit(benchmark::kMicrosecond);

void BM_AllocateRelease(benchmark::State& st) {
  const Cluster& c = big_cluster();
  AllocationState s = busy_state(43);
  const int nodes = static_cast<int>(st.range(0));
  // Whole free nodes to allocate from.
  std::vector<NodeId> free_nodes;
  for (std::uint32_t n = 0; n < c.node_count(); ++n)
    if (s.node_whole_free(NodeId(n))) free_nodes.push_back(NodeId(n));
  std::mt19937_64 rng(9);
  std::vector<GpuId> gpus;
  for (auto _ : st) {
    st.PauseTiming();
    gpus.clear();
    std::size_t start = rng() % (free_nodes.size() - static_cast<std::size_t>(nodes));
    for (int k = 0; k < nodes; ++k)
      for (int l = 0; l < 8; ++l) gpus.push_back(c.node_gpu(free_nodes[start + static_cast<std::size_t>(k)], l));
    st.ResumeTiming();
    auto ok = s.allocate("job", gpus);
    auto back = s.release("job");
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(back);
  }
  // Rate of "millions of nodes per second", inverted: microseconds per node (allocate + release).
  st.counters["per_node_us"] = benchmark::Counter(static_cast<double>(st.iterations()) * nodes * 1e-6,
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AllocateRelease)->Arg(1)->Arg(8)->Arg(64)->Arg(512)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace toposched

BENCHMARK_MAIN();
