// Benchmarks of the topology model: building a 100,000-GPU cluster and path queries on it.
// Results and the command that produced them: docs/performance.md.
#include <benchmark/benchmark.h>

#include <random>

#include "topology/presets.h"

namespace toposched {
namespace {

void BM_BuildPreset(benchmark::State& state, const char* spec) {
  std::size_t gpus = 0;
  for (auto _ : state) {
    auto c = build_preset(spec);
    if (!c) state.SkipWithError(c.error().message.c_str());
    gpus = c->gpu_count();
    benchmark::DoNotOptimize(c);
  }
  state.counters["gpus"] = static_cast<double>(gpus);
}
BENCHMARK_CAPTURE(BM_BuildPreset, synthetic_100k_gpus, "synthetic?nodes=12500")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildPreset, dgx_h100_100k_gpus, "dgx-h100?nodes=12500")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildPreset, llama3_24k_gpus, "llama3-24k")->Unit(benchmark::kMillisecond);

// Random GPU pairs over the whole cluster (mostly inter-node, the deepest walks).
void BM_PathQuery(benchmark::State& state, const char* spec) {
  auto c = build_preset(spec);
  if (!c) {
    state.SkipWithError(c.error().message.c_str());
    return;
  }
  std::mt19937 rng(1);
  std::vector<std::pair<GpuId, GpuId>> pairs(4096);
  std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(c->gpu_count() - 1));
  for (auto& p : pairs) p = {GpuId(pick(rng)), GpuId(pick(rng))};
  std::size_t i = 0;
  double sink = 0;
  for (auto _ : state) {
    const auto& [a, b] = pairs[i++ & 4095];
    Path p = c->path(a, b);
    sink += p.bandwidth_GBps;
    benchmark::DoNotOptimize(sink);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_PathQuery, synthetic_100k_gpus, "synthetic?nodes=12500");
BENCHMARK_CAPTURE(BM_PathQuery, dgx_h100_100k_gpus, "dgx-h100?nodes=12500");
BENCHMARK_CAPTURE(BM_PathQuery, llama3_24k_gpus, "llama3-24k");

// Pairs inside one node: the table lookup path.
void BM_PathQueryIntraNode(benchmark::State& state) {
  auto c = build_preset("dgx-h100?nodes=12500");
  std::mt19937 rng(2);
  std::vector<std::pair<GpuId, GpuId>> pairs(4096);
  for (auto& p : pairs) {
    NodeId n(static_cast<std::uint32_t>(rng() % c->node_count()));
    p = {c->node_gpu(n, static_cast<int>(rng() % 8)), c->node_gpu(n, static_cast<int>(rng() % 8))};
  }
  std::size_t i = 0;
  double sink = 0;
  for (auto _ : state) {
    const auto& [a, b] = pairs[i++ & 4095];
    sink += c->path(a, b).latency_us;
    benchmark::DoNotOptimize(sink);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PathQueryIntraNode);

}  // namespace
}  // namespace toposched

BENCHMARK_MAIN();
