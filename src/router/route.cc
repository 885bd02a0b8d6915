#include "router/route.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "formats/cluster_source.h"

namespace toposched::router {

namespace {

Result<void> check_policies(const std::vector<std::string>& policies) {
  if (policies.empty()) return make_error(ErrorCode::kInvalidArgument, "--policies lists no policy");
  for (std::size_t i = 0; i < policies.size(); ++i) {
    for (std::size_t k = 0; k < i; ++k)
      if (policies[i] == policies[k])
        return make_error(ErrorCode::kInvalidArgument, fmt::format("policy '{}' is listed twice in --policies", policies[i]));
    auto p = find_policy(policies[i]);
    if (!p) return make_error(ErrorCode::kInvalidArgument, p.error().message);
  }
  return {};
}

double nearest_rank(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size(), std::max<std::size_t>(k, 1)) - 1];
}

double ttft_p99(const PolicyResult& r) {
  std::vector<double> t;
  for (std::size_t i = r.warmup_requests; i < r.requests.size(); ++i) t.push_back(r.requests[i].ttft_s);
  return nearest_rank(std::move(t), 0.99);
}

// `host_nodes`: the nodes whose host tier (SimConfig::host_cache_gb) the workers use; the
// oracle's one LRU is the cluster's whole cache, GPU and host memory.
LoadBaseline baseline(const TimeModel& time, const RequestTrace& trace, const std::vector<std::vector<std::uint64_t>>& hashes,
                      const RouteOptions& o, int host_nodes) {
  LoadBaseline b;
  std::vector<double> ttft;
  double sum = 0;
  for (std::size_t i = o.sim.warmup_requests; i < trace.requests.size(); ++i) {
    ttft.push_back(unloaded_ttft_s(time, trace.requests[i].input_tokens, o.sim.max_batched_tokens));
    sum += ttft.back();
  }
  b.unloaded_ttft_mean_s = ttft.empty() ? 0 : sum / static_cast<double>(ttft.size());
  b.unloaded_ttft_p99_s = nearest_rank(std::move(ttft), 0.99);
  long long per_worker = o.sim.cache_blocks != 0 ? o.sim.cache_blocks : static_cast<long long>(time.kv_capacity_tokens() / o.sim.block_tokens);
  const long long per_node = host_cache_blocks_per_node(time, o.sim);
  b.oracle_cache_blocks = per_worker < 0 ? -1 : per_worker * o.workers + std::max(0LL, per_node) * host_nodes;
  b.oracle_token_hit_rate = oracle_token_hit_rate(trace, hashes, b.oracle_cache_blocks, o.sim.block_tokens);
  return b;
}

// Round-robin at increasing speeds until its TTFT p99 is 5x the unloaded p99, then every
// policy at the light, knee and overload points (RouteRun::points).
Result<void> find_load_points(const Cluster& cluster, const std::vector<WorkerPlacement>& workers, const TimeModel& time,
                              const RequestTrace& trace, const std::vector<std::vector<std::uint64_t>>& hashes, const RouteOptions& o,
                              RouteRun& run) {
  static constexpr double kGrid[] = {1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32};
  TOPOSCHED_TRY(rr, find_policy("round-robin"));
  const double unloaded = std::max(run.baseline.unloaded_ttft_p99_s, 1e-12);
  std::vector<std::pair<double, PolicyResult>> rr_runs;
  for (double speed : kGrid) {
    SimConfig c = o.sim;
    c.speed = speed;
    TOPOSCHED_TRY(r, simulate_policy(cluster, workers, time, trace, hashes, *rr, c));
    double p99 = ttft_p99(r);
    run.sweep.push_back({speed, p99, p99 / unloaded});
    rr_runs.emplace_back(speed, std::move(r));
    if (p99 / unloaded >= 5) break;
  }
  auto add_point = [&](const char* name, std::size_t k) -> Result<void> {
    LoadPoint p{name, run.sweep[k].speed, run.sweep[k].ratio, {}};
    SimConfig c = o.sim;
    c.speed = p.speed;
    for (const std::string& pol : o.policies) {
      if (pol == "round-robin") {
        p.results.push_back(rr_runs[k].second);
        continue;
      }
      TOPOSCHED_TRY(policy, find_policy(pol));
      TOPOSCHED_TRY(result, simulate_policy(cluster, workers, time, trace, hashes, *policy, c));
      p.results.push_back(std::move(result));
    }
    run.points.push_back(std::move(p));
    return {};
  };
  if (run.sweep.front().ratio <= 1.3) TOPOSCHED_CHECK(add_point("light", 0));
  for (std::size_t k = 0; k < run.sweep.size(); ++k)
    if (run.sweep[k].ratio >= 2) {
      TOPOSCHED_CHECK(add_point("knee", k));
      break;
    }
  if (run.sweep.back().ratio >= 5) TOPOSCHED_CHECK(add_point("overload", run.sweep.size() - 1));
  return {};
}

// --host-cache-gb P%: the share of the workers' node's system memory, in GB.
Result<double> host_cache_gb_of(const Cluster& cluster, const std::vector<WorkerPlacement>& workers, const RouteOptions& o) {
  if (!(o.host_cache_share > 0)) return o.sim.host_cache_gb;
  if (!(o.host_cache_share <= 1))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--host-cache-gb: expected a share of the node's memory from 0 to 100 %, found {:g} %",
                                                               100 * o.host_cache_share));
  // Every node gets a tier of one size: the workers' nodes must agree on their memory.
  const NodeType& type = cluster.node_type(workers.front().node);
  for (const WorkerPlacement& w : workers) {
    const NodeType& other = cluster.node_type(w.node);
    if (other.host_memory_gb != type.host_memory_gb)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("--host-cache-gb {:g}%: the workers' nodes differ in host memory (node type '{}': {:g} GB, '{}': {:g} GB); "
                                    "give the host tier's size in GB instead",
                                    100 * o.host_cache_share, type.name, type.host_memory_gb, other.name, other.host_memory_gb));
  }
  if (!(type.host_memory_gb > 0))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--host-cache-gb {:g}%: node type '{}' has no host_memory_gb in the cluster spec; "
                                                               "give the host tier's size in GB instead", 100 * o.host_cache_share, type.name));
  return o.host_cache_share * type.host_memory_gb;
}

}  // namespace

Result<RouteRun> run_route(const Cluster& cluster, const std::string& cluster_label, const RequestTrace& trace, const RouteOptions& given) {
  RouteOptions o = given;
  TOPOSCHED_CHECK(check_policies(o.policies));
  TOPOSCHED_CHECK(check_host_cache_gb(o.sim.host_cache_gb));
  if (o.sim.warmup_requests > 0 && o.sim.warmup_requests >= trace.requests.size())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--warmup-requests: expected fewer than the trace's {} requests, found {}",
                                                               trace.requests.size(), o.sim.warmup_requests));
  auto model = find_model(o.model);
  if (!model) return make_error(ErrorCode::kInvalidArgument, model.error().message);
  TOPOSCHED_TRY(workers, place_workers(cluster, o.workers, o.tp));
  TOPOSCHED_TRY(host_gb, host_cache_gb_of(cluster, workers, o));
  o.sim.host_cache_gb = host_gb;
  const NodeType& type = cluster.node_type(workers.front().node);
  for (const WorkerPlacement& w : workers)
    if (cluster.node_type(w.node).gpu_model != type.gpu_model)
      return make_error(ErrorCode::kUnsupported, "the router simulates one GPU model; the workers landed on different ones");
  TOPOSCHED_TRY(gpu, find_gpu_spec(type.gpu_model));
  gpu.memory_gb = type.gpu_memory_gb > 0 ? type.gpu_memory_gb : gpu.memory_gb;
  TimeModel time(*model, gpu, o.tp);

  std::vector<std::vector<std::uint64_t>> hashes(trace.requests.size());
  for (std::size_t i = 0; i < trace.requests.size(); ++i) sequence_hashes(trace.requests[i].block_ids, hashes[i]);

  RouteRun run;
  run.info.cluster = cluster_label;
  run.info.cluster_nodes = cluster.node_count();
  run.info.cluster_gpus = cluster.gpu_count();
  run.info.model = std::string(model->name);
  run.info.gpu = std::string(gpu.name);
  run.info.workers = o.workers;
  run.info.tp = o.tp;
  run.info.trace = trace.source;
  run.info.skipped_rows = trace.skipped_rows;
  run.info.sim = o.sim;
  for (const WorkerPlacement& w : workers) run.info.worker_nodes.push_back(cluster.node_name(w.node));
  run.stats = trace_stats(trace, o.sim.block_tokens);
  std::set<std::uint32_t> host_nodes;  // the prefill workers' (the decode side of --pd has no host tier)
  for (std::size_t w = 0; w < (o.sim.disaggregated ? workers.size() / 2 : workers.size()); ++w) host_nodes.insert(workers[w].node.index());
  run.baseline = baseline(time, trace, hashes, o, static_cast<int>(host_nodes.size()));
  for (const std::string& name : o.policies) {
    TOPOSCHED_TRY(policy, find_policy(name));
    TOPOSCHED_TRY(result, simulate_policy(cluster, workers, time, trace, hashes, *policy, o.sim));
    run.info.cache_blocks_per_worker = result.cache_blocks_per_worker;
    run.info.host_cache_blocks_per_node = result.host_cache_blocks_per_node;
    run.results.push_back(std::move(result));
  }
  if (o.find_load) TOPOSCHED_CHECK(find_load_points(cluster, workers, time, trace, hashes, o, run));
  return run;
}

Result<RouteRun> run_route(const RouteOptions& o) {
  TOPOSCHED_CHECK(check_policies(o.policies));
  if (auto m = find_model(o.model); !m) return make_error(ErrorCode::kInvalidArgument, m.error().message);
  TOPOSCHED_TRY(cluster, load_cluster(o.cluster));
  TraceReadOptions ro;
  ro.skip_bad_rows = o.skip_bad_rows;
  ro.block_tokens = o.sim.block_tokens;
  TOPOSCHED_TRY(trace, read_mooncake_trace(o.trace, ro));
  return run_route(cluster, cluster.name(), trace, o);
}

}  // namespace toposched::router
