// `toposched route` as a library call: load the cluster and the trace, place the workers,
// simulate each routing policy, and render the outputs:
//  - route_report_json: the DESIGN.md contract {"trace":{"requests","block_reuse",
//    "token_hit_upper_bound"},"policies":{NAME:{"requests","ttft_mean_s","ttft_p50_s",
//    "ttft_p99_s","tpot_mean_s","tpot_p99_s","throughput_tokens_per_s","block_hit_rate",
//    "token_hit_rate","kv_bytes_moved","energy_kwh"}}} plus more keys and a "run" object.
//    A pure function of the run (no clock, no host; fixed decimals): reruns give the same
//    bytes.
//  - route_report_table: the terminal comparison, one column per policy.
//  - route_report_html: one self-contained page in formats/html_page's shell (the look of
//    `simulate`'s report): TTFT CDF per policy, cache hit rates, KV bytes moved per link
//    level, active requests per worker over time.
// write_route_report writes report.html, then report.json, atomically; on failure it leaves
// neither new file behind. Functions are reentrant.
#pragma once

#include <string>
#include <vector>

#include "router/request_sim.h"
#include "router/request_trace.h"

namespace toposched::router {

struct RouteOptions {
  std::string cluster;   // SPEC
  std::string trace;     // Mooncake JSONL
  std::string model = "llama3-8b";
  int workers = 8;
  int tp = 1;
  std::vector<std::string> policies = {"round-robin", "kv", "kv-topo"};
  bool skip_bad_rows = false;
  bool find_load = false;  // --find-load: also sweep the rate for the light, knee and overload points
  // --host-cache-gb P%: the host tier as this share (0..1] of the workers' node's system memory
  // (NodeType::host_memory_gb, from the cluster spec); > 0 replaces sim.host_cache_gb.
  double host_cache_share = 0;
  SimConfig sim;
};

// What the trace costs without load and without routing: every prompt's prefill alone on an
// idle worker (unloaded TTFT), and what one LRU cache of the whole cluster's KV would serve.
struct LoadBaseline {
  double unloaded_ttft_mean_s = 0;
  double unloaded_ttft_p99_s = 0;
  double oracle_token_hit_rate = 0;
  long long oracle_cache_blocks = 0;  // -1: unlimited
};

// --find-load: round-robin's TTFT p99 over the unloaded p99 at each speed tried, and the
// three load points: light (the trace's own rate, when that ratio is <= 1.3 there), knee
// (the smallest speed tried with a ratio >= 2) and overload (>= 5), each with every policy.
struct SweepStep {
  double speed = 0;
  double round_robin_ttft_p99_s = 0;
  double ratio = 0;
};
struct LoadPoint {
  std::string name;  // light, knee, overload
  double speed = 0;
  double ratio = 0;
  std::vector<PolicyResult> results;
};

struct RouteRunInfo {
  std::string cluster;
  std::size_t cluster_nodes = 0, cluster_gpus = 0;
  std::string model, gpu;
  int workers = 0, tp = 0;
  std::string trace;
  std::size_t skipped_rows = 0;
  SimConfig sim;
  long long cache_blocks_per_worker = 0;
  long long host_cache_blocks_per_node = 0;  // 0: no host tier
  std::vector<std::string> worker_nodes;  // node name of each worker
};

struct RouteRun {
  RouteRunInfo info;
  TraceStats stats;
  LoadBaseline baseline;
  std::vector<PolicyResult> results;
  std::vector<SweepStep> sweep;    // --find-load
  std::vector<LoadPoint> points;   // --find-load: the points found, in order light, knee, overload
};

// Errors: kInvalidArgument for bad options (unknown policy or model, listed twice, ...),
// the loaders' errors (file:line:col) for the cluster and the trace.
Result<RouteRun> run_route(const RouteOptions& options);
// The same on a cluster and a trace already loaded.
Result<RouteRun> run_route(const Cluster& cluster, const std::string& cluster_label, const RequestTrace& trace, const RouteOptions& options);

std::string route_report_json(const RouteRun& run);
std::string route_report_table(const RouteRun& run);
std::string route_report_html(const RouteRun& run);
Result<void> write_route_report(const std::string& dir, const RouteRun& run);

}  // namespace toposched::router
