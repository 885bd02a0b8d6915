// `toposched place`: choose the GPUs (and rank order) for one job with a named policy,
// optionally on top of a saved allocation state, and save the new state.
#include <fmt/format.h>

#include "cli/common.h"
#include "cli/job_flags.h"
#include "placement/engine.h"
#include "placement/state_file.h"

namespace toposched::cli {

namespace {
// The command's own flags; the job's are the job-request schema's (cli/job_flags.h).
struct PlaceOptions {
  std::string cluster;
  PlaceRequest request;
  std::string state;
  std::string save_state;
  bool explain = false;
  OutputFormat format = OutputFormat::kText;
};

// The text form of the `place` JSON.
void print_text(const Json& p, bool explain) {
  fmt::print("job {}: {} GPUs on {} node(s) {} (policy {})\n", p["job"].get<std::string>(), p["gpus"].size(),
             p["node_count"].get<int>(), p["nodes"].get<std::string>(), p["policy"].get<std::string>());
  if (!p["predicted_comm_us"].is_null())
    fmt::print("predicted communication per step: {:.1f} us ({:.2f}x the ideal {:.1f} us)\n",
               p["predicted_comm_us"].get<double>(), p["slowdown"].is_null() ? 1.0 : p["slowdown"].get<double>(),
               p["ideal_comm_us"].is_null() ? 0.0 : p["ideal_comm_us"].get<double>());
  std::vector<std::string> levels = p["levels"].get<std::vector<std::string>>();
  fmt::print("spans: {}\n", levels.empty() ? std::string("one GPU") : fmt::format("{}", fmt::join(levels, ", ")));
  for (const auto& [node, dev] : p["cuda_visible_devices"].items())
    fmt::print("  {} CUDA_VISIBLE_DEVICES={}\n", node, dev.get<std::string>());
  if (explain) fmt::print("\n{}\n", p["explanation"].get<std::string>());
}

int run_place(const PlaceOptions& o) {
  if (auto policy = find_policy(o.request.policy); !policy) return report(policy.error());
  int code = kExitOk;
  if (!output_usable_or_report(o.save_state, code)) return code;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  // Read-decide-write under one exclusive lock, so concurrent `place` calls on one state
  // file cannot lose each other's jobs.
  auto lock = lock_state_files_or_report({o.state, o.save_state}, code);
  if (!lock) return code;
  // The state file is the engine's store: the engine decides, the file commits (atomic
  // rewrite of --save-state); without --save-state the decision is a dry run.
  auto store = StateFileStore::open(*c, o.state, o.save_state);
  if (!store) {
    report(store.error());
    return kExitError;
  }
  Engine engine(*c, store->state());
  Command command;
  command.place = o.request;
  command.dry_run = o.save_state.empty();
  auto decision = engine.decide_one(command, [&](std::span<const Mutation> m) { return store->commit(m); });
  if (!decision) {
    report(decision.error());
    return decision.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitError;
  }
  const Json answer = Json::parse(decision->answer_json);
  if (o.format == OutputFormat::kJson) return print_json(answer);
  print_text(answer, o.explain);
  return kExitOk;
}
}  // namespace

void register_place(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlaceOptions>();
  CLI::App* cmd = app.add_subcommand("place", "Choose GPUs and rank order for a job with a placement policy");
  cmd->add_option("--cluster,-c", o->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  add_job_request_flags(*cmd, o->request);
  cmd->get_option("--gpus")->excludes(cmd->get_option("--nodes"));
  cmd->add_option("--state", o->state, "Allocation state to start from (JSON written by --save-state)");
  cmd->add_option("--save-state", o->save_state, "Write the state with this job added (may be the --state file)");
  cmd->add_flag("--explain", o->explain, "Print a paragraph on why these GPUs (always in JSON as 'explanation')");
  add_format_option(*cmd, o->format);
  cmd->footer(
      "Examples:\n"
      "  toposched place -c 'preset:dgx-h100?nodes=64' --gpus 256 --tp 8 --pp 4 --policy topo --format json\n"
      "  toposched place -c preset:dgx-h100 --nodes 4 --policy slurm-tree --state s.json --save-state s.json\n"
      "Ranks are tp fastest, then cp, ep, dp, pp (Megatron-LM order); JSON lists every GPU with its\n"
      "rank. A request that cannot fit exits 1 and says why. See docs/placement.md for the policies.");
  cmd->callback([o, &exit_code] { exit_code = run_place(*o); });
}

}  // namespace toposched::cli
