// Simulator throughput: a generated LLM-era mix on a DGX H100 cluster, one policy per
// benchmark, single-threaded (simulate_policies would run policies in parallel; here each
// is timed alone). The target: 100,000 jobs on 10,000 GPUs in under 10 s per
// policy. Args: {policy index, jobs, nodes}. Results in docs/performance.md.
#include <benchmark/benchmark.h>

#include "sim/backend.h"
#include "sim/engine.h"
#include "sim/generator.h"
#include "topology/presets.h"

namespace {

using namespace toposched;

void BM_Simulate(benchmark::State& state) {
  auto names = sim::placer_names();
  const std::string policy = names[static_cast<std::size_t>(state.range(0))];
  const int jobs = static_cast<int>(state.range(1));
  const int nodes = static_cast<int>(state.range(2));
  auto cluster = build_preset("dgx-h100?nodes=" + std::to_string(nodes));
  if (!cluster) {
    state.SkipWithError(cluster.error().message.c_str());
    return;
  }
  sim::GeneratorParams p;
  p.jobs = jobs;
  p.max_gpus = 1024;
  // About 85% offered load: a job averages ~30 GPU-hours at these settings (~18 GPUs x 1.65 h).
  p.arrival_rate_per_hour = 0.85 * static_cast<double>(cluster->gpu_count()) / 30.0;
  sim::Trace trace = sim::generate_trace(p);
  auto comm = sim::make_comm_model(*cluster);
  std::size_t events = 0;
  for (auto _ : state) {
    auto placer = sim::make_placer(*cluster, policy, 1);
    sim::EngineOptions o;
    o.discipline = sim::Discipline::kEasyBackfill;
    auto r = sim::run_simulation(*cluster, trace, **placer, *comm, o, policy);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    events = r->events;
    benchmark::DoNotOptimize(r->busy_gpu_seconds);
  }
  state.SetLabel(policy);
  state.counters["jobs"] = jobs;
  state.counters["gpus"] = static_cast<double>(cluster->gpu_count());
  state.counters["events"] = static_cast<double>(events);
  state.counters["jobs_per_s"] = benchmark::Counter(static_cast<double>(jobs) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void Args(benchmark::internal::Benchmark* b) {
  const int policies = static_cast<int>(sim::placer_names().size());
  for (int p = 0; p < policies; ++p) b->Args({p, 100000, 1250});  // 10,000 GPUs
  // Growth with jobs and with cluster size, for the topo policy and first-fit.
  for (int p : {0, policies - 1}) {
    for (int jobs : {10000, 30000}) b->Args({p, jobs, 1250});
    for (int nodes : {312, 625}) b->Args({p, 100000 * nodes / 1250, nodes});
  }
}

BENCHMARK(BM_Simulate)->Apply(Args)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
