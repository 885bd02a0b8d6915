// `toposched release`: free a job's GPUs in a saved allocation state.
#include <fmt/format.h>

#include "cli/common.h"
#include "placement/state_file.h"
#include "topology/hostlist.h"

namespace toposched::cli {

namespace {
struct ReleaseOptions {
  std::string cluster;
  std::string state;
  std::string save_state;
  std::string job;
  OutputFormat format = OutputFormat::kText;
};

int run_release(const ReleaseOptions& o) {
  int code = kExitOk;
  if (!output_usable_or_report(o.save_state.empty() ? o.state : o.save_state, code)) return code;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  auto lock = lock_state_files_or_report({o.state, o.save_state}, code);
  if (!lock) return code;
  auto state = load_state_or_report(*c, o.state, code);
  if (!state) return code;
  auto gpus = state->release(o.job);
  if (!gpus) {
    report(gpus.error());
    return kExitError;
  }
  const std::string& out_path = o.save_state.empty() ? o.state : o.save_state;
  if (auto ok = save_state_file(*state, out_path); !ok) {
    report(ok.error());
    return kExitError;
  }
  std::vector<std::string> nodes;
  for (GpuId g : *gpus) {
    const std::string& n = c->node_name(c->gpu_node(g));
    if (nodes.empty() || nodes.back() != n) nodes.push_back(n);
  }
  if (o.format == OutputFormat::kJson) {
    Json out;
    out["job"] = o.job;
    out["released_gpus"] = gpus->size();
    out["nodes"] = compress_hostlist(nodes);
    out["free_gpus"] = state->total_free_gpus();
    out["state"] = out_path;
    if (int rc = print_json(out); rc != kExitOk) return rc;
  } else {
    fmt::print("released job {}: {} GPUs on {}; {} of {} GPUs free\n", o.job, gpus->size(), compress_hostlist(nodes),
               state->total_free_gpus(), c->gpu_count());
  }
  return kExitOk;
}
}  // namespace

void register_release(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ReleaseOptions>();
  CLI::App* cmd = app.add_subcommand("release", "Free a job's GPUs in an allocation state file");
  cmd->add_option("--cluster,-c", o->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_option("--state", o->state, "Allocation state (JSON written by place --save-state)")->required();
  cmd->add_option("--job,-j", o->job, "Id of the job to release")->required();
  cmd->add_option("--save-state", o->save_state, "Where to write the new state (default: over --state, atomically)");
  add_format_option(*cmd, o->format);
  cmd->footer("Example: toposched release -c preset:dgx-h100 --state s.json --job job-1");
  cmd->callback([o, &exit_code] { exit_code = run_release(*o); });
}

}  // namespace toposched::cli
