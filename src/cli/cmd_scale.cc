// `toposched scale`: the scaling curve of one job plan under several placement policies:
// predicted step time, throughput, speed-up and efficiency per GPU count, and where
// efficiency breaks. All logic lives in src/sim/scale.h; this file parses and prints.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cli/comma_list.h"
#include "cli/common.h"
#include "cost/job_file.h"
#include "sim/scale.h"
#include "topology/file_io.h"

namespace toposched::cli {

namespace {

struct ScaleOptionsCli {
  std::string cluster;
  std::string job;
  std::string policies = "all";
  std::vector<int> gpus;
  std::string state;
  std::string report;
  int virtual_stages = 0;  // 0: the job file's
  std::uint64_t seed = 1;
  OutputFormat format = OutputFormat::kText;
};

int run_scale(const ScaleOptionsCli& o) {
  sim::ScaleOptions so;
  so.policies = o.policies.empty() || o.policies == "all" ? sim::scale_policies_all() : split_comma_list(o.policies);
  if (so.policies.empty()) return usage_error("--policies lists no policy");
  so.gpu_counts = o.gpus;
  so.virtual_stages = o.virtual_stages;
  so.seed = o.seed;
  if (o.virtual_stages < 0) return usage_error("--virtual-stages must be >= 1");
  if (int code = kExitOk; !output_dir_usable_or_report(o.report, code)) return code;
  int code = kExitOk;
  auto cluster = load_cluster_or_report(o.cluster, code);
  if (!cluster) return code;
  auto job = read_job_file(o.job);
  if (!job) {
    report(job.error());
    return kExitError;
  }
  auto state = load_state_or_report(*cluster, o.state, code);
  if (!state) return code;
  auto result = sim::scale_job(*cluster, *state, *job, so);
  if (!result) return report(result.error());
  if (!o.report.empty()) {
    if (auto w = sim::write_scale_report(o.report, *result); !w) {
      report(w.error());
      return kExitError;
    }
  }
  if (o.format == OutputFormat::kJson) {
    auto json = sim::scale_json(*result);
    if (!json) {
      report(json.error());
      return kExitError;
    }
    std::fputs(json->c_str(), stdout);
  } else {
    std::fputs(sim::scale_table(*result).c_str(), stdout);
    if (!o.report.empty()) fmt::print("\nreport: {} (and report.json)\n", path_in_dir(o.report, "report.html"));
  }
  return kExitOk;
}

}  // namespace

void register_scale(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ScaleOptionsCli>();
  CLI::App* cmd = app.add_subcommand("scale", "Scaling curve of a job plan: step time, speed-up and efficiency per GPU count and policy");
  cmd->add_option("--cluster,-c", o->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_option("--job,-j", o->job,
                  "Job file (YAML/JSON, the `cost --job` format): fixes tp, pp, cp, ep and the work per replica;\n"
                  "dp grows with the GPU count (docs/cost-model.md)")
      ->required();
  cmd->add_option("--gpus,-g", o->gpus, "Comma-separated ascending GPU counts, each a multiple of tp x pp x cp x ep (e.g. 64,128,256)")
      ->required()
      ->delimiter(',');
  cmd->add_option("--policies,-p", o->policies,
                  "Comma-separated placement policies, or 'all' (default): the deterministic ones,\n" + [] {
                    std::string s;
                    for (const auto& n : sim::scale_policies_all()) s += (s.empty() ? "" : ",") + n;
                    return s;
                  }() + ";\n'random' only when named (one random draw per size, not a scaling curve: see below)");
  cmd->add_option("--state", o->state, "Allocation state file: place on the cluster as loaded by its jobs (default: empty)");
  cmd->add_option("--report,-r", o->report, "Write DIR/report.json and DIR/report.html (efficiency and step-time charts)");
  cmd->add_option("--virtual-stages", o->virtual_stages,
                  "Interleaved pipeline chunks per stage; the bubble is (pp-1)/(this x micro_batches) of compute\n"
                  "(default: the job file's model.virtual_stages, itself 1 by default)");
  cmd->add_option("--seed", o->seed, "Seed for the random policy (default 1)");
  add_format_option(*cmd, o->format);
  cmd->footer(
      "For each size the policy places the job on the empty cluster (or the --state one), holding nothing;\n"
      "the cost model predicts its step: compute (with the pipeline bubble and the slowest GPU's lag) +\n"
      "communication left exposed by the per-kind overlap rules (docs/cost-model.md).\n"
      "Efficiency = speed-up x smallest size / size. JSON: {\"policies\":{NAME:[{\"gpus\",\"step_time_s\",\n"
      "\"speedup\",\"efficiency\",...}]},\"breaks\":{NAME:\"...\"}}.\n"
      "random, when named, is one random draw per size (--seed), not a scaling curve: a larger size is a\n"
      "fresh draw with less room to scatter, so its efficiency can exceed 1 (the smaller size landed\n"
      "scattered); the output says so (\"notes\" in JSON). Compare it on \"vs ideal\" (efficiency_vs_ideal).\n"
      "Example:\n"
      "  toposched scale --cluster 'preset:dgx-h100?nodes=512' --job examples/gpt3-175b-tp8-pp8.yaml \\\n"
      "      --gpus 64,128,256,512,1024,2048,4096 --policies first-fit,topo --report out/\n"
      "Docs: docs/cli.md, docs/cost-model.md (published scaling curves it reproduces).");
  cmd->callback([o, &exit_code] { exit_code = run_scale(*o); });
}

}  // namespace toposched::cli
