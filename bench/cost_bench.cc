// Benchmarks of the cost model: one collective estimate on up to 4,096 GPUs (the placement
// engine calls it for every candidate), and a job estimate. Release build; see
// docs/performance.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "cost/collective.h"
#include "cost/job_comm.h"
#include "topology/presets.h"

namespace {

using namespace toposched;

const Cluster& cluster() {
  static const Cluster c = *build_preset("synthetic?nodes=1024&gpus_per_node=8&fanout=32,16");
  return c;
}

std::vector<GpuId> first_gpus(int n, bool shuffled) {
  std::vector<GpuId> g;
  for (int i = 0; i < n; ++i) g.push_back(GpuId(static_cast<std::uint32_t>(i)));
  if (shuffled) std::shuffle(g.begin(), g.end(), std::mt19937(1));
  return g;
}

void BM_AllReduceEstimate(benchmark::State& state) {
  const auto gpus = first_gpus(static_cast<int>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) {
    auto e = estimate_collective(cluster(), gpus, Collective::kAllReduce, 1 << 30);
    benchmark::DoNotOptimize(e);
  }
  state.SetLabel(state.range(1) ? "ranks shuffled" : "ranks in node order");
}
BENCHMARK(BM_AllReduceEstimate)
    ->Args({8, 0})
    ->Args({512, 0})
    ->Args({4096, 0})
    ->Args({4096, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_JobCommEstimate(benchmark::State& state) {
  ParallelPlan plan;
  plan.tp = 8;
  plan.pp = 4;
  plan.dp = static_cast<int>(state.range(0)) / 32;
  const auto gpus = first_gpus(plan.gpus(), false);
  const WorkloadModel model = *workload_class("llm-dense");
  for (auto _ : state) {
    auto e = estimate_job_comm(cluster(), gpus, plan, model);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_JobCommEstimate)->Arg(256)->Arg(4096)->Unit(benchmark::kMicrosecond);

// What the placement engine does per candidate: the ideal computed once, reused.
void BM_JobCommEstimateReusedIdeal(benchmark::State& state) {
  ParallelPlan plan;
  plan.tp = 8;
  plan.pp = 4;
  plan.dp = static_cast<int>(state.range(0)) / 32;
  const auto gpus = first_gpus(plan.gpus(), false);
  const WorkloadModel model = *workload_class("llm-dense");
  const IdealJobComm ideal = *ideal_job_comm(cluster(), plan, model, gpus[0]);
  for (auto _ : state) {
    auto e = estimate_job_comm(cluster(), gpus, plan, model, CostOptions{}, ideal);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_JobCommEstimateReusedIdeal)->Arg(256)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
