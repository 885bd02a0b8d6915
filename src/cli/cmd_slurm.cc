// `toposched slurm ...`: Slurm in the loop. `submit` plans a job on the GPUs Slurm leaves
// free and submits it with toposched's nodes and rank order (slurm/slurm_commands.h);
// `job-submit-lua` writes the job_submit.lua that asks `toposched serve` (slurm/job_submit_lua.h).
#include <chrono>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/common.h"
#include "cli/job_flags.h"
#include "placement/engine.h"
#include "slurm/job_submit_lua.h"
#include "slurm/slurm_commands.h"
#include "topology/file_io.h"

namespace toposched::cli {

namespace {

struct SubmitCliOptions {
  std::string cluster;
  PlaceRequest shape;
  std::string hostfile;
  bool dry_run = false;
  bool ignore_unknown_nodes = false;
  int timeout_s = 30;
  std::vector<std::string> sbatch_args;
  OutputFormat format = OutputFormat::kText;
};

std::string default_hostfile_path() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return fmt::format("toposched-{}-{}.hosts", std::chrono::duration_cast<std::chrono::milliseconds>(now).count(),
                     getpid());
}

int run_submit(SubmitCliOptions o) {
  int code = kExitOk;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  if (o.hostfile.empty()) o.hostfile = default_hostfile_path();
  slurm::SubmitOptions options{o.dry_run, o.hostfile, o.ignore_unknown_nodes, o.timeout_s};
  auto outcome = slurm::submit_with_plan(*c, o.sbatch_args, o.shape, options);
  if (!outcome) {
    Error e = outcome.error();
    e.message += " (nothing was submitted)";
    return report(e);
  }
  for (const auto& w : outcome->warnings) std::cerr << "toposched: warning: " << w << "\n";
  const slurm::SubmitPlan& plan = outcome->plan;
  o.hostfile = outcome->hostfile_path;
  if (o.format == OutputFormat::kJson) {
    Json out = o.dry_run ? slurm::dry_run_json(plan, o.hostfile)
                         : Json{{"job_id", outcome->job_id}, {"hostfile", o.hostfile},
                                {"plan", plan.placement}};
    out["warnings"] = outcome->warnings;
    return print_json(out);
  }
  if (o.dry_run) {
    fmt::print("{}\n", slurm::shell_command(plan, o.hostfile));
    fmt::print("# hostfile {} (one node per rank, rank 0 first):\n{}", o.hostfile, plan.hostfile);
    return kExitOk;
  }
  fmt::print("submitted Slurm job {}: {} GPUs on {} ({} per node, policy {}), gpu-bind {}, hostfile {}\n",
             outcome->job_id, plan.gpus_by_rank.size(), plan.placement.value("nodes", ""), plan.gpus_per_node,
             plan.placement.value("policy", ""), plan.gpu_bind, o.hostfile);
  return kExitOk;
}

void register_submit(CLI::App& slurm_cmd, int& exit_code) {
  auto o = std::make_shared<SubmitCliOptions>();
  CLI::App* cmd = slurm_cmd.add_subcommand(
      "submit", "Plan a job on the GPUs Slurm leaves free and submit it with toposched's nodes and rank order");
  cmd->add_option("--cluster,-c", o->cluster, "Cluster SPEC whose node names are Slurm's NodeNames")->required();
  static constexpr std::string_view kPlanKeys[] = {"tp", "pp", "dp", "ep", "cp", "policy"};
  add_job_request_flags(*cmd, o->shape, kPlanKeys);
  cmd->add_option("--hostfile", o->hostfile,
                  "Where to write the rank-order hostfile (default ./toposched-<time>-<pid>.hosts); it must be "
                  "readable on the job's first node");
  cmd->add_flag("--dry-run", o->dry_run, "Print the sbatch command and the hostfile; submit nothing, write nothing");
  cmd->add_flag("--ignore-unknown-nodes", o->ignore_unknown_nodes,
                "Place even when Slurm has GPU nodes the cluster spec lacks (they are never used)");
  cmd->add_option("--slurm-timeout", o->timeout_s, "Seconds each Slurm client call may take (default 30)")
      ->check(CLI::PositiveNumber);
  add_format_option(*cmd, o->format);
  cmd->add_option("sbatch_args", o->sbatch_args, "After '--': sbatch options, then a script (or --wrap=COMMAND)")
      ->required();
  cmd->footer(
      "The size comes from the sbatch arguments: -N with --gpus-per-node/--gres=gpu:K/--ntasks-per-node,\n"
      "--gpus=N, --ntasks=N, or -N with --exclusive (whole nodes); one task (rank) per GPU. toposched reads\n"
      "sinfo/squeue, places on the free GPUs, and submits with --nodelist, --ntasks-per-node, --gres=gpu:K,\n"
      "--distribution=arbitrary, --gpu-bind and SLURM_HOSTFILE (rank order); every other argument goes to\n"
      "sbatch unchanged. Examples:\n"
      "  toposched slurm submit -c cluster.yaml --tp 4 --pp 2 -- -N 2 --gpus-per-node=4 train.sbatch\n"
      "  toposched slurm submit -c cluster.yaml --dry-run -- --gpus=8 --wrap='srun python train.py'\n"
      "JSON output: {\"job_id\", \"hostfile\", \"plan\"} (plan = the place JSON). See docs/slurm.md.");
  cmd->callback([o, &exit_code] { exit_code = run_submit(*o); });
}

struct LuaCliOptions {
  slurm::JobSubmitLuaOptions lua;
  std::string output = "-";
};

int run_job_submit_lua(const LuaCliOptions& o) {
  if (int code = kExitOk; !output_usable_or_report(o.output, code)) return code;
  auto script = slurm::job_submit_lua(o.lua);
  if (!script) return report(script.error());
  if (auto ok = write_file_atomically(o.output, *script); !ok) return report(ok.error());
  return kExitOk;
}

void register_job_submit_lua(CLI::App& slurm_cmd, int& exit_code) {
  auto o = std::make_shared<LuaCliOptions>();
  CLI::App* cmd = slurm_cmd.add_subcommand(
      "job-submit-lua", "Write a job_submit.lua that has 'toposched serve' place jobs with a toposched comment");
  cmd->add_option("--url", o->lua.url, "Base URL of 'toposched serve', e.g. http://127.0.0.1:7070")->required();
  cmd->add_option("-o,--output", o->output, "Write the script here (atomically) instead of stdout");
  cmd->add_option("--timeout", o->lua.timeout_s,
                  "Seconds a submission may wait for the service before the job passes unchanged (default 2)");
  cmd->add_option("--curl", o->lua.curl, "curl binary slurmctld runs (default: curl on its PATH)");
  cmd->add_option("--token-file", o->lua.token_file, "File with the service's bearer token (serve --token-file)");
  cmd->add_option("--policy", o->lua.default_policy, "Policy when a job's comment names none (default: the service's)");
  cmd->footer(
      "Install: put the script next to slurm.conf as job_submit.lua and set JobSubmitPlugins=lua.\n"
      "Then: sbatch -N 2 --gpus-per-node=8 --comment=toposched:tp=8,pp=2 train.sbatch\n"
      "Comment keys: tp, pp, dp, ep, policy, gpus, nodes. See docs/slurm.md.");
  cmd->callback([o, &exit_code] { exit_code = run_job_submit_lua(*o); });
}

}  // namespace

void register_slurm(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("slurm", "Slurm in the loop: submit with toposched's placement, job_submit.lua");
  cmd->require_subcommand(1);
  register_submit(*cmd, exit_code);
  register_job_submit_lua(*cmd, exit_code);
}

}  // namespace toposched::cli
