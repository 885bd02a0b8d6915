// Router speed (issue 15, acceptance 4), Release build:
//  - BM_RouteDecision: one routing decision (the policy's choice over every worker, prefix
//    lookup included) with 64 workers on 8 DGX H100 nodes and 1,000,000 cached blocks in the
//    KV index, 512 requests active. Reports p50 and p99 of single decisions timed one by
//    one (counters p50_us, p99_us), over 20,000 queries that share prefixes with the cache.
//  - BM_TraceReplay: the bundled 12,031-request Mooncake trace simulated under one policy,
//    8 Llama-3-8B workers on 2 DGX H100 nodes (the trace is read once, outside the timing).
// Results in docs/performance.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "router/request_sim.h"
#include "router/route.h"
#include "router/router.h"
#include "topology/presets.h"

namespace {

using namespace toposched;
using namespace toposched::router;

// Prompt p: 24 blocks; the first 8 shared by a family of 16 prompts (system prompts), the
// rest its own.
std::vector<std::uint64_t> prompt_ids(std::uint64_t p) {
  std::vector<std::uint64_t> ids;
  for (std::uint64_t b = 0; b < 8; ++b) ids.push_back((p / 16) * 8 + b);
  for (std::uint64_t b = 0; b < 16; ++b) ids.push_back(1'000'000'000 + p * 16 + b);
  return ids;
}

void BM_RouteDecision(benchmark::State& state) {
  const PolicyEntry* policy = &policy_catalog()[static_cast<std::size_t>(state.range(0))];
  constexpr int kWorkers = 64;
  auto cluster = build_preset("dgx-h100?nodes=8");
  auto workers = place_workers(*cluster, kWorkers, 1);
  TimeModel time(*find_model("llama3-8b"), *find_gpu_spec("H100"), 1);
  auto table = transfer_table(*cluster, *workers, time.model().kv_bytes_per_token() * 512);
  if (!cluster || !workers || !table) {
    state.SkipWithError("setup failed");
    return;
  }
  Router router(*policy, kWorkers, time, *table);
  // 1M cached blocks: 41,667 prompts of 24 blocks, each on one worker (some on two).
  std::vector<std::uint64_t> seq;
  std::uint64_t prompts = 0;
  while (router.index().distinct_blocks() < 1'000'000) {
    sequence_hashes(prompt_ids(prompts), seq);
    for (std::uint64_t h : seq) router.index().store(static_cast<int>(prompts % kWorkers), h);
    ++prompts;
  }
  // 512 active requests, 8 per worker on average.
  for (std::uint64_t r = 0; r < 512; ++r) {
    sequence_hashes(prompt_ids(r * 7), seq);
    router.route(r, {seq, 24 * 512});
  }
  std::vector<std::vector<std::uint64_t>> queries(20000);
  for (std::size_t q = 0; q < queries.size(); ++q) sequence_hashes(prompt_ids((q * 131) % (prompts + prompts / 4)), queries[q]);
  std::vector<double> us;
  us.reserve(queries.size());
  for (auto _ : state) {
    us.clear();
    for (const auto& q : queries) {
      auto t0 = std::chrono::steady_clock::now();
      RouteDecision d = policy->choose(router, {q, 24 * 512});
      auto t1 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(d);
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  std::sort(us.begin(), us.end());
  state.SetLabel(std::string(policy->name));
  state.counters["cached_blocks"] = static_cast<double>(router.index().distinct_blocks());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[us.size() * 99 / 100];
}

void BM_TraceReplay(benchmark::State& state) {
  const PolicyEntry* policy = &policy_catalog()[static_cast<std::size_t>(state.range(0))];
  static const RequestTrace trace = [] {
    auto t = read_mooncake_trace(std::string(TOPOSCHED_SOURCE_DIR) + "/tests/data/traces/mooncake/conversation_trace.jsonl");
    return t ? *t : RequestTrace{};
  }();
  if (trace.requests.empty()) {
    state.SkipWithError("cannot read the bundled trace");
    return;
  }
  auto cluster = build_preset("dgx-h100?nodes=2");
  RouteOptions o;
  o.workers = 8;
  o.policies = {std::string(policy->name)};
  for (auto _ : state) {
    auto run = run_route(*cluster, "dgx-h100-2n", trace, o);
    if (!run) {
      state.SkipWithError(run.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(run->results.front().busy_gpu_s);
  }
  state.SetLabel(std::string(policy->name));
  state.counters["requests"] = static_cast<double>(trace.requests.size());
}

void Policies(benchmark::internal::Benchmark* b) {
  for (std::size_t p = 0; p < policy_catalog().size(); ++p) b->Arg(static_cast<long>(p));
}

BENCHMARK(BM_RouteDecision)->Apply(Policies)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceReplay)->Apply(Policies)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
