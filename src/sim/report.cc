#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/html_page.h"
#include "formats/json_output.h"
#include "sim/traces/native_csv.h"
#include "topology/file_io.h"

namespace toposched::sim {

namespace {

using Json = nlohmann::ordered_json;

// "tp/dp/pp" hidden shares in percent, "-" for a kind that did not communicate.
std::string hidden_shares(const PolicySummary& s) {
  std::string out;
  for (std::size_t k : {std::size_t{0}, std::size_t{3}, std::size_t{4}}) {
    if (!out.empty()) out += "/";
    const double all = s.gpu_hours_comm[k];
    out += all > 0 ? fmt::format("{:.0f}", 100 * (1 - s.gpu_hours_comm_exposed[k] / all)) : "-";
  }
  return out + " %";
}

// {"gpu_hours_bubble", "kinds": {kind: {"gpu_hours", "gpu_hours_exposed", "hidden_share"}}}
// for the kinds that communicated.
Json step_breakdown_json(const PolicySummary& s) {
  Json b;
  b["gpu_hours_bubble"] = round_decimals(s.gpu_hours_bubble, 3);
  Json kinds = Json::object();
  for (std::size_t k = 0; k < s.gpu_hours_comm.size(); ++k) {
    if (!(s.gpu_hours_comm[k] > 0)) continue;
    Json kind;
    kind["gpu_hours"] = round_decimals(s.gpu_hours_comm[k], 3);
    kind["gpu_hours_exposed"] = round_decimals(s.gpu_hours_comm_exposed[k], 3);
    kind["hidden_share"] = round_decimals(1 - s.gpu_hours_comm_exposed[k] / s.gpu_hours_comm[k], 6);
    kinds[std::string(kParallelKinds[k])] = kind;
  }
  b["kinds"] = kinds;
  return b;
}

Json summary_json(const PolicySummary& s) {
  Json p;
  p["jobs"] = s.jobs;
  p["jct_mean_s"] = round_decimals(s.jct_mean_s, 3);
  p["jct_p50_s"] = round_decimals(s.jct_p50_s, 3);
  p["jct_p95_s"] = round_decimals(s.jct_p95_s, 3);
  p["jct_p99_s"] = round_decimals(s.jct_p99_s, 3);
  p["wait_mean_s"] = round_decimals(s.wait_mean_s, 3);
  p["wait_p50_s"] = round_decimals(s.wait_p50_s, 3);
  p["wait_p95_s"] = round_decimals(s.wait_p95_s, 3);
  p["wait_p99_s"] = round_decimals(s.wait_p99_s, 3);
  p["utilization"] = round_decimals(s.utilization, 6);
  p["useful_utilization"] = round_decimals(s.useful_utilization, 6);
  p["comm_slowdown_mean"] = round_decimals(s.comm_slowdown_mean, 6);
  p["comm_slowdown_p95"] = round_decimals(s.comm_slowdown_p95, 6);
  p["gpu_hours_lost_comm"] = round_decimals(s.gpu_hours_lost_comm, 3);
  p["gpu_hours_useful"] = round_decimals(s.gpu_hours_useful, 3);
  p["gpu_hours_idle_queued"] = round_decimals(s.gpu_hours_idle_queued, 3);
  p["gpu_hours_idle_no_demand"] = round_decimals(s.gpu_hours_idle_no_demand, 3);
  p["makespan_s"] = round_decimals(s.makespan_s, 3);
  p["energy_kwh"] = round_decimals(s.energy_kwh, 3);
  p["energy_kwh_useful"] = round_decimals(s.energy_kwh_useful, 3);
  p["energy_kwh_lost_comm"] = round_decimals(s.energy_kwh_lost_comm, 3);
  p["energy_kwh_idle_queued"] = round_decimals(s.energy_kwh_idle_queued, 3);
  p["energy_kwh_idle_no_demand"] = round_decimals(s.energy_kwh_idle_no_demand, 3);
  p["useful_gpu_hours_per_mwh"] = round_decimals(s.useful_gpu_hours_per_mwh, 3);
  p["fragmentation_mean"] = round_decimals(s.fragmentation_mean, 6);
  p["multi_node_jobs"] = round_decimals(s.multi_node_jobs, 6);
  p["never_placed"] = s.never_placed;
  p["step_breakdown"] = step_breakdown_json(s);
  return p;
}

Json run_json(const RunInfo& info) {
  Json r;
  r["cluster"] = info.cluster;
  r["cluster_nodes"] = info.cluster_nodes;
  r["cluster_gpus"] = info.cluster_gpus;
  r["trace"] = info.trace;
  r["trace_format"] = info.trace_format;
  r["trace_jobs"] = info.trace_jobs;
  r["discipline"] = info.discipline;
  r["seed"] = info.seed;
  if (!info.score_model.empty()) r["score_model"] = info.score_model;
  return r;
}

std::string human_seconds(double s) {
  if (s < 120) return fmt::format("{:.1f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 3 * 86400) return fmt::format("{:.2f} h", s / 3600);
  return fmt::format("{:.2f} d", s / 86400);
}

}  // namespace

Result<std::string> report_json(const RunInfo& info, const std::vector<PolicyRun>& runs) {
  Json root;
  Json policies = Json::object();
  for (const PolicyRun& r : runs) policies[r.summary.policy] = summary_json(r.summary);
  root["policies"] = std::move(policies);
  root["run"] = run_json(info);
  TOPOSCHED_TRY(text, dump_json(root, 2));
  return text + "\n";
}

std::string report_table(const RunInfo& info, const std::vector<PolicyRun>& runs) {
  struct Row {
    std::string label;
    std::function<std::string(const PolicySummary&)> cell;
  };
  std::vector<Row> rows = {
      {"jobs completed", [](const PolicySummary& s) { return std::to_string(s.jobs); }},
      {"never placed", [](const PolicySummary& s) { return std::to_string(s.never_placed); }},
      {"JCT mean", [](const PolicySummary& s) { return human_seconds(s.jct_mean_s); }},
      {"JCT p50", [](const PolicySummary& s) { return human_seconds(s.jct_p50_s); }},
      {"JCT p95", [](const PolicySummary& s) { return human_seconds(s.jct_p95_s); }},
      {"JCT p99", [](const PolicySummary& s) { return human_seconds(s.jct_p99_s); }},
      {"wait mean", [](const PolicySummary& s) { return human_seconds(s.wait_mean_s); }},
      {"wait p50", [](const PolicySummary& s) { return human_seconds(s.wait_p50_s); }},
      {"wait p95", [](const PolicySummary& s) { return human_seconds(s.wait_p95_s); }},
      {"wait p99", [](const PolicySummary& s) { return human_seconds(s.wait_p99_s); }},
      {"makespan", [](const PolicySummary& s) { return human_seconds(s.makespan_s); }},
      {"GPU utilisation", [](const PolicySummary& s) { return fmt::format("{:.1f} %", 100 * s.utilization); }},
      {"useful utilisation", [](const PolicySummary& s) { return fmt::format("{:.1f} %", 100 * s.useful_utilization); }},
      {"comm slowdown mean", [](const PolicySummary& s) { return fmt::format("{:.3f}x", s.comm_slowdown_mean); }},
      {"comm slowdown p95", [](const PolicySummary& s) { return fmt::format("{:.3f}x", s.comm_slowdown_p95); }},
      {"GPU-hours lost to comm", [](const PolicySummary& s) { return fmt::format("{:.0f}", s.gpu_hours_lost_comm); }},
      {"GPU-hours idle, jobs waiting", [](const PolicySummary& s) { return fmt::format("{:.0f}", s.gpu_hours_idle_queued); }},
      {"GPU-hours in pipeline bubble", [](const PolicySummary& s) { return fmt::format("{:.0f}", s.gpu_hours_bubble); }},
      {"comm hidden (tp/dp/pp)", [](const PolicySummary& s) { return hidden_shares(s); }},
      {"GPU energy (MWh)", [](const PolicySummary& s) { return fmt::format("{:.2f}", s.energy_kwh / 1000); }},
      {"energy lost to comm (MWh)", [](const PolicySummary& s) { return fmt::format("{:.2f}", s.energy_kwh_lost_comm / 1000); }},
      {"energy idle, jobs waiting (MWh)", [](const PolicySummary& s) { return fmt::format("{:.2f}", s.energy_kwh_idle_queued / 1000); }},
      {"useful GPU-hours per MWh", [](const PolicySummary& s) { return fmt::format("{:.0f}", s.useful_gpu_hours_per_mwh); }},
      {"GPUs stranded (fragmentation)", [](const PolicySummary& s) { return fmt::format("{:.2f} %", 100 * s.fragmentation_mean); }},
      {"multi-node jobs", [](const PolicySummary& s) { return fmt::format("{:.1f} %", 100 * s.multi_node_jobs); }},
  };
  std::size_t label_w = 0;
  for (const Row& r : rows) label_w = std::max(label_w, r.label.size());
  std::vector<std::size_t> col_w;
  for (const PolicyRun& p : runs) {
    std::size_t w = p.summary.policy.size();
    for (const Row& r : rows) w = std::max(w, r.cell(p.summary).size());
    col_w.push_back(w);
  }
  std::string out = fmt::format("{} ({} nodes, {} GPUs), trace {} ({} jobs), queue {}, seed {}\n\n", info.cluster, info.cluster_nodes,
                                info.cluster_gpus, info.trace, info.trace_jobs, info.discipline, info.seed);
  if (!info.score_model.empty())
    out.insert(out.size() - 1, fmt::format("policies scored with the perturbed model --score-model {} (runtimes: the true model)\n", info.score_model));
  out += fmt::format("{:<{}}", "", label_w);
  for (std::size_t i = 0; i < runs.size(); ++i) out += fmt::format("  {:>{}}", runs[i].summary.policy, col_w[i]);
  out += "\n";
  for (const Row& r : rows) {
    out += fmt::format("{:<{}}", r.label, label_w);
    for (std::size_t i = 0; i < runs.size(); ++i) out += fmt::format("  {:>{}}", r.cell(runs[i].summary), col_w[i]);
    out += "\n";
  }
  return out;
}

namespace {

// The data series of the report's charts, one point per policy and quantity.
struct ChartData {
  Json cdf = Json::array(), timeline = Json::array(), slow = Json::array(), summary = Json::array(),
       hours = Json::array(), energy = Json::array();
};

// The points that come from a policy's summary: where its GPU-hours and energy went, and
// its bars in the summary chart.
void add_summary_points(const PolicySummary& s, ChartData& d) {
  const std::string& name = s.policy;
  const std::pair<const char*, double> parts[] = {{"1 useful (ideal work)", s.gpu_hours_useful},
                                                  {"2 lost to communication", s.gpu_hours_lost_comm},
                                                  {"3 idle while jobs waited", s.gpu_hours_idle_queued},
                                                  {"4 idle, nothing waiting", s.gpu_hours_idle_no_demand}};
  for (auto [part, value] : parts) d.hours.push_back({{"policy", name}, {"part", part}, {"gpu_hours", round_decimals(value, 2)}});
  const std::pair<const char*, double> energy_parts[] = {{"1 useful (ideal work)", s.energy_kwh_useful},
                                                         {"2 lost to communication", s.energy_kwh_lost_comm},
                                                         {"3 idle while jobs waited", s.energy_kwh_idle_queued},
                                                         {"4 idle, nothing waiting", s.energy_kwh_idle_no_demand}};
  for (auto [part, value] : energy_parts) d.energy.push_back({{"policy", name}, {"part", part}, {"mwh", round_decimals(value / 1000, 4)}});
  d.summary.push_back({{"policy", name}, {"metric", "useful GPU-hours per MWh"}, {"value", round_decimals(s.useful_gpu_hours_per_mwh, 2)}});
  d.summary.push_back({{"policy", name}, {"metric", "mean JCT (h)"}, {"value", round_decimals(s.jct_mean_s / 3600, 4)}});
  d.summary.push_back({{"policy", name}, {"metric", "mean wait (h)"}, {"value", round_decimals(s.wait_mean_s / 3600, 4)}});
  d.summary.push_back({{"policy", name}, {"metric", "GPU utilisation (%)"}, {"value", round_decimals(100 * s.utilization, 3)}});
  d.summary.push_back({{"policy", name}, {"metric", "useful utilisation (%)"}, {"value", round_decimals(100 * s.useful_utilization, 3)}});
  d.summary.push_back({{"policy", name}, {"metric", "mean comm slowdown"}, {"value", round_decimals(s.comm_slowdown_mean, 4)}});
}

// The points that come from a policy's per-job results: JCT CDF, slowdowns, timeline.
void add_result_points(const std::string& name, const SimulationResult& r, const Trace& trace, ChartData& d) {
  std::vector<double> jct, sd;
  for (std::size_t i = 0; i < r.jobs.size(); ++i)
    if (r.jobs[i].placed) {
      jct.push_back(r.jobs[i].end_s - trace.jobs[i].submit_s);
      sd.push_back(r.jobs[i].slowdown);
    }
  std::sort(jct.begin(), jct.end());
  std::sort(sd.begin(), sd.end());
  // At most 200 quantile points per policy keep the page small for any trace size.
  std::size_t steps = std::min<std::size_t>(jct.size(), 200);
  for (std::size_t k = 1; k <= steps; ++k) {
    std::size_t idx = (k * jct.size() + steps - 1) / steps - 1;
    d.cdf.push_back({{"policy", name}, {"jct_h", round_decimals(std::max(jct[idx], 1.0) / 3600, 5)},
                     {"fraction", round_decimals(static_cast<double>(idx + 1) / static_cast<double>(jct.size()), 5)}});
  }
  std::size_t sd_steps = std::min<std::size_t>(sd.size(), 500);
  for (std::size_t k = 1; k <= sd_steps; ++k) {
    std::size_t idx = (k * sd.size() + sd_steps - 1) / sd_steps - 1;
    d.slow.push_back({{"policy", name}, {"slowdown", round_decimals(sd[idx], 4)}});
  }
  double gpus = static_cast<double>(std::max<std::size_t>(r.cluster_gpus, 1));
  for (const TimelinePoint& p : r.timeline)
    d.timeline.push_back({{"policy", name}, {"hours", round_decimals((p.t - r.first_submit_s) / 3600, 4)},
                          {"utilisation", round_decimals(100 * p.busy_gpus / gpus, 3)}, {"queued", round_decimals(p.queued_jobs, 3)},
                          {"fragmentation", round_decimals(p.fragmentation, 4)}});
}

Json line_chart(std::string title, Json data, std::string x, std::string xtitle, std::string y, std::string ytitle, bool logx) {
  Json xenc = {{"field", x}, {"type", "quantitative"}, {"title", xtitle}};
  if (logx) xenc["scale"] = {{"type", "log"}};
  return Json{{"$schema", "https://vega.github.io/schema/vega-lite/v5.json"},
              {"title", title},
              {"width", 520},
              {"height", 260},
              {"data", {{"values", std::move(data)}}},
              {"mark", {{"type", "line"}, {"interpolate", "step-after"}}},
              {"encoding", {{"x", xenc}, {"y", {{"field", y}, {"type", "quantitative"}, {"title", ytitle}}},
                            {"color", {{"field", "policy"}, {"type", "nominal"}}}}}};
}

Json stacked_chart(std::string title, Json data, std::string x, std::string xtitle) {
  return Json{{"$schema", "https://vega.github.io/schema/vega-lite/v5.json"},
              {"title", title},
              {"width", 520},
              {"height", 260},
              {"data", {{"values", std::move(data)}}},
              {"mark", "bar"},
              {"encoding", {{"y", {{"field", "policy"}, {"type", "nominal"}, {"title", nullptr}}},
                            {"x", {{"field", x}, {"type", "quantitative"}, {"stack", "zero"}, {"title", xtitle}}},
                            {"color", {{"field", "part"}, {"type", "nominal"}, {"title", nullptr}}},
                            {"order", {{"field", "part"}, {"type", "nominal"}}}}}};
}

// The Vega-Lite spec of every chart, by the id of its element on the page.
Json chart_specs(const ChartData& d) {
  Json specs = Json::object();
  specs["chart-jct-cdf"] = line_chart("Job completion time, CDF per policy", d.cdf, "jct_h", "JCT (hours, log scale)", "fraction", "fraction of jobs", true);
  specs["chart-utilisation"] = line_chart("GPU utilisation over time", d.timeline, "hours", "time since first submit (h)", "utilisation", "busy GPUs (%)", false);
  specs["chart-queue"] = line_chart("Queue length over time", d.timeline, "hours", "time since first submit (h)", "queued", "queued jobs", false);
  specs["chart-fragmentation"] = line_chart("GPUs stranded by fragmentation over time", d.timeline, "hours", "time since first submit (h)", "fragmentation", "free GPUs unusable by a typical job (share of all GPUs)", false);
  specs["chart-slowdown"] = Json{{"$schema", "https://vega.github.io/schema/vega-lite/v5.json"},
                                 {"title", "Communication slowdown per job (runtime / ideal)"},
                                 {"width", 520},
                                 {"height", 260},
                                 {"data", {{"values", d.slow}}},
                                 {"mark", {{"type", "boxplot"}, {"extent", "min-max"}}},
                                 {"encoding", {{"x", {{"field", "policy"}, {"type", "nominal"}, {"title", "policy"}}},
                                               {"y", {{"field", "slowdown"}, {"type", "quantitative"}, {"title", "slowdown (x)"}, {"scale", {{"zero", false}}}}},
                                               {"color", {{"field", "policy"}, {"type", "nominal"}}}}}};
  specs["chart-gpu-hours"] = stacked_chart("Where the cluster's GPU-hours went (first submit to last end)", d.hours, "gpu_hours", "GPU-hours");
  specs["chart-energy"] = stacked_chart("GPU energy per policy, split like the GPU-hours", d.energy, "mwh", "MWh");
  specs["chart-summary"] = Json{{"$schema", "https://vega.github.io/schema/vega-lite/v5.json"},
                                {"title", "Per-policy summary"},
                                {"data", {{"values", d.summary}}},
                                {"facet", {{"column", {{"field", "metric"}, {"type", "nominal"}, {"title", nullptr}}}}},
                                {"spec", {{"width", 150}, {"height", 200}, {"mark", "bar"},
                                          {"encoding", {{"x", {{"field", "policy"}, {"type", "nominal"}, {"title", nullptr}}},
                                                        {"y", {{"field", "value"}, {"type", "quantitative"}, {"title", nullptr}}},
                                                        {"color", {{"field", "policy"}, {"type", "nominal"}}}}}}},
                                {"resolve", {{"scale", {{"y", "independent"}}}}}};
  return specs;
}

// The HTML summary table: one column per policy.
std::string summary_table(const std::vector<PolicyRun>& runs) {
  std::string table = "<table><thead><tr><th></th>";
  for (const PolicyRun& r : runs) table += "<th>" + html::escape(r.summary.policy) + "</th>";
  table += "</tr></thead><tbody>";
  auto row = [&](std::string label, auto fn) {
    table += "<tr><th>" + html::escape(label) + "</th>";
    for (const PolicyRun& r : runs) table += "<td>" + html::escape(fn(r.summary)) + "</td>";
    table += "</tr>";
  };
  row("jobs completed", [](const PolicySummary& s) { return std::to_string(s.jobs); });
  row("never placed", [](const PolicySummary& s) { return std::to_string(s.never_placed); });
  row("JCT mean / p50 / p99", [](const PolicySummary& s) { return human_seconds(s.jct_mean_s) + " / " + human_seconds(s.jct_p50_s) + " / " + human_seconds(s.jct_p99_s); });
  row("wait mean / p95", [](const PolicySummary& s) { return human_seconds(s.wait_mean_s) + " / " + human_seconds(s.wait_p95_s); });
  row("makespan", [](const PolicySummary& s) { return human_seconds(s.makespan_s); });
  row("GPU utilisation (allocated / useful)", [](const PolicySummary& s) {
    return fmt::format("{:.1f} % / {:.1f} %", 100 * s.utilization, 100 * s.useful_utilization);
  });
  row("comm slowdown mean / p95", [](const PolicySummary& s) { return fmt::format("{:.3f}x / {:.3f}x", s.comm_slowdown_mean, s.comm_slowdown_p95); });
  row("GPU-hours: useful / lost to comm / idle while jobs waited / idle, nothing waiting", [](const PolicySummary& s) {
    return fmt::format("{:.0f} / {:.0f} / {:.0f} / {:.0f}", s.gpu_hours_useful, s.gpu_hours_lost_comm, s.gpu_hours_idle_queued,
                       s.gpu_hours_idle_no_demand);
  });
  row("GPU energy MWh: total / useful / lost to comm / idle while jobs waited / idle, nothing waiting", [](const PolicySummary& s) {
    return fmt::format("{:.2f} / {:.2f} / {:.2f} / {:.2f} / {:.2f}", s.energy_kwh / 1000, s.energy_kwh_useful / 1000,
                       s.energy_kwh_lost_comm / 1000, s.energy_kwh_idle_queued / 1000, s.energy_kwh_idle_no_demand / 1000);
  });
  row("useful GPU-hours per MWh", [](const PolicySummary& s) { return fmt::format("{:.0f}", s.useful_gpu_hours_per_mwh); });
  row("GPUs stranded by fragmentation, time mean (% of all GPUs)",
      [](const PolicySummary& s) { return fmt::format("{:.2f}", 100 * s.fragmentation_mean); });
  table += "</tbody></table>";
  return table;
}

}  // namespace

// Phases: the chart data of every policy → the chart specs → the summary table → the page.
Result<std::string> report_html(const RunInfo& info, const Trace& trace, const std::vector<PolicyRun>& runs) {
  ChartData data;
  for (const PolicyRun& run : runs) {
    add_summary_points(run.summary, data);
    if (run.result) add_result_points(run.summary.policy, *run.result, trace, data);
  }
  html::ChartPage page;
  page.title = "toposched simulation report";
  page.intro_html = fmt::format("<p>Cluster <b>{}</b> ({} nodes, {} GPUs); trace <b>{}</b> ({}, {} jobs); queue discipline <b>{}</b>; seed {}.</p>\n",
                                html::escape(info.cluster), info.cluster_nodes, info.cluster_gpus, html::escape(info.trace),
                                html::escape(info.trace_format), info.trace_jobs, html::escape(info.discipline), info.seed);
  page.summary_html = summary_table(runs);
  page.charts = chart_specs(data);
  return html::render_chart_page(page);
}

std::string jobs_csv(const Trace& trace, const std::vector<PolicyRun>& runs) {
  std::string out =
      "policy,job,gpus,kind,submit_s,start_s,end_s,wait_s,run_s,slowdown,placement_slowdown,nodes,placed,never_placed_reason\n";
  for (const PolicyRun& run : runs) {
    if (!run.result) continue;
    const std::string policy = csv_field(run.summary.policy);
    for (std::size_t i = 0; i < trace.jobs.size() && i < run.result->jobs.size(); ++i) {
      const SimJob& job = trace.jobs[i];
      const JobOutcome& o = run.result->jobs[i];
      out += fmt::format("{},{},{},{},{:.3f},", policy, csv_field(job.id), job.gpus, csv_field(job.kind), job.submit_s);
      if (o.placed) {
        out += fmt::format("{:.3f},{:.3f},{:.3f},{:.3f},{:.4f},{:.4f},{},true,\n", o.start_s, o.end_s, o.start_s - job.submit_s,
                           o.end_s - o.start_s, o.slowdown, o.placement_slowdown, o.nodes);
      } else {
        out += fmt::format(",,,,,,,false,{}\n", csv_field(o.never_placed_reason));
      }
    }
  }
  return out;
}

Result<void> write_report(const std::string& dir, const RunInfo& info, const Trace& trace, const std::vector<PolicyRun>& runs) {
  // Every file is rendered before anything is created, and report.json (what scripts read)
  // goes last: a failed render leaves no directory, a failed write no new report.html.
  TOPOSCHED_TRY(json, report_json(info, runs));
  TOPOSCHED_TRY(html, report_html(info, trace, runs));
  const std::string jobs = jobs_csv(trace, runs);
  const ReportFile extra[] = {{"jobs.csv", jobs}};
  return write_report_dir(dir, json, html, extra);
}

}  // namespace toposched::sim
