#include "router/route.h"

#include <algorithm>

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

}  // namespace

Result<RouteRun> run_route(const Cluster& cluster, const std::string& cluster_label, const RequestTrace& trace, const RouteOptions& o) {
  TOPOSCHED_CHECK(check_policies(o.policies));
  auto model = find_model(o.model);
  if (!model) return make_error(ErrorCode::kInvalidArgument, model.error().message);
  TOPOSCHED_TRY(workers, place_workers(cluster, o.workers, o.tp));
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
  for (const std::string& name : o.policies) {
    TOPOSCHED_TRY(policy, find_policy(name));
    TOPOSCHED_TRY(result, simulate_policy(cluster, workers, time, trace, hashes, *policy, o.sim));
    run.info.cache_blocks_per_worker = result.cache_blocks_per_worker;
    run.results.push_back(std::move(result));
  }
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
