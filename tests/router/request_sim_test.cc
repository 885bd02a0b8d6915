// The request simulator: exact cache accounting (acceptance 1), batching and caches on small
// traces, determinism of report.json, and the report's contract keys.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/cluster_source.h"
#include "router/route.h"
#include "topology/hardware.h"

namespace toposched::router {
namespace {

RequestTrace small_trace() {
  auto t = parse_mooncake_trace(
      "{\"timestamp\": 0, \"input_length\": 4096, \"output_length\": 20, \"hash_ids\": [1, 2, 3, 4, 5, 6, 7, 8]}\n"
      "{\"timestamp\": 10, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [9, 10]}\n"
      "{\"timestamp\": 5000, \"input_length\": 4600, \"output_length\": 50, \"hash_ids\": [1, 2, 3, 4, 5, 6, 7, 8, 11]}\n"
      "{\"timestamp\": 5000, \"input_length\": 512, \"output_length\": 3, \"hash_ids\": [1]}\n",
      "small.jsonl");
  EXPECT_TRUE(t) << t.error().to_string();
  return *t;
}

// One worker under the kv policy: the small trace's requests meet in one cache.
RouteOptions one_kv_worker() {
  RouteOptions o;
  o.workers = 1;
  o.policies = {"kv"};
  return o;
}

TEST(RequestSim, OneWorkerUnlimitedCacheHitsWhatTheTraceAllows) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  RouteOptions o = one_kv_worker();
  o.sim.cache_blocks = -1;
  auto run = run_route(*cluster, "one", small_trace(), o);
  ASSERT_TRUE(run) << run.error().to_string();
  const PolicyResult& r = run->results[0];
  ASSERT_EQ(r.requests.size(), 4u);
  EXPECT_EQ(r.requests[0].hit_blocks, 0);
  EXPECT_EQ(r.requests[2].hit_blocks, 8);
  EXPECT_DOUBLE_EQ(r.requests[2].hit_tokens, 4096);
  EXPECT_EQ(r.requests[3].hit_blocks, 1);
  EXPECT_DOUBLE_EQ(r.requests[3].hit_tokens, 512);
  // A cached prefix shortens the first token: request 3 recomputes 504 tokens, request 1
  // computed 4096 with an empty worker.
  EXPECT_LT(r.requests[2].ttft_s, r.requests[0].ttft_s);
  // One-token outputs have no TPOT; the others decode at a few ms per token.
  EXPECT_LT(r.requests[1].tpot_s, 0);
  EXPECT_GT(r.requests[0].tpot_s, 0.001);
  EXPECT_LT(r.requests[0].tpot_s, 0.05);
  for (const RequestOutcome& o2 : r.requests) EXPECT_GE(o2.finish_s, o2.arrival_s + o2.ttft_s);
}

// The small trace on one kv worker of a DGX H100 whose cache holds `cache_blocks` blocks,
// with `host_cache_gb` of host tier on its node.
RouteRun small_bounded_run(long long cache_blocks, double host_cache_gb = 0) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  EXPECT_TRUE(cluster);
  RouteOptions o = one_kv_worker();
  o.sim.cache_blocks = cache_blocks;
  o.sim.host_cache_gb = host_cache_gb;
  auto run = run_route(*cluster, "one", small_trace(), o);
  EXPECT_TRUE(run) << run.error().to_string();
  return run ? std::move(*run) : RouteRun{};
}

TEST(RequestSim, BoundedCacheEvictsAndReportsEvictionsToTheIndex) {
  // Request 1 takes all 9 blocks (8 prompt, 1 output); request 2 waits for it to finish,
  // then needs 2 blocks with 1 free: the least recently used block, request 1's tail, goes.
  // Request 3 (request 1's prompt plus one block) then finds 7 of its blocks.
  RouteRun run = small_bounded_run(9);
  ASSERT_EQ(run.results.size(), 1u);
  const PolicyResult& r = run.results[0];
  EXPECT_GE(r.requests[1].ttft_s + r.requests[1].arrival_s, r.requests[0].finish_s);
  EXPECT_EQ(r.requests[2].hit_blocks, 7);
  EXPECT_EQ(run.info.cache_blocks_per_worker, 9);
}

// The same 9-block cache with a host tier (SimConfig::host_cache_gb): the block request 1
// evicted goes to host memory, and request 3 loads it over PCIe instead of recomputing it,
// in the iteration its prefill starts in.
TEST(RequestSim, AHostTierReturnsEvictedBlocksOverPcie) {
  RouteRun without = small_bounded_run(9), with = small_bounded_run(9, 1);
  ASSERT_EQ(without.results.size(), 1u);
  ASSERT_EQ(with.results.size(), 1u);
  const RequestOutcome& before = without.results[0].requests[2];
  const RequestOutcome& after = with.results[0].requests[2];
  EXPECT_EQ(before.hit_blocks, 7);
  EXPECT_EQ(before.host_blocks, 0);
  EXPECT_EQ(after.hit_blocks, 8);
  EXPECT_EQ(after.host_blocks, 1);
  EXPECT_DOUBLE_EQ(after.hit_tokens, 8 * 512);
  const double block_bytes = 131072.0 * 512;  // Llama-3-8B: 32 layers x 8 KV heads x 128 x 2 x 2 B per token
  EXPECT_EQ(with.info.host_cache_blocks_per_node, static_cast<long long>(1e9 / block_bytes));
  // 512 tokens fewer to compute, one block's load more: earlier, by less than the 512 tokens' prefill.
  TimeModel time(*find_model("llama3-8b"), *find_gpu_spec("H100-SXM5"), 1);
  const double load_s = block_bytes / (pcie_GBps(5, 16) * 1e9);  // an H100 SXM's host link
  EXPECT_LT(after.ttft_s, before.ttft_s);
  EXPECT_GT(after.ttft_s, before.ttft_s - time.prefill_s(512, 7 * 512) + load_s * 0.99);
  // Requests that find nothing in host memory are as before.
  EXPECT_DOUBLE_EQ(with.results[0].requests[0].ttft_s, without.results[0].requests[0].ttft_s);
}

// TTFT = waiting for a pulled prefix + waiting for admission + prefill (report.json's
// ttft_parts). In the 9-block cache above request 2 pulls nothing and waits for request 1 to
// finish before it is admitted; request 1 is admitted on arrival.
TEST(RequestSim, TtftSplitsIntoPullWaitAndPrefill) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  RouteOptions o = one_kv_worker();
  o.sim.cache_blocks = 9;
  auto run = run_route(*cluster, "one", small_trace(), o);
  ASSERT_TRUE(run) << run.error().to_string();
  const auto& reqs = run->results[0].requests;
  for (const RequestOutcome& q : reqs) {
    EXPECT_DOUBLE_EQ(q.ready_s, q.arrival_s);  // one worker: nothing to pull
    EXPECT_GE(q.admitted_s, q.ready_s);
    EXPECT_LT(q.admitted_s, q.arrival_s + q.ttft_s);
  }
  EXPECT_DOUBLE_EQ(reqs[0].admitted_s, reqs[0].arrival_s);
  EXPECT_DOUBLE_EQ(reqs[1].admitted_s, reqs[0].finish_s);
  auto kv = nlohmann::json::parse(route_report_json(*run))["policies"]["kv"];
  const auto& parts = kv["ttft_parts"];
  double wait = 0;
  for (const RequestOutcome& q : reqs) wait += q.admitted_s - q.ready_s;
  EXPECT_EQ(parts["pull_mean_s"].get<double>(), 0.0);
  EXPECT_EQ(parts["router_estimate_mean_s"].get<double>(), 0.0);  // kv makes no first-token estimate
  EXPECT_NEAR(parts["wait_mean_s"].get<double>(), wait / 4, 1e-6);
  EXPECT_GT(parts["wait_mean_s"].get<double>(), 0.0);
  EXPECT_NEAR(parts["pull_mean_s"].get<double>() + parts["wait_mean_s"].get<double>() + parts["prefill_mean_s"].get<double>(),
              kv["ttft_mean_s"].get<double>(), 3e-6);
}

// A pull delays the request's readiness by the transfer; the parts still add up to its TTFT.
TEST(RequestSim, APullIsThePartBeforeTheRequestIsReady) {
  auto cluster = load_cluster(std::string(TOPOSCHED_SOURCE_DIR) + "/examples/h100-2n-25gbe.yaml");
  ASSERT_TRUE(cluster);
  // Eight long prompts on one shared 24-block prefix at once: kv-topo sends some to other
  // workers, which pull the prefix rather than recompute it.
  std::string text;
  for (int k = 0; k < 8; ++k) {
    text += fmt::format("{{\"timestamp\": {}, \"input_length\": 12800, \"output_length\": 200, \"hash_ids\": [", 1000 + k);
    for (int b = 1; b <= 24; ++b) text += fmt::format("{}, ", b);
    text += fmt::format("{}]}}\n", 100 + k);
  }
  text = "{\"timestamp\": 0, \"input_length\": 12288, \"output_length\": 2, \"hash_ids\": [" + [] {
    std::string ids;
    for (int b = 1; b <= 24; ++b) ids += (b > 1 ? ", " : "") + std::to_string(b);
    return ids;
  }() + "]}\n" + text;
  auto trace = parse_mooncake_trace(text, "pulls.jsonl");
  ASSERT_TRUE(trace) << trace.error().to_string();
  RouteOptions o;
  o.workers = 8;
  o.policies = {"kv-topo"};
  auto run = run_route(*cluster, "c", *trace, o);
  ASSERT_TRUE(run) << run.error().to_string();
  int pulled = 0;
  for (const RequestOutcome& q : run->results[0].requests) {
    EXPECT_GE(q.ready_s, q.arrival_s);
    EXPECT_GE(q.admitted_s, q.ready_s);
    if (q.pulled_blocks > 0) {
      ++pulled;
      EXPECT_GT(q.ready_s, q.arrival_s);
    }
  }
  EXPECT_GT(pulled, 0);
  auto p = nlohmann::json::parse(route_report_json(*run))["policies"]["kv-topo"];
  EXPECT_GT(p["ttft_parts"]["pull_mean_s"].get<double>(), 0.0);
  double estimate = 0;
  for (const RequestOutcome& q : run->results[0].requests) {
    EXPECT_GT(q.predicted_ttft_s, 0.0);
    estimate += q.predicted_ttft_s;
  }
  EXPECT_NEAR(p["ttft_parts"]["router_estimate_mean_s"].get<double>(), estimate / 9, 1e-6);
  EXPECT_NEAR(p["ttft_parts"]["pull_mean_s"].get<double>() + p["ttft_parts"]["wait_mean_s"].get<double>() +
                  p["ttft_parts"]["prefill_mean_s"].get<double>(),
              p["ttft_mean_s"].get<double>(), 3e-6);
}

TEST(RequestSim, DisaggregatedMovesTheKvToADecodeWorker) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=2");
  ASSERT_TRUE(cluster);
  RouteOptions o;
  o.workers = 4;
  o.policies = {"kv-topo", "kv"};
  o.sim.disaggregated = true;
  auto run = run_route(*cluster, "two", small_trace(), o);
  ASSERT_TRUE(run) << run.error().to_string();
  for (const PolicyResult& r : run->results) {
    EXPECT_GT(r.kv_bytes_moved, 0) << r.policy;
    for (const RequestOutcome& q : r.requests) {
      EXPECT_LT(q.worker, 2);
      if (q.output_tokens > 1) {
        EXPECT_GE(q.decode_worker, 2);
      }
    }
  }
  // kv-topo picks the decode worker on the prefill worker's node (workers alternate
  // between the two nodes, so worker i is on node i mod 2), where the KV moves over NVLink.
  const PolicyResult& topo = run->results[0];
  for (const RequestOutcome& q : topo.requests)
    if (q.decode_worker >= 0) {
      EXPECT_EQ(q.decode_worker % 2, q.worker % 2);
    }
  EXPECT_GT(topo.kv_bytes_by_level.at("nvlink"), 0);
  o.workers = 1;
  EXPECT_FALSE(run_route(*cluster, "two", small_trace(), o));
}

// Worker 0 computes [5..12] first; worker 1 (worker 0 is busy) [1..4]; 5 s later [1..4] again.
RequestTrace lag_trace() {
  auto t = parse_mooncake_trace(
      "{\"timestamp\": 0, \"input_length\": 4096, \"output_length\": 2, \"hash_ids\": [5, 6, 7, 8, 9, 10, 11, 12]}\n"
      "{\"timestamp\": 1, \"input_length\": 2048, \"output_length\": 2, \"hash_ids\": [1, 2, 3, 4]}\n"
      "{\"timestamp\": 5000, \"input_length\": 2048, \"output_length\": 2, \"hash_ids\": [1, 2, 3, 4]}\n",
      "lag.jsonl");
  EXPECT_TRUE(t) << t.error().to_string();
  return *t;
}

TEST(RequestSim, LateEventsHideACachedPrefixFromTheRouter) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  RouteOptions o;
  o.workers = 2;
  o.policies = {"kv"};
  auto third = [&](double lag_s) {
    o.sim.event_lag_s = lag_s;
    auto run = run_route(*cluster, "c", lag_trace(), o);
    EXPECT_TRUE(run) << run.error().to_string();
    EXPECT_EQ(run->results[0].requests[1].worker, 1);
    return run->results[0].requests[2];
  };
  // Events 1 s late have arrived 5 s later: the prefix is found on worker 1.
  RequestOutcome on_time = third(1.0);
  EXPECT_EQ(on_time.worker, 1);
  EXPECT_EQ(on_time.hit_blocks, 4);
  // 10 s late, the router has seen no event yet: both workers look empty (tie: worker 0).
  RequestOutcome late = third(10.0);
  EXPECT_EQ(late.worker, 0);
  EXPECT_EQ(late.hit_blocks, 0);
}

TEST(RouteRun, BadOptionsAreRejected) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  RouteOptions o;
  o.policies = {"kv", "kv"};
  EXPECT_EQ(run_route(*cluster, "c", small_trace(), o).error().code, ErrorCode::kInvalidArgument);
  o.policies = {"nope"};
  EXPECT_EQ(run_route(*cluster, "c", small_trace(), o).error().code, ErrorCode::kInvalidArgument);
  o.policies = {"kv"};
  o.sim.load_weight = -1;
  EXPECT_EQ(run_route(*cluster, "c", small_trace(), o).error().code, ErrorCode::kInvalidArgument);
  o.sim.load_weight = 1;
  o.sim.predictor_scale = 0;
  EXPECT_EQ(run_route(*cluster, "c", small_trace(), o).error().code, ErrorCode::kInvalidArgument);
  o.sim.predictor_scale = 1;
  o.sim.event_lag_s = -0.1;
  EXPECT_EQ(run_route(*cluster, "c", small_trace(), o).error().code, ErrorCode::kInvalidArgument);
  o.sim.event_lag_s = 0;
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e300}) {
    o.sim.host_cache_gb = bad;
    EXPECT_EQ(run_route(*cluster, "c", small_trace(), o).error().code, ErrorCode::kInvalidArgument) << bad;
  }
  o.sim.host_cache_gb = 0;
  o.model = "llama3-405b";
  o.workers = 1;
  EXPECT_FALSE(run_route(*cluster, "c", small_trace(), o));  // 810 GB of weights on one GPU
  o.model = "llama3-70b";
  o.tp = 4;
  EXPECT_TRUE(run_route(*cluster, "c", small_trace(), o));
}

// --host-cache-gb P%: the share of the workers' node type's host_memory_gb (the DGX H100
// preset's 2,048 GB); refused where the spec does not give it, or above 100 %.
TEST(RouteRun, AHostTierShareIsOfTheNodesHostMemory) {
  auto dgx = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(dgx);
  RouteOptions o = one_kv_worker();
  o.host_cache_share = 0.2;
  auto run = run_route(*dgx, "dgx", small_trace(), o);
  ASSERT_TRUE(run) << run.error().to_string();
  EXPECT_DOUBLE_EQ(run->info.sim.host_cache_gb, 0.2 * 2048);
  EXPECT_EQ(run->info.host_cache_blocks_per_node, static_cast<long long>(0.2 * 2048e9 / (131072.0 * 512)));
  o.host_cache_share = 1.5;
  EXPECT_EQ(run_route(*dgx, "dgx", small_trace(), o).error().code, ErrorCode::kInvalidArgument);
  auto l40s = load_cluster("preset:pcie-l40s?nodes=1");
  ASSERT_TRUE(l40s);
  o.host_cache_share = 0.2;
  auto unknown = run_route(*l40s, "l40s", small_trace(), o);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("host_memory_gb"), std::string::npos) << unknown.error().message;
  // Workers on node types of different memory (a spec may name two): a share names no one size.
  const std::string spec = R"(version: 1
name: mixed
node_types:
  - {name: big, gpu: {model: H100-SXM5, memory_gb: 80, count: 8}, nvlink: {links: 18, GBps_per_link: 25, nvswitch: true}, host_memory_gb: 2199}
  - {name: small, gpu: {model: H100-SXM5, memory_gb: 80, count: 8}, nvlink: {links: 18, GBps_per_link: 25, nvswitch: true}, host_memory_gb: 1099}
nodes:
  - {names: a, type: big}
  - {names: b, type: small}
)";
  auto mixed = load_cluster_text(spec, "mixed.yaml");
  ASSERT_TRUE(mixed) << mixed.error().to_string();
  o.workers = 2;  // workers are spread over the nodes: one on each
  auto differ = run_route(*mixed, "mixed", small_trace(), o);
  ASSERT_FALSE(differ);
  EXPECT_NE(differ.error().message.find("differ in host memory"), std::string::npos) << differ.error().message;
  o.workers = 1;  // one node: its share
  auto one = run_route(*mixed, "mixed", small_trace(), o);
  ASSERT_TRUE(one) << one.error().to_string();
  EXPECT_DOUBLE_EQ(one->info.sim.host_cache_gb, 0.2 * 2199);
  o.host_cache_share = 0;
  o.workers = 2;
  o.sim.host_cache_gb = 100;  // a size in GB is one size for every node
  EXPECT_TRUE(run_route(*mixed, "mixed", small_trace(), o));
}

// Warm-up: the first requests run (they fill the caches, count in the hit rates) but their
// TTFT and TPOT are left out of the figures, and of the unloaded baseline.
TEST(RouteRun, WarmupRequestsAreSimulatedButNotInTheLatencies) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  RouteOptions o = one_kv_worker();
  auto all = run_route(*cluster, "c", small_trace(), o);
  o.sim.warmup_requests = 2;
  auto warm = run_route(*cluster, "c", small_trace(), o);
  ASSERT_TRUE(all && warm);
  const auto& reqs = all->results.front().requests;
  ASSERT_EQ(reqs.size(), 4u);
  // The same simulation: every request's outcome is unchanged.
  for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_DOUBLE_EQ(warm->results.front().requests[i].ttft_s, reqs[i].ttft_s);
  auto j = nlohmann::json::parse(route_report_json(*warm));
  auto ja = nlohmann::json::parse(route_report_json(*all));
  const auto& kv = j["policies"]["kv"];
  EXPECT_EQ(kv["requests"], 4);
  EXPECT_EQ(kv["token_hit_rate"], ja["policies"]["kv"]["token_hit_rate"]);
  // The latencies are those of requests 3 and 4 alone.
  double mean = (reqs[2].ttft_s + reqs[3].ttft_s) / 2;
  EXPECT_NEAR(kv["ttft_mean_s"].get<double>(), mean, 1e-6);
  EXPECT_NEAR(kv["ttft_p99_s"].get<double>(), std::max(reqs[2].ttft_s, reqs[3].ttft_s), 1e-6);
  EXPECT_NE(kv["ttft_mean_s"], ja["policies"]["kv"]["ttft_mean_s"]);
  EXPECT_EQ(j["run"]["warmup_requests"], 2);
  // Unloaded TTFT over requests 3 and 4 alone (4,600 and 512 tokens).
  TimeModel time(*find_model("llama3-8b"), *find_gpu_spec("H100-SXM5"), 1);
  const double u3 = unloaded_ttft_s(time, 4600, 8192), u4 = unloaded_ttft_s(time, 512, 8192);
  EXPECT_NEAR(j["trace"]["unloaded_ttft_mean_s"].get<double>(), (u3 + u4) / 2, 1e-6);
  EXPECT_NEAR(j["trace"]["unloaded_ttft_p99_s"].get<double>(), u3, 1e-6);
  EXPECT_NEAR(ja["trace"]["unloaded_ttft_mean_s"].get<double>(),
              (unloaded_ttft_s(time, 4096, 8192) + unloaded_ttft_s(time, 1000, 8192) + u3 + u4) / 4, 1e-6);
  o.sim.warmup_requests = 4;  // nothing left to measure
  EXPECT_EQ(run_route(*cluster, "c", small_trace(), o).error().code, ErrorCode::kInvalidArgument);
}

TEST(RouteReport, JsonCarriesTheContractAndIsByteStable) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=2");
  ASSERT_TRUE(cluster);
  RouteOptions o;
  o.workers = 4;
  o.policies = {"round-robin", "least-loaded", "kv", "kv-topo", "kv-pull-blind"};
  auto a = run_route(*cluster, "c", small_trace(), o);
  auto b = run_route(*cluster, "c", small_trace(), o);
  ASSERT_TRUE(a && b);
  std::string ja = route_report_json(*a);
  EXPECT_EQ(ja, route_report_json(*b));
  auto j = nlohmann::json::parse(ja);
  for (const char* k : {"requests", "block_reuse", "token_hit_upper_bound"}) EXPECT_TRUE(j["trace"].contains(k)) << k;
  for (const std::string& p : o.policies)
    for (const char* k : {"requests", "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s", "throughput_tokens_per_s",
                          "block_hit_rate", "token_hit_rate", "kv_bytes_moved", "energy_kwh"})
      EXPECT_TRUE(j["policies"][p].contains(k)) << p << " " << k;
  EXPECT_EQ(j["policies"]["kv"]["requests"], 4);
  for (const char* k : {"load_weight", "predictor_scale", "event_lag_s"}) EXPECT_TRUE(j["run"].contains(k)) << k;
  std::string html = route_report_html(*a);
  for (const char* id : {"chart-ttft-cdf", "chart-hit-rate", "chart-kv-bytes", "chart-load-1", "chart-load-5"})
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(route_report_table(*a).find("TTFT p99"), std::string::npos);
}

}  // namespace
}  // namespace toposched::router
