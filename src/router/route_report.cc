// report.json, the terminal table and report.html of `toposched route` (route.h).
#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/html_page.h"
#include "formats/json_output.h"
#include "router/route.h"
#include "topology/file_io.h"

namespace toposched::router {

namespace {

using Json = nlohmann::ordered_json;

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  std::size_t k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<std::size_t>(k, 1)) - 1];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

struct Summary {
  std::string policy;
  std::size_t requests = 0;
  std::vector<double> ttft, tpot;  // sorted
  double ttft_mean = 0, ttft_p50 = 0, ttft_p90 = 0, ttft_p99 = 0, tpot_mean = 0, tpot_p50 = 0, tpot_p99 = 0;
  double throughput = 0, input_throughput = 0, makespan = 0;
  double block_hit = 0, token_hit = 0, local_token_hit = 0, host_token_hit = 0;
  double pulled_blocks = 0;
  // TTFT in three consecutive parts, means over the measured requests: waiting for a pulled
  // prefix to arrive, then for the worker to admit the request (room in its cache and batch),
  // then the prefill from admission to the first token (with --pd also the hand-off).
  double pull_mean = 0, wait_mean = 0, prefill_mean = 0;
  double estimate_mean = 0;  // the router's first-token estimate at routing (kv-topo family; else 0)
};

Summary summarise(const PolicyResult& r) {
  Summary s;
  s.policy = r.policy;
  double blocks = 0, hits = 0, input = 0, hit_tokens = 0, output = 0, first = 0, last = 0, pulled_tokens = 0, host_tokens = 0;
  bool any = false;
  for (std::size_t i = 0; i < r.requests.size(); ++i) {
    const RequestOutcome& o = r.requests[i];
    ++s.requests;
    if (i >= r.warmup_requests) {  // warm-up: in the hit rates, not in the latencies
      s.ttft.push_back(o.ttft_s);
      if (o.tpot_s >= 0) s.tpot.push_back(o.tpot_s);
      const double pull = o.ready_s - o.arrival_s, wait = std::max(0.0, o.admitted_s - o.ready_s);
      s.pull_mean += pull;
      s.wait_mean += wait;
      s.prefill_mean += o.ttft_s - pull - wait;
      s.estimate_mean += o.predicted_ttft_s;
    }
    blocks += o.blocks;
    hits += o.hit_blocks;
    input += o.input_tokens;
    hit_tokens += o.hit_tokens;
    output += o.output_tokens;
    s.pulled_blocks += o.pulled_blocks;
    const double pulled = std::min(o.hit_tokens, static_cast<double>(o.pulled_blocks) * kMooncakeBlockTokens);
    pulled_tokens += pulled;
    host_tokens += std::min(o.hit_tokens - pulled, static_cast<double>(o.host_blocks) * kMooncakeBlockTokens);
    first = any ? std::min(first, o.arrival_s) : o.arrival_s;
    last = any ? std::max(last, o.finish_s) : o.finish_s;
    any = true;
  }
  std::sort(s.ttft.begin(), s.ttft.end());
  std::sort(s.tpot.begin(), s.tpot.end());
  s.ttft_mean = mean(s.ttft);
  if (!s.ttft.empty()) {
    const double measured = static_cast<double>(s.ttft.size());
    s.pull_mean /= measured;
    s.wait_mean /= measured;
    s.prefill_mean /= measured;
    s.estimate_mean /= measured;
  }
  s.ttft_p50 = percentile(s.ttft, 0.5);
  s.ttft_p90 = percentile(s.ttft, 0.9);
  s.ttft_p99 = percentile(s.ttft, 0.99);
  s.tpot_mean = mean(s.tpot);
  s.tpot_p50 = percentile(s.tpot, 0.5);
  s.tpot_p99 = percentile(s.tpot, 0.99);
  s.makespan = last - first;
  s.throughput = s.makespan > 0 ? output / s.makespan : 0;
  s.input_throughput = s.makespan > 0 ? input / s.makespan : 0;
  s.block_hit = blocks > 0 ? hits / blocks : 0;
  s.token_hit = input > 0 ? hit_tokens / input : 0;
  s.local_token_hit = input > 0 ? (hit_tokens - pulled_tokens - host_tokens) / input : 0;
  s.host_token_hit = input > 0 ? host_tokens / input : 0;
  return s;
}

Json policy_json(const Summary& s, const PolicyResult& r) {
  Json p;
  p["requests"] = s.requests;
  p["ttft_mean_s"] = round_decimals(s.ttft_mean, 6);
  p["ttft_p50_s"] = round_decimals(s.ttft_p50, 6);
  p["ttft_p90_s"] = round_decimals(s.ttft_p90, 6);
  p["ttft_p99_s"] = round_decimals(s.ttft_p99, 6);
  p["ttft_parts"] = Json{{"pull_mean_s", round_decimals(s.pull_mean, 6)},
                         {"wait_mean_s", round_decimals(s.wait_mean, 6)},
                         {"prefill_mean_s", round_decimals(s.prefill_mean, 6)},
                         {"router_estimate_mean_s", round_decimals(s.estimate_mean, 6)}};
  p["tpot_mean_s"] = round_decimals(s.tpot_mean, 6);
  p["tpot_p50_s"] = round_decimals(s.tpot_p50, 6);
  p["tpot_p99_s"] = round_decimals(s.tpot_p99, 6);
  p["throughput_tokens_per_s"] = round_decimals(s.throughput, 3);
  p["input_tokens_per_s"] = round_decimals(s.input_throughput, 3);
  p["makespan_s"] = round_decimals(s.makespan, 3);
  p["block_hit_rate"] = round_decimals(s.block_hit, 6);
  p["token_hit_rate"] = round_decimals(s.token_hit, 6);
  p["local_token_hit_rate"] = round_decimals(s.local_token_hit, 6);
  p["host_token_hit_rate"] = round_decimals(s.host_token_hit, 6);
  p["pulled_blocks"] = static_cast<long long>(s.pulled_blocks);
  p["kv_bytes_moved"] = round_decimals(r.kv_bytes_moved, 0);
  Json levels = Json::object();
  for (const auto& [level, bytes] : r.kv_bytes_by_level) levels[level] = round_decimals(bytes, 0);
  p["kv_bytes_moved_by_level"] = std::move(levels);
  p["busy_gpu_hours"] = round_decimals(r.busy_gpu_s / 3600, 6);
  p["busy_fraction"] = round_decimals(r.busy_fraction, 6);
  p["energy_kwh"] = round_decimals(r.energy_kwh, 6);
  return p;
}

Json run_json(const RouteRunInfo& i) {
  Json r;
  r["cluster"] = i.cluster;
  r["cluster_nodes"] = i.cluster_nodes;
  r["cluster_gpus"] = i.cluster_gpus;
  r["model"] = i.model;
  r["gpu"] = i.gpu;
  r["workers"] = i.workers;
  r["tp"] = i.tp;
  r["worker_nodes"] = i.worker_nodes;
  r["disaggregated"] = i.sim.disaggregated;
  r["speed"] = round_decimals(i.sim.speed, 6);
  r["block_tokens"] = i.sim.block_tokens;
  r["max_batched_tokens"] = i.sim.max_batched_tokens;
  r["max_running"] = i.sim.max_running;
  r["load_weight"] = round_decimals(i.sim.load_weight, 6);
  r["predictor_scale"] = round_decimals(i.sim.predictor_scale, 6);
  r["event_lag_s"] = round_decimals(i.sim.event_lag_s, 6);
  r["warmup_requests"] = i.sim.warmup_requests;
  r["cache_blocks_per_worker"] = i.cache_blocks_per_worker;  // -1: unlimited
  r["host_cache_gb"] = round_decimals(i.sim.host_cache_gb, 6);
  r["host_cache_blocks_per_node"] = i.host_cache_blocks_per_node;
  r["trace"] = i.trace;
  r["skipped_rows"] = i.skipped_rows;
  return r;
}

std::string seconds(double s) { return s < 1 ? fmt::format("{:.1f} ms", s * 1e3) : fmt::format("{:.2f} s", s); }
std::string gigabytes(double b) { return fmt::format("{:.1f} GB", b / 1e9); }

struct Row {
  std::string label;
  std::function<std::string(const Summary&, const PolicyResult&)> cell;
};

// The table's rows; the host tier's share of the hits only where the run has a host tier.
std::vector<Row> rows(const std::vector<PolicyResult>& results) {
  const bool host_tier = std::any_of(results.begin(), results.end(), [](const PolicyResult& r) { return r.host_cache_blocks_per_node > 0; });
  std::vector<Row> all = {
      {"requests", [](const Summary& s, const PolicyResult&) { return std::to_string(s.requests); }},
      {"TTFT mean", [](const Summary& s, const PolicyResult&) { return seconds(s.ttft_mean); }},
      {"TTFT p50", [](const Summary& s, const PolicyResult&) { return seconds(s.ttft_p50); }},
      {"TTFT p99", [](const Summary& s, const PolicyResult&) { return seconds(s.ttft_p99); }},
      {"TPOT mean", [](const Summary& s, const PolicyResult&) { return seconds(s.tpot_mean); }},
      {"TPOT p99", [](const Summary& s, const PolicyResult&) { return seconds(s.tpot_p99); }},
      {"output tokens/s", [](const Summary& s, const PolicyResult&) { return fmt::format("{:.0f}", s.throughput); }},
      {"block hit rate", [](const Summary& s, const PolicyResult&) { return fmt::format("{:.2f} %", 100 * s.block_hit); }},
      {"token hit rate", [](const Summary& s, const PolicyResult&) { return fmt::format("{:.2f} %", 100 * s.token_hit); }},
      {"of which host tier", [](const Summary& s, const PolicyResult&) { return fmt::format("{:.2f} %", 100 * s.host_token_hit); }},
      {"busy", [](const Summary&, const PolicyResult& r) { return fmt::format("{:.1f} %", 100 * r.busy_fraction); }},
      {"KV moved", [](const Summary&, const PolicyResult& r) { return gigabytes(r.kv_bytes_moved); }},
      {"energy", [](const Summary&, const PolicyResult& r) { return fmt::format("{:.2f} kWh", r.energy_kwh); }},
  };
  if (!host_tier) std::erase_if(all, [](const Row& r) { return r.label == "of which host tier"; });
  return all;
}

std::string run_line(const RouteRun& run) {
  const RouteRunInfo& i = run.info;
  std::string cache = i.cache_blocks_per_worker < 0 ? "unlimited" : fmt::format("{} blocks", i.cache_blocks_per_worker);
  if (i.host_cache_blocks_per_node > 0) cache += fmt::format(" per worker, host tier {} blocks per node", i.host_cache_blocks_per_node);
  else cache += " per worker";
  return fmt::format("{} ({} nodes, {} GPUs): {} workers of {} (TP{} on {}){}, KV cache {}; trace {} ({} requests, {}x its rate)",
                     i.cluster, i.cluster_nodes, i.cluster_gpus, i.workers, i.model, i.tp, i.gpu,
                     i.sim.disaggregated ? ", prefill/decode split" : "", cache, i.trace, run.stats.requests, i.sim.speed);
}

}  // namespace

std::string route_report_json(const RouteRun& run) {
  Json root;
  Json t;
  t["source"] = run.info.trace;
  t["requests"] = run.stats.requests;
  t["blocks"] = run.stats.blocks;
  t["unique_blocks"] = run.stats.unique_blocks;
  t["input_tokens"] = round_decimals(run.stats.input_tokens, 0);
  t["output_tokens"] = round_decimals(run.stats.output_tokens, 0);
  t["duration_s"] = round_decimals(run.stats.duration_s, 3);
  t["block_reuse"] = round_decimals(run.stats.block_reuse, 6);
  t["token_hit_upper_bound"] = round_decimals(run.stats.token_hit_upper_bound, 6);
  t["unloaded_ttft_mean_s"] = round_decimals(run.baseline.unloaded_ttft_mean_s, 6);
  t["unloaded_ttft_p99_s"] = round_decimals(run.baseline.unloaded_ttft_p99_s, 6);
  t["oracle_token_hit_rate"] = round_decimals(run.baseline.oracle_token_hit_rate, 6);
  t["oracle_cache_blocks"] = run.baseline.oracle_cache_blocks;
  root["trace"] = std::move(t);
  Json policies = Json::object();
  for (const PolicyResult& r : run.results) policies[r.policy] = policy_json(summarise(r), r);
  root["policies"] = std::move(policies);
  if (!run.sweep.empty()) {
    Json sweep = Json::array();
    for (const SweepStep& st : run.sweep)
      sweep.push_back({{"speed", round_decimals(st.speed, 6)}, {"round_robin_ttft_p99_s", round_decimals(st.round_robin_ttft_p99_s, 6)},
                       {"ratio", round_decimals(st.ratio, 6)}});
    root["load_sweep"] = std::move(sweep);
    Json points = Json::object();
    for (const LoadPoint& lp : run.points) {
      Json pp = Json::object();
      for (const PolicyResult& r : lp.results) pp[r.policy] = policy_json(summarise(r), r);
      points[lp.name] = {{"speed", round_decimals(lp.speed, 6)}, {"round_robin_ttft_p99_over_unloaded", round_decimals(lp.ratio, 6)},
                         {"policies", std::move(pp)}};
    }
    root["load_points"] = std::move(points);
  }
  root["run"] = run_json(run.info);
  return root.dump(2) + "\n";
}

namespace {

std::string policy_table(const std::vector<PolicyResult>& results) {
  std::vector<Summary> sums;
  for (const PolicyResult& r : results) sums.push_back(summarise(r));
  std::vector<Row> rs = rows(results);
  std::size_t label_w = 0;
  for (const Row& r : rs) label_w = std::max(label_w, r.label.size());
  std::vector<std::size_t> col_w;
  for (std::size_t p = 0; p < sums.size(); ++p) {
    std::size_t w = sums[p].policy.size();
    for (const Row& r : rs) w = std::max(w, r.cell(sums[p], results[p]).size());
    col_w.push_back(w);
  }
  std::string out = fmt::format("{:<{}}", "", label_w);
  for (std::size_t p = 0; p < sums.size(); ++p) out += fmt::format("  {:>{}}", sums[p].policy, col_w[p]);
  out += "\n";
  for (const Row& r : rs) {
    out += fmt::format("{:<{}}", r.label, label_w);
    for (std::size_t p = 0; p < sums.size(); ++p) out += fmt::format("  {:>{}}", r.cell(sums[p], results[p]), col_w[p]);
    out += "\n";
  }
  return out;
}

}  // namespace

std::string route_report_table(const RouteRun& run) {
  std::string out = run_line(run) + "\n";
  out += fmt::format("trace: block reuse {:.2f} %, token hit upper bound {:.2f} %, one LRU of the cluster's cache {:.2f} %\n",
                     100 * run.stats.block_reuse, 100 * run.stats.token_hit_upper_bound, 100 * run.baseline.oracle_token_hit_rate);
  out += fmt::format("unloaded TTFT (each prompt alone on an idle worker): mean {}, p99 {}\n", seconds(run.baseline.unloaded_ttft_mean_s),
                     seconds(run.baseline.unloaded_ttft_p99_s));
  if (run.info.sim.warmup_requests > 0)
    out += fmt::format("warm-up: the first {} requests are simulated but not in TTFT, TPOT or the unloaded TTFT (hit rates count them)\n",
                       run.info.sim.warmup_requests);
  out += "\n";
  out += policy_table(run.results);
  if (!run.sweep.empty()) {
    out += "\nload sweep (round-robin TTFT p99 / unloaded p99):";
    for (const SweepStep& st : run.sweep) out += fmt::format(" {}x {:.2f}", st.speed, st.ratio);
    out += "\n";
    for (const char* name : {"light", "knee", "overload"}) {
      auto it = std::find_if(run.points.begin(), run.points.end(), [&](const LoadPoint& p) { return p.name == name; });
      if (it == run.points.end()) {
        out += fmt::format("\n{}: not found in the sweep\n", name);
        continue;
      }
      out += fmt::format("\n{}: {}x the rate (round-robin TTFT p99 {:.2f}x unloaded)\n", name, it->speed, it->ratio);
      out += policy_table(it->results);
    }
  }
  return out;
}

namespace {

Json chart(std::string title, Json data, Json mark, Json encoding) {
  return Json{{"$schema", "https://vega.github.io/schema/vega-lite/v5.json"},
              {"title", std::move(title)},
              {"width", 520},
              {"height", 260},
              {"data", {{"values", std::move(data)}}},
              {"mark", std::move(mark)},
              {"encoding", std::move(encoding)}};
}

Json quant(std::string field, std::string title) { return {{"field", std::move(field)}, {"type", "quantitative"}, {"title", std::move(title)}}; }
Json nominal(std::string field, Json title) { return {{"field", std::move(field)}, {"type", "nominal"}, {"title", std::move(title)}}; }

Json ttft_cdf(const std::vector<Summary>& sums) {
  Json cdf = Json::array();
  for (const Summary& s : sums) {
    std::size_t steps = std::min<std::size_t>(s.ttft.size(), 200);
    for (std::size_t k = 1; k <= steps; ++k) {
      std::size_t idx = (k * s.ttft.size() + steps - 1) / steps - 1;
      cdf.push_back({{"policy", s.policy}, {"ttft_s", round_decimals(std::max(s.ttft[idx], 1e-4), 6)},
                     {"fraction", round_decimals(static_cast<double>(idx + 1) / static_cast<double>(s.ttft.size()), 5)}});
    }
  }
  Json x = quant("ttft_s", "TTFT (s, log scale)");
  x["scale"] = {{"type", "log"}};
  return chart("Time to first token, CDF per policy", std::move(cdf), {{"type", "line"}, {"interpolate", "step-after"}},
               {{"x", x}, {"y", quant("fraction", "fraction of requests")}, {"color", nominal("policy", "policy")}});
}

Json hit_rates(const std::vector<Summary>& sums, const TraceStats& stats) {
  Json data = Json::array();
  for (const Summary& s : sums) {
    data.push_back({{"policy", s.policy}, {"rate", "blocks"}, {"percent", round_decimals(100 * s.block_hit, 3)}});
    data.push_back({{"policy", s.policy}, {"rate", "tokens"}, {"percent", round_decimals(100 * s.token_hit, 3)}});
  }
  data.push_back({{"policy", "trace upper bound"}, {"rate", "tokens"}, {"percent", round_decimals(100 * stats.token_hit_upper_bound, 3)}});
  return chart("KV cache hit rate (not recomputed: cached or pulled)", std::move(data), "bar",
               {{"y", nominal("policy", nullptr)}, {"yOffset", nominal("rate", nullptr)}, {"x", quant("percent", "hit rate (%)")},
                {"color", nominal("rate", nullptr)}});
}

Json bytes_moved(const std::vector<PolicyResult>& results) {
  Json data = Json::array();
  for (const PolicyResult& r : results) {
    data.push_back({{"policy", r.policy}, {"level", "(total)"}, {"gigabytes", round_decimals(r.kv_bytes_moved / 1e9, 3)}});
    for (const auto& [level, bytes] : r.kv_bytes_by_level)
      data.push_back({{"policy", r.policy}, {"level", level}, {"gigabytes", round_decimals(bytes / 1e9, 3)}});
  }
  return chart("KV bytes moved between workers, per link level", std::move(data), "bar",
               {{"y", nominal("policy", nullptr)}, {"yOffset", nominal("level", nullptr)}, {"x", quant("gigabytes", "GB")},
                {"color", nominal("level", "link level")}});
}

Json load_over_time(const PolicyResult& r, double t0) {
  Json data = Json::array();
  for (const LoadSample& s : r.timeline)
    data.push_back({{"worker", fmt::format("w{:02}", s.worker)}, {"minutes", round_decimals((s.t_s - t0) / 60, 4)}, {"active", s.active_requests}});
  return chart(fmt::format("Active requests per worker over time: {}", r.policy), std::move(data), {{"type", "line"}, {"interpolate", "step-after"}},
               {{"x", quant("minutes", "time since first arrival (min)")}, {"y", quant("active", "waiting + running requests")},
                {"color", nominal("worker", "worker")}});
}

std::string summary_table(const std::vector<Summary>& sums, const std::vector<PolicyResult>& results) {
  std::string table = "<table><thead><tr><th></th>";
  for (const Summary& s : sums) table += "<th>" + html::escape(s.policy) + "</th>";
  table += "</tr></thead><tbody>";
  for (const Row& r : rows(results)) {
    table += "<tr><th>" + html::escape(r.label) + "</th>";
    for (std::size_t p = 0; p < sums.size(); ++p) table += "<td>" + html::escape(r.cell(sums[p], results[p])) + "</td>";
    table += "</tr>";
  }
  return table + "</tbody></table>";
}

}  // namespace

std::string route_report_html(const RouteRun& run) {
  std::vector<Summary> sums;
  for (const PolicyResult& r : run.results) sums.push_back(summarise(r));
  double t0 = 0;
  bool any = false;
  for (const PolicyResult& r : run.results)
    for (const RequestOutcome& o : r.requests) {
      t0 = any ? std::min(t0, o.arrival_s) : o.arrival_s;
      any = true;
    }
  html::ChartPage page;
  page.title = "toposched routing report";
  page.intro_html = "<p>" + html::escape(run_line(run)) + fmt::format(". The trace's own block reuse is {:.2f} % and a single unlimited cache "
                                                                      "would serve {:.2f} % of its input tokens.</p>\n",
                                                                      100 * run.stats.block_reuse, 100 * run.stats.token_hit_upper_bound);
  page.summary_html = summary_table(sums, run.results);
  page.charts["chart-ttft-cdf"] = ttft_cdf(sums);
  page.charts["chart-hit-rate"] = hit_rates(sums, run.stats);
  page.charts["chart-kv-bytes"] = bytes_moved(run.results);
  for (std::size_t p = 0; p < run.results.size(); ++p) page.charts[fmt::format("chart-load-{}", p + 1)] = load_over_time(run.results[p], t0);
  return html::render_chart_page(page);
}

Result<void> write_route_report(const std::string& dir, const RouteRun& run) {
  return write_report_dir(dir, route_report_json(run), route_report_html(run));
}

}  // namespace toposched::router
