// `toposched route`: replay an LLM request trace (Mooncake JSONL) on model replicas placed
// on a cluster under several routing policies; print the comparison, write report.json and
// report.html. All logic lives in src/router/.
#include <cstdio>

#include <fmt/format.h>

#include "cli/comma_list.h"
#include "cli/common.h"
#include "router/model.h"
#include "router/route.h"
#include "topology/file_io.h"

namespace toposched::cli {

namespace {

struct RouteCliOptions {
  router::RouteOptions route;
  std::string policies = "round-robin,kv,kv-topo";
  std::string cache_blocks = "auto";
  std::string host_cache = "0";
  std::string report_dir;
  bool quiet = false;
  double event_lag_ms = 0;
  long long warmup_requests = 0;
  OutputFormat format = OutputFormat::kText;
};

// --host-cache-gb: "N" GB per node, or "P%" of the node's system memory (the cluster spec's).
Result<void> parse_host_cache(const std::string& text, router::RouteOptions& route) {
  const bool share = !text.empty() && text.back() == '%';
  const std::string number = share ? text.substr(0, text.size() - 1) : text;
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--host-cache-gb: expected GB or a share like 20%, found '{}'", text));
  if (share) {
    if (!(v > 0 && v <= 100))
      return make_error(ErrorCode::kInvalidArgument, fmt::format("--host-cache-gb: expected a share above 0 % and at most 100 %, found '{}'", text));
    route.host_cache_share = v / 100;
    return {};
  }
  route.sim.host_cache_gb = v;
  return router::check_host_cache_gb(v);
}

int run_route_command(RouteCliOptions& o) {
  if (int code = kExitOk; !output_dir_usable_or_report(o.report_dir, code)) return code;
  o.route.policies = o.policies == "all" ? std::vector<std::string>{} : split_comma_list(o.policies);
  if (o.policies == "all")
    for (const auto& p : router::policy_catalog()) o.route.policies.emplace_back(p.name);
  if (o.cache_blocks == "auto") o.route.sim.cache_blocks = 0;
  else if (o.cache_blocks == "unlimited") o.route.sim.cache_blocks = -1;
  else {
    try {
      std::size_t used = 0;
      long long v = std::stoll(o.cache_blocks, &used);
      if (used != o.cache_blocks.size() || v < 1) throw std::invalid_argument("range");
      o.route.sim.cache_blocks = v;
    } catch (const std::exception&) {
      return usage_error(fmt::format("--kv-cache-blocks: expected auto, unlimited or a block count >= 1, found '{}'", o.cache_blocks));
    }
  }
  o.route.sim.event_lag_s = o.event_lag_ms / 1e3;
  if (auto ok = parse_host_cache(o.host_cache, o.route); !ok) return usage_error(ok.error().message);
  if (o.warmup_requests < 0) return usage_error(fmt::format("--warmup-requests: expected a count >= 0, found {}", o.warmup_requests));
  o.route.sim.warmup_requests = static_cast<std::size_t>(o.warmup_requests);
  auto run = router::run_route(o.route);
  if (!run) return report(run.error());
  if (!o.quiet && run->info.skipped_rows > 0)
    fmt::print(stderr, "toposched: skipped {} malformed lines of {}\n", run->info.skipped_rows, run->info.trace);
  if (!o.report_dir.empty()) {
    if (auto w = router::write_route_report(o.report_dir, *run); !w) return report(w.error());
  }
  if (o.format == OutputFormat::kJson) {
    std::fputs(router::route_report_json(*run).c_str(), stdout);
  } else {
    std::fputs(router::route_report_table(*run).c_str(), stdout);
    if (!o.report_dir.empty()) fmt::print("\nreport: {} (and report.json)\n", path_in_dir(o.report_dir, "report.html"));
  }
  return kExitOk;
}

std::string policy_help() {
  std::string s = "Comma-separated routing policies, or 'all' (default: round-robin,kv,kv-topo):";
  for (const auto& p : router::policy_catalog()) s += fmt::format("\n  {}: {}", p.name, p.description);
  return s;
}

std::string model_help() {
  std::string s = "Model served by every worker (default llama3-8b):";
  for (const auto& m : router::model_catalog()) s += fmt::format("\n  {}: {}", m.name, m.description);
  return s;
}

}  // namespace

void register_route(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RouteCliOptions>();
  CLI::App* cmd = app.add_subcommand("route", "Replay an LLM request trace under KV-cache- and topology-aware routing policies");
  cmd->add_option("--cluster,-c", o->route.cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_option("--trace,-t", o->route.trace, "Request trace, Mooncake JSONL (timestamp ms, input_length, output_length, hash_ids)")->required();
  cmd->add_option("--model,-m", o->route.model, model_help());
  cmd->add_option("--workers,-w", o->route.workers, "Number of model replicas (default 8), spread evenly over the nodes");
  cmd->add_option("--tp", o->route.tp, "GPUs per replica, tensor parallel inside one node (default 1)");
  cmd->add_option("--speed", o->route.sim.speed, "Replay at this many times the trace's arrival rate (default 1)");
  cmd->add_option("--policies,-p", o->policies, policy_help());
  cmd->add_flag("--pd", o->route.sim.disaggregated,
                "Disaggregated prefill/decode: the first half of the workers prefill, the rest decode; the KV moves after prefill");
  cmd->add_option("--kv-cache-blocks", o->cache_blocks,
                  "KV cache per worker in 512-token blocks: auto (default: 90% of GPU memory less weights), unlimited, or N");
  cmd->add_option("--host-cache-gb", o->host_cache,
                  "Host memory per node holding the KV blocks its workers evict from GPU memory, loaded back over\n"
                  "PCIe instead of recomputed (CPU offloading: LMCache, Dynamo's KVBM): GB, or P% of the node's\n"
                  "host_memory_gb from the cluster spec (default 0 = none)");
  cmd->add_option("--max-batched-tokens", o->route.sim.max_batched_tokens, "Token budget of one batching iteration (default 8192)");
  cmd->add_flag("--find-load", o->route.find_load,
                "Also sweep the rate: round-robin at 1x, 1.25x, ... until its TTFT p99 is 5x the unloaded p99; print\n"
                "every policy at the light (1x, if round-robin's p99 <= 1.3x unloaded), knee (>= 2x) and overload (>= 5x) points");
  cmd->add_option("--load-weight", o->route.sim.load_weight,
                  fmt::format("Anti-burst weight of kv, kv-topo, kv-pull-blind: each request active on a worker adds this to the\n"
                              "weight of the prefill routed there (default {}; 0 = Dynamo's cost exactly)",
                              router::kDefaultLoadWeight));
  cmd->add_option("--predictor-scale", o->route.sim.predictor_scale,
                  "The router's prefill-time predictor x this against the simulated time (default 1; robustness runs)");
  cmd->add_option("--event-lag-ms", o->event_lag_ms, "KV events reach the router this many milliseconds late (default 0)");
  cmd->add_option("--warmup-requests", o->warmup_requests,
                  "Simulate the first N requests but leave them out of the TTFT and TPOT figures (a warm-up stage;\n"
                  "default 0)");
  cmd->add_flag("--skip-bad-rows", o->route.skip_bad_rows, "Skip malformed trace lines (counted on stderr) instead of failing");
  cmd->add_option("--report,-r", o->report_dir, "Write DIR/report.json and DIR/report.html");
  cmd->add_flag("--quiet,-q", o->quiet, "No notes on stderr");
  add_format_option(*cmd, o->format);
  cmd->footer(
      "Each worker runs continuous batching with a roofline time model (docs/router.md); its KV cache\n"
      "is LRU by 512-token block and reported to the router as Dynamo KV events. Text output is a\n"
      "table, one column per policy; --format json prints report.json.\n"
      "Example:\n"
      "  toposched route --cluster 'preset:dgx-h100?nodes=2' \\\n"
      "      --trace tests/data/traces/mooncake/conversation_trace.jsonl \\\n"
      "      --model llama3-8b --workers 8 --policies round-robin,kv,kv-topo --report out/\n"
      "Docs: docs/router.md.");
  cmd->callback([o, &exit_code] { exit_code = run_route_command(*o); });
}

}  // namespace toposched::cli
