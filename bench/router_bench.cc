// Router speed (issue 15, acceptance 4), Release build:
//  - BM_RouteDecision: one routing decision (the policy's choice over every worker, prefix
//    lookup included) with 64 workers on 8 DGX H100 nodes and 1,000,000 cached blocks in the
//    KV index, 512 requests active. Reports p50 and p99 of single decisions timed one by
//    one (counters p50_us, p99_us), over 20,000 queries that share prefixes with the cache.
//  - BM_RouteDecisionHostTier: the same with a host tier holding another 1M blocks (each
//    prompt also in the next worker's host memory) that kv-topo weighs.
//  - BM_TraceReplay: the bundled 12,031-request Mooncake trace simulated under one policy,
//    8 Llama-3-8B workers on 2 DGX H100 nodes (the trace is read once, outside the timing).
//  - BM_EngineEventIngest: vLLM KV event batches (msgpack, tagged arrays, 16-token blocks)
//    decoded, their tokens hashed, translated and applied to the index of a RouterService
//    on one thread: counter events_per_s (one BlockStored of 4 blocks or one BlockRemoved
//    each), 64 workers.
// Results in docs/performance.md and docs/router.md.
#include <benchmark/benchmark.h>

#include <msgpack.hpp>

#include <algorithm>
#include <chrono>

#include "router/api.h"
#include "router/kv_events.h"
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

// `saturated`: every worker's active requests hold more blocks than its cache (200 blocks)
// and it has released blocks lately, with a clock (RouteQuery::now_s), so that kv-topo's
// wait for cache room (Router::cache_wait_s) and eviction term are on for every worker.
// `host_tier`: every prompt is also in the host memory of the next worker's node (a second
// index of 1M blocks; Router::host_index), with each worker's PCIe load rate set, so that
// kv-topo weighs host-tier prefixes on every decision.
void route_decision(benchmark::State& state, bool saturated, bool host_tier = false) {
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
  RouterConfig config;
  if (saturated) config.cache_blocks = 200;
  Router router(*policy, kWorkers, time, *table, config);
  const double now = saturated ? 0.0 : -1.0;
  // 1M cached blocks: 41,667 prompts of 24 blocks, each on one worker (some on two).
  std::vector<std::uint64_t> seq;
  std::uint64_t prompts = 0;
  while (router.index().distinct_blocks() < 1'000'000) {
    sequence_hashes(prompt_ids(prompts), seq);
    for (std::uint64_t h : seq) router.index().store(static_cast<int>(prompts % kWorkers), h);
    if (host_tier)
      for (std::uint64_t h : seq) router.host_index().store(static_cast<int>((prompts + 1) % kWorkers), h);
    ++prompts;
  }
  if (host_tier) {
    const double load_s = time.model().kv_bytes_per_token() * 512 / (cluster->node_type(NodeId(0)).pcie_GBps * 1e9);
    router.set_host_load_s_per_block(std::vector<double>(kWorkers, load_s));
  }
  // 512 active requests, 8 per worker on average (saturated: 64 more, routed and finished).
  const std::uint64_t extra = saturated ? 64 : 0;
  for (std::uint64_t r = 0; r < 512 + extra; ++r) {
    sequence_hashes(prompt_ids(r * 7), seq);
    router.route(r, {seq, 24 * 512, now});
  }
  for (std::uint64_t r = 0; r < extra; ++r) router.finished(r);
  std::vector<std::vector<std::uint64_t>> queries(20000);
  for (std::size_t q = 0; q < queries.size(); ++q) sequence_hashes(prompt_ids((q * 131) % (prompts + prompts / 4)), queries[q]);
  std::vector<double> us;
  us.reserve(queries.size());
  for (auto _ : state) {
    us.clear();
    for (const auto& q : queries) {
      auto t0 = std::chrono::steady_clock::now();
      RouteDecision d = policy->choose(router, {q, 24 * 512, now});
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
  int full = 0;  // workers a new 24-block prompt would wait at for cache room
  for (int w = 0; w < kWorkers; ++w) full += router.cache_wait_s(w, static_cast<double>(router.load(w).active_blocks) + 24) > 0;
  state.counters["full_workers"] = full;
}

void BM_RouteDecision(benchmark::State& state) { route_decision(state, false); }
void BM_RouteDecisionSaturated(benchmark::State& state) { route_decision(state, true); }
void BM_RouteDecisionHostTier(benchmark::State& state) { route_decision(state, false, true); }

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

// Worker w's batch k: a BlockStored of 4 blocks continuing its chain (a new chain every 64
// batches), and every 4th batch also a BlockRemoved of the oldest chain's blocks.
std::vector<char> engine_batch(std::uint64_t w, std::uint64_t k) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> p(buf);
  const bool remove = k % 4 == 3 && k >= 128;
  p.pack_array(3);
  p.pack_double(static_cast<double>(k));
  p.pack_array(remove ? 2 : 1);
  const std::uint64_t base = (w << 40) + k * 4;
  p.pack_array(7);
  p.pack(std::string("BlockStored"));
  p.pack_array(4);
  for (std::uint64_t b = 0; b < 4; ++b) p.pack_uint64(base + b + 1);
  if (k % 64 == 0) p.pack_nil();
  else p.pack_uint64(base);
  p.pack_array(64);
  for (std::uint64_t t = 0; t < 64; ++t) p.pack_uint32(static_cast<std::uint32_t>((base * 64 + t) % 128000));
  p.pack(16), p.pack_nil(), p.pack(std::string("GPU"));
  if (remove) {
    p.pack_array(3);
    p.pack(std::string("BlockRemoved"));
    p.pack_array(4);
    const std::uint64_t old = (w << 40) + (k - 128) * 4;
    for (std::uint64_t b = 0; b < 4; ++b) p.pack_uint64(old + b + 1);
    p.pack_nil();
  }
  p.pack(0);  // dp_rank: the batch is [ts, events, dp_rank]
  return {buf.data(), buf.data() + buf.size()};
}

void BM_EngineEventIngest(benchmark::State& state) {
  auto cluster = build_preset("dgx-h100?nodes=8");
  auto service = cluster ? RouterService::create(*cluster, {"llama3-8b", 64, 1, "kv", 16}) : tl::unexpected(cluster.error());
  if (!service) {
    state.SkipWithError("setup failed");
    return;
  }
  constexpr std::uint64_t kPerWorker = 2048;
  std::vector<std::vector<char>> batches;
  for (std::uint64_t k = 0; k < kPerWorker; ++k)
    for (std::uint64_t w = 0; w < 64; ++w) batches.push_back(engine_batch(w, k));
  std::size_t events = 0, refused = 0;
  double seconds = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < batches.size(); ++i) {
      auto b = decode_engine_batch(std::as_bytes(std::span<const char>(batches[i])));
      auto ev = b ? engine_batch_to_router_events(*b, i % 64, 16) : tl::unexpected(b.error());
      if (!ev) {
        state.SkipWithError(ev.error().to_string().c_str());
        return;
      }
      auto out = (*service)->apply_to_slot(static_cast<int>(i % 64), *ev);
      events += ev->size();
      refused += out.refused;
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  state.counters["events_per_s"] = static_cast<double>(events) / seconds;
  state.counters["refused"] = static_cast<double>(refused);
}

void Policies(benchmark::internal::Benchmark* b) {
  for (std::size_t p = 0; p < policy_catalog().size(); ++p) b->Arg(static_cast<long>(p));
}

BENCHMARK(BM_RouteDecision)->Apply(Policies)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RouteDecisionSaturated)->Apply(Policies)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RouteDecisionHostTier)->Apply(Policies)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceReplay)->Apply(Policies)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EngineEventIngest)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
