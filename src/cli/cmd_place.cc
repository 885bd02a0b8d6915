// `toposched place`: choose the GPUs (and rank order) for one job with a named policy,
// optionally on top of a saved allocation state, and save the new state.
#include <fmt/format.h>

#include "cli/common.h"
#include "placement/engine.h"
#include "placement/state_file.h"

namespace toposched::cli {

namespace {
bool parse_positive_int(const std::string& text, int& out) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoi(text);
  return out > 0;
}

struct PlaceOptions {
  std::string cluster;
  int gpus = 0;
  int nodes = 0;
  int gpus_per_node = 0;
  bool exclusive = false;
  int tp = 1, pp = 1, dp = 0, ep = 1, cp = 1;
  std::string workload = "training";
  std::string model;
  int replica_gpus = 0;
  std::string gpu_model;
  std::string required_tier, preferred_tier;
  int slice_size = 0;
  std::string slice_tier;
  std::vector<std::string> slice_layers;  // TIER:N, inner slice layers (Kueue multi-layer)
  bool unconstrained = false;
  int switches = 0;
  int segment = 0;
  bool consolidate_segments = false;
  std::string slurm_version;
  std::string block_sizes;
  std::uint64_t seed = 1;
  std::string policy = "topo";
  std::optional<std::string> job;  // nullopt: the first free job-N
  std::string state;
  std::string save_state;
  bool explain = false;
  OutputFormat format = OutputFormat::kText;
};

int run_place(const PlaceOptions& o) {
  auto kind = parse_workload_kind(o.workload);
  if (!kind)
    return usage_error(fmt::format("--workload must be training, inference or inference-pd, not '{}'", o.workload));
  if (auto policy = find_policy(o.policy); !policy) return report(policy.error());
  int code = kExitOk;
  if (!output_usable_or_report(o.save_state, code)) return code;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  // Read-decide-write under one exclusive lock, so concurrent `place` calls on one state
  // file cannot lose each other's jobs.
  auto lock = lock_state_files_or_report({o.state, o.save_state}, code);
  if (!lock) return code;
  auto loaded_state = load_state_or_report(*c, o.state, code);
  if (!loaded_state) return code;
  AllocationState& state = *loaded_state;
  PlaceRequest request;
  request.policy = o.policy;
  JobRequest& r = request.job;
  if (o.job && o.job->empty()) return usage_error("--job needs a non-empty job id (omit it for the first free job-N)");
  r.job_id = o.job.value_or("");
  r.gpus = o.gpus;
  r.nodes = o.nodes;
  r.gpus_per_node = o.gpus_per_node;
  r.exclusive = o.exclusive;
  r.tp = o.tp;
  r.pp = o.pp;
  r.dp = o.dp;
  r.ep = o.ep;
  r.cp = o.cp;
  r.workload = *kind;
  r.model_class = o.model;
  r.replica_gpus = o.replica_gpus;
  r.gpu_model = o.gpu_model;
  r.required_tier = o.required_tier;
  r.preferred_tier = o.preferred_tier;
  r.slice_size = o.slice_size;
  r.slice_tier = o.slice_tier;
  for (const std::string& layer : o.slice_layers) {
    auto colon = layer.rfind(':');
    int size = 0;
    if (colon == std::string::npos || colon == 0 || !parse_positive_int(layer.substr(colon + 1), size))
      return usage_error(fmt::format("--slice-layer needs TIER:SIZE (e.g. node:2), not '{}'", layer));
    r.inner_slices.push_back({layer.substr(0, colon), size, std::nullopt});
  }
  r.unconstrained = o.unconstrained;
  r.max_switches = o.switches;
  r.segment = o.segment;
  r.consolidate_segments = o.consolidate_segments;
  r.slurm_version = o.slurm_version;
  if (!o.block_sizes.empty()) {
    for (std::size_t at = 0; at <= o.block_sizes.size();) {
      auto comma = std::min(o.block_sizes.find(',', at), o.block_sizes.size());
      int size = 0;
      if (!parse_positive_int(o.block_sizes.substr(at, comma - at), size))
        return usage_error(fmt::format("--block-sizes needs sizes like 18,72, not '{}'", o.block_sizes));
      r.block_sizes.push_back(size);
      at = comma + 1;
    }
  }
  r.seed = o.seed;
  auto p = place_job(state, request, !o.save_state.empty());
  if (!p) {
    report(p.error());
    return p.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitError;
  }
  if (!o.save_state.empty()) {
    if (auto ok = save_state_file(state, o.save_state); !ok) {
      report(ok.error());
      return kExitError;
    }
  }
  if (o.format == OutputFormat::kJson) {
    return print_json(placement_to_json(*c, *p));
  }
  fmt::print("job {}: {} GPUs on {} node(s) {} (policy {})\n", p->job_id, p->gpus_by_rank.size(), p->node_count,
             p->nodes_hostlist, p->policy);
  if (p->predicted_comm_us)
    fmt::print("predicted communication per step: {:.1f} us ({:.2f}x the ideal {:.1f} us)\n", *p->predicted_comm_us,
               p->slowdown.value_or(1.0), p->ideal_comm_us.value_or(0.0));
  fmt::print("spans: {}\n", p->levels_spanned.empty() ? std::string("one GPU")
                                                      : fmt::format("{}", fmt::join(p->levels_spanned, ", ")));
  for (const auto& [node, dev] : p->cuda_visible_devices) fmt::print("  {} CUDA_VISIBLE_DEVICES={}\n", node, dev);
  if (o.explain) fmt::print("\n{}\n", p->explanation);
  return kExitOk;
}
}  // namespace

void register_place(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlaceOptions>();
  CLI::App* cmd = app.add_subcommand("place", "Choose GPUs and rank order for a job with a placement policy");
  cmd->add_option("--cluster,-c", o->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  auto* gpus = cmd->add_option("--gpus,-G", o->gpus, "Number of GPUs the job needs")->check(kPositiveCount);
  auto* nodes = cmd->add_option("--nodes,-N", o->nodes, "Number of whole nodes, exclusive (instead of --gpus)")
                    ->check(kPositiveCount);
  gpus->excludes(nodes);
  cmd->add_option("--gpus-per-node", o->gpus_per_node, "GPUs on every node the job uses (Slurm --gpus-per-node)")
      ->check(kPositiveCount);
  cmd->add_flag("--exclusive", o->exclusive, "Do not share nodes with other jobs (implied by --nodes)");
  cmd->add_option("--tp", o->tp, "Tensor-parallel degree: GPUs per TP group, kept inside a node (default 1)")
      ->check(kPositiveCount);
  cmd->add_option("--pp", o->pp, "Pipeline-parallel stages (default 1)")->check(kPositiveCount);
  cmd->add_option("--dp", o->dp, "Data-parallel degree (default: what is left of the GPUs)")
      ->check(kPositiveCount);
  cmd->add_option("--ep", o->ep, "Expert-parallel degree (default 1)")->check(kPositiveCount);
  cmd->add_option("--cp", o->cp, "Context-parallel degree (default 1)")->check(kPositiveCount);
  cmd->add_option(
      "--workload", o->workload,
      "training (one gang, default), inference (independent replicas) or inference-pd (prefill + decode pools)");
  cmd->add_option("--model", o->model,
                  "Cost-model workload class for the prediction (llm-dense, llm-moe, dp-vision, inference)");
  cmd->add_option("--replica-gpus", o->replica_gpus, "Inference: GPUs per replica (default tp x pp)")
      ->check(kPositiveCount);
  cmd->add_option("--gpu-model", o->gpu_model,
                  "Only nodes whose GPU model contains this text (case-insensitive), e.g. H100");
  cmd->add_option("--required-tier", o->required_tier,
                  "All GPUs under one switch of this tier (or 'node'), like Kueue's required topology");
  cmd->add_option("--preferred-tier", o->preferred_tier,
                  "Prefer all GPUs under one switch of this tier (or 'node'), like Kueue's preferred topology");
  cmd->add_option("--slice-size", o->slice_size,
                  "Pods per slice, each slice inside one --slice-tier domain (Kueue podset-slice-size; a pod is "
                  "one GPU, or --gpus-per-node GPUs; kueue-bestfit only)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--slice-tier", o->slice_tier,
                  "Tier (or 'node') each slice stays inside (Kueue podset-slice-required-topology)");
  cmd->add_option("--slice-layer", o->slice_layers,
                  "TIER:SIZE: a further slice layer inside each slice, outermost first, repeatable (Kueue "
                  "podset-slice-required-topology-constraints; e.g. --slice-size 8 --slice-tier rack "
                  "--slice-layer node:4)");
  cmd->add_flag("--unconstrained", o->unconstrained,
                "No tier constraint, said explicitly (Kueue podset-unconstrained-topology): kueue-bestfit fills "
                "the nodes with the least free capacity first");
  cmd->add_option("--switches", o->switches, "At most this many leaf switches (Slurm --switches)")
      ->check(kPositiveCount);
  cmd->add_option("--segment", o->segment,
                  "Nodes per segment, each inside one base block (Slurm --segment; slurm-block only)")
      ->check(kPositiveCount);
  cmd->add_flag("--consolidate-segments", o->consolidate_segments,
                "Keep every --segment in one block of the level that holds the whole job (Slurm "
                "--consolidate-segments; slurm-block only)");
  cmd->add_option("--slurm-version", o->slurm_version,
                  "Slurm release whose rules slurm-block and slurm-tree follow: 22.05, 24.05, 25.11 or 26.05 "
                  "(default, the newest)");
  cmd->add_option("--block-sizes", o->block_sizes,
                  "slurm-block: the BlockSizes of the topology.conf it reads, e.g. 18,72 (default: those "
                  "'export --to slurm-block' computes)");
  cmd->add_option("--seed", o->seed, "Seed of the random policy (default 1)");
  cmd->add_option("--policy,-p", o->policy,
                  "first-fit, random, slurm-tree, slurm-block, kueue-bestfit, kueue-balanced or topo (default)");
  cmd->add_option("--job,-j", o->job, "Job id (default: job-N, the first one free in the state)");
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
