// `toposched simulate`: replay a job trace (or a generated LLM-era mix) on a cluster under
// several placement policies side by side; print the comparison, write report.json and
// report.html. All logic lives in src/sim/.
#include <unistd.h>

#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "cli/comma_list.h"
#include "cli/common.h"
#include "sim/backend.h"
#include "sim/generator.h"
#include "sim/report.h"
#include "sim/score_model.h"
#include "sim/simulate.h"
#include "sim/traces/native_csv.h"
#include "sim/traces/trace_source.h"
#include "topology/file_io.h"

namespace toposched::cli {

namespace {

struct SimulateOptions {
  std::string cluster;
  std::string trace;
  std::string generate;
  std::string trace_format = "auto";
  bool skip_bad_rows = false;
  std::string policies;
  std::string discipline = "fifo";
  double estimate_factor = 1.0;
  std::uint64_t seed = 1;
  double load = 0.9;
  long max_jobs = 0;
  std::string report;
  std::string write_trace;
  std::string score_model;
  bool quiet = false;
  OutputFormat format = OutputFormat::kText;
};

// An exit code when a step ends the command; nothing when the command goes on.
using Stop = std::optional<int>;

// The options' ranges, the queue discipline and the policy list; the output paths usable.
Stop check_options(const SimulateOptions& o, sim::Discipline& discipline, std::vector<std::string>& policies) {
  if (o.trace.empty() == o.generate.empty()) return usage_error("simulate needs exactly one of --trace FILE or --generate YAML");
  auto d = sim::parse_discipline(o.discipline);
  if (!d) return report(d.error());
  discipline = *d;
  if (!(o.estimate_factor > 0)) return usage_error("--estimate-factor must be > 0");
  if (!(o.load > 0 && o.load <= 10)) return usage_error("--load must be in (0, 10]");
  policies = o.policies.empty() || o.policies == "all" ? sim::placer_names() : split_comma_list(o.policies);
  if (policies.empty()) return usage_error("--policies lists no policy");
  for (std::size_t i = 0; i < policies.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (policies[i] == policies[k]) return usage_error(fmt::format("policy '{}' is listed twice in --policies", policies[i]));
  if (int code = kExitOk; !output_dir_usable_or_report(o.report, code) || !output_usable_or_report(o.write_trace, code))
    return code;
  return std::nullopt;
}

// The trace: generated from --generate's YAML, or read from --trace.
Stop read_trace(const SimulateOptions& o, sim::Trace& trace) {
  if (!o.generate.empty()) {
    auto params = sim::load_generator_yaml(o.generate);
    if (!params) {
      report(params.error());
      return kExitError;
    }
    // Only the jobs simulated are drawn: --max-jobs bounds the memory of a huge `jobs:`.
    trace = sim::generate_trace(*params, o.max_jobs > 0 ? static_cast<std::size_t>(o.max_jobs) : 0);
    trace.source = o.generate;
    return std::nullopt;
  }
  sim::TraceReadOptions ro;
  ro.skip_bad_rows = o.skip_bad_rows;
  auto t = sim::load_trace(o.trace, o.trace_format, ro);
  if (!t) {
    report(t.error());
    return t.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitError;
  }
  trace = std::move(*t);
  return std::nullopt;
}

// Cut to --max-jobs, say what was skipped, give times to a trace without them, and write
// it out when --write-trace asks.
Stop prepare_trace(const SimulateOptions& o, const Cluster& cluster, sim::Trace& trace) {
  if (o.max_jobs > 0 && trace.jobs.size() > static_cast<std::size_t>(o.max_jobs)) trace.jobs.resize(static_cast<std::size_t>(o.max_jobs));
  if (!o.quiet) {
    if (trace.skipped_rows > 0)
      fmt::print(stderr, "toposched: skipped {} malformed rows of {} (first: {})\n", trace.skipped_rows, trace.source, trace.first_skip_reason);
    if (trace.ignored_rows > 0)
      fmt::print(stderr, "toposched: ignored {} rows of {} that hold no GPU job (no GPU, never ran)\n", trace.ignored_rows, trace.source);
  }
  if (!trace.has_times) {
    sim::assign_synthetic_times(trace, cluster.gpu_count(), o.seed, o.load);
    if (!o.quiet)
      fmt::print(stderr, "toposched: {} has no submit or run times; using Poisson arrivals for {:.0f}% load and log-normal durations (seed {})\n",
                 trace.source, 100 * o.load, o.seed);
  }
  if (trace.jobs.empty()) {
    fmt::print(stderr, "toposched: error: {}: the trace holds no GPU job to simulate\n", trace.source);
    return kExitError;
  }
  if (!o.write_trace.empty()) {
    if (auto w = write_file_atomically(o.write_trace, sim::write_native_csv(trace)); !w) {
      report(w.error());
      return kExitError;
    }
  }
  return std::nullopt;
}

// Every policy on the trace, with a progress bar on a terminal.
// With --score-model the placers decide on `scored` (the perturbed model) while the runtimes
// come from `cluster` (the truth); same ids in both (sim/score_model.h).
Result<std::vector<sim::PolicyOutcome>> simulate_all(const SimulateOptions& o, const Cluster& cluster, const sim::Trace& trace,
                                                     const std::vector<std::string>& policies, sim::Discipline discipline,
                                                     const Cluster* scored) {
  auto comm = sim::make_comm_model(cluster);
  sim::EngineOptions eo;
  eo.discipline = discipline;
  eo.estimate_factor = o.estimate_factor;
  eo.seed = o.seed;
  bool bar = !o.quiet && isatty(STDERR_FILENO);
  int last_pct = -1;
  auto progress = [&](double f) {
    int pct = static_cast<int>(f * 100);
    if (pct == last_pct) return;
    last_pct = pct;
    int filled = pct * 40 / 100;
    fmt::print(stderr, "\rsimulating {} policies [{:<40}] {:3d}%", policies.size(), std::string(static_cast<std::size_t>(filled), '#'), pct);
    std::fflush(stderr);
  };
  sim::PlacerFactory make;
  if (scored)
    make = [scored](const Cluster&, const std::string& p, std::uint64_t seed) { return sim::make_placer(*scored, p, seed); };
  auto results = sim::simulate_policies(cluster, trace, policies, *comm, eo, make, bar ? std::function<void(double)>(progress) : nullptr);
  if (bar) fmt::print(stderr, "\r{:<70}\r", "");
  return results;
}

// The report directory, then the comparison on stdout.
int write_outputs(const SimulateOptions& o, const sim::RunInfo& info, const sim::Trace& trace,
                  const std::vector<sim::PolicyRun>& runs) {
  if (!o.report.empty()) {
    if (auto w = sim::write_report(o.report, info, trace, runs); !w) {
      report(w.error());
      return kExitError;
    }
  }
  if (o.format == OutputFormat::kJson) {
    auto json = sim::report_json(info, runs);
    if (!json) return report(json.error());
    std::fputs(json->c_str(), stdout);
  } else {
    std::fputs(sim::report_table(info, runs).c_str(), stdout);
    if (!o.report.empty()) fmt::print("\nreport: {} (and report.json, jobs.csv)\n", path_in_dir(o.report, "report.html"));
  }
  return kExitOk;
}

// Phases: check the options → load the cluster → read and prepare the trace → simulate
// every policy → write the report and print the comparison.
int run_simulate(const SimulateOptions& o) {
  sim::Discipline discipline{};
  std::vector<std::string> policies;
  if (Stop stop = check_options(o, discipline, policies)) return *stop;
  auto cluster = sim::load_sim_cluster(o.cluster);
  if (!cluster) {
    int code = report(cluster.error());
    return o.cluster.starts_with("preset:") ? code : kExitError;
  }
  std::optional<Cluster> scored;
  if (!o.score_model.empty()) {
    auto model = sim::parse_score_model(o.score_model);
    if (!model) return report(model.error());
    if (!model->identity()) {
      auto perturbed = sim::perturbed_cluster(*cluster, *model);
      if (!perturbed) return report(perturbed.error());
      scored.emplace(std::move(*perturbed));
    }
  }
  sim::Trace trace;
  if (Stop stop = read_trace(o, trace)) return *stop;
  if (Stop stop = prepare_trace(o, *cluster, trace)) return *stop;
  auto results = simulate_all(o, *cluster, trace, policies, discipline, scored ? &*scored : nullptr);
  if (!results) {
    report(results.error());
    return kExitUsage;  // only an unknown policy name fails here
  }

  sim::RunInfo info;
  info.cluster = cluster->name();
  info.cluster_gpus = cluster->gpu_count();
  info.cluster_nodes = cluster->node_count();
  info.trace = trace.source;
  info.trace_format = trace.format;
  info.trace_jobs = trace.jobs.size();
  info.discipline = std::string(sim::discipline_name(discipline));
  info.seed = o.seed;
  info.score_model = o.score_model;
  std::vector<sim::PolicyRun> runs;
  for (const auto& r : *results) runs.push_back({r.summary, &r.result});
  return write_outputs(o, info, trace, runs);
}

}  // namespace

void register_simulate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Replay a job trace on a cluster under several placement policies and compare them");
  cmd->add_option("--cluster,-c", o->cluster,
                  "Cluster SPEC: a spec file, preset:NAME[?k=v&...], or an Alibaba v2023 node list (openb_node_list_*.csv)")
      ->required();
  cmd->add_option("--trace,-t", o->trace, "Job trace file (formats: docs/traces.md); a folder for a PAI v2020 trace");
  cmd->add_option("--generate", o->generate, "Generate an LLM-era job mix from this YAML instead (see examples/llm-mix.yaml)");
  cmd->add_option("--trace-format", o->trace_format, "auto (default), native, alibaba-v2023, pai-v2020, philly, helios")
      ->check(CLI::IsMember(sim::trace_formats()));
  cmd->add_flag("--skip-bad-rows", o->skip_bad_rows, "Drop malformed trace rows (counted on stderr) instead of failing");
  cmd->add_option("--policies,-p", o->policies, "Comma-separated placement policies, or 'all' (default): " + [] {
    std::string s;
    for (const auto& n : sim::placer_names()) s += (s.empty() ? "" : ",") + n;
    return s;
  }());
  cmd->add_option("--discipline", o->discipline, "Queue discipline: fifo (default), easy-backfill, priority");
  cmd->add_option("--estimate-factor", o->estimate_factor,
                  "easy-backfill: runtime estimate = duration x this, for jobs whose trace gives none (default 1)");
  cmd->add_option("--seed", o->seed, "Seed for the random policy and synthetic times (default 1)");
  cmd->add_option("--load", o->load, "Offered load for traces without times (default 0.9 of the cluster)");
  cmd->add_option("--max-jobs", o->max_jobs, "Simulate only the first N jobs of the trace");
  cmd->add_option("--report,-r", o->report, "Write DIR/report.json, DIR/report.html and DIR/jobs.csv (one row per job and policy)");
  cmd->add_option("--write-trace", o->write_trace, "Also write the trace simulated (e.g. the generated one) as native CSV");
  cmd->add_option("--score-model", o->score_model,
                  "The policies decide with this perturbed model while runtimes use the true one: comma-separated "
                  "bw:TIER=F, lat:TIER=F (TIER a tier name or all; F 0.7 or -30%), bw:nvlink=F, hop-us=X, none "
                  "(docs/simulator.md)");
  cmd->add_flag("--quiet,-q", o->quiet, "No progress bar and no notes on stderr");
  add_format_option(*cmd, o->format);
  cmd->footer(
      "Each policy runs in its own thread on identical inputs. A job's runtime is its trace duration\n"
      "stretched by the communication slowdown of the GPUs it got (cost model) and by contention on\n"
      "shared uplinks. Text output is a table, one column per policy; --format json prints report.json.\n"
      "Example:\n"
      "  toposched simulate --cluster 'preset:dgx-h100?nodes=64' --generate examples/llm-mix.yaml \\\n"
      "      --policies first-fit,topo --report out/\n"
      "Docs: docs/simulator.md, docs/traces.md.");
  cmd->callback([o, &exit_code] { exit_code = run_simulate(*o); });
}

}  // namespace toposched::cli
