// `toposched release`: free a job's GPUs in a saved allocation state.
#include <fmt/format.h>

#include "cli/common.h"
#include "placement/state_file.h"

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
  // The same engine and file-backed store as `place`: a release is a command like any other.
  const std::string& out_path = o.save_state.empty() ? o.state : o.save_state;
  auto store = StateFileStore::open(*c, o.state, out_path);
  if (!store) {
    report(store.error());
    return kExitError;
  }
  Engine engine(*c, store->state());
  Command command;
  command.kind = Command::Kind::kRelease;
  command.job_id = o.job;
  auto decision = engine.decide_one(command, [&](std::span<const Mutation> m) { return store->commit(m); });
  if (!decision) {
    report(decision.error());
    return kExitError;
  }
  Json out = Json::parse(decision->answer_json);
  if (o.format == OutputFormat::kJson) {
    out["state"] = out_path;
    if (int rc = print_json(out); rc != kExitOk) return rc;
  } else {
    fmt::print("released job {}: {} GPUs on {}; {} of {} GPUs free\n", o.job, out["released_gpus"].get<std::size_t>(),
               out["nodes"].get<std::string>(), out["free_gpus"].get<std::int64_t>(), c->gpu_count());
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
