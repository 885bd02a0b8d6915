#include "slurm/submit_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "placement/slurm_alignment.h"
#include "topology/hostlist.h"

namespace toposched::slurm {

namespace {

using OJson = nlohmann::ordered_json;

tl::unexpected<Error> usage(std::string message) { return make_error(ErrorCode::kInvalidArgument, std::move(message)); }

bool all_equal(const std::vector<std::vector<int>>& seqs) {
  return std::all_of(seqs.begin(), seqs.end(), [&](const auto& s) { return s == seqs.front(); });
}

bool uniform_per_node(const Cluster& c, std::span<const GpuId> gpus) {
  auto groups = ranks_by_node(c, gpus);
  return std::all_of(groups.begin(), groups.end(),
                     [&](const auto& g) { return g.second.size() == groups.front().second.size(); });
}

// The engine's Slurm-aligned choice for `request`, holding nothing.
Result<Decision> dry_run(Engine& engine, const PlaceRequest& request) {
  Command command;
  command.kind = Command::Kind::kPlace;
  command.dry_run = true;
  command.place = request;
  command.place.slurm_aligned = true;
  return engine.decide_one(command, {});
}

// A placement with the same GPU count on every node: the policy's own when it is so, else
// equal counts per node, most GPUs per node first (fewest nodes).
Result<Decision> place_uniform(Engine& engine, const PlaceRequest& request) {
  const Cluster& c = engine.cluster();
  const JobRequest& job = request.job;
  auto first = dry_run(engine, request);
  if (!first || uniform_per_node(c, first->gpus_by_rank) || job.gpus_per_node > 0 || job.nodes > 0) return first;
  int max_per_node = 0;
  for (std::uint32_t i = 0; i < c.node_count(); ++i) max_per_node = std::max(max_per_node, c.node_gpu_count(NodeId(i)));
  for (int per_node = std::min(max_per_node, job.gpus); per_node >= 1; --per_node) {
    if (job.gpus % per_node != 0) continue;
    PlaceRequest r = request;
    r.job.gpus_per_node = per_node;
    auto p = dry_run(engine, r);
    if (p && uniform_per_node(c, p->gpus_by_rank)) return p;
  }
  std::vector<std::string> nodes;
  for (const auto& group : ranks_by_node(c, first->gpus_by_rank)) nodes.push_back(c.node_name(group.first));
  return make_error(ErrorCode::kInfeasible,
                    fmt::format("{} GPUs fit only with unequal GPU counts per node ({}), and Slurm gives a job the same "
                                "GPU count on every node",
                                job.gpus, compress_hostlist(nodes)));
}

std::string gpu_bind_for(const Cluster& c, std::span<const GpuId> gpus_by_rank) {
  auto seqs = local_sequences(c, gpus_by_rank);
  if (all_equal(seqs)) return fmt::format("map_gpu:{}", fmt::join(seqs.front(), ","));
  return "per_task:1";
}


std::string shell_quote(const std::string& s) {
  bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char ch) {
    return std::isalnum(ch) || std::string_view("-_=./:,@%+[]").find(static_cast<char>(ch)) != std::string_view::npos;
  });
  if (plain) return s;
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

Result<JobRequest> request_from_sbatch(const SbatchSize& size, const PlaceRequest& shape) {
  JobRequest r = shape.job;  // the plan's rows; the size rows are the sbatch arguments'
  if (r.job_id.empty()) r.job_id = kSubmitJobId;
  r.gpus = r.nodes = r.gpus_per_node = 0;
  r.gpu_model = size.gpu_type;
  r.exclusive = size.exclusive;
  int per_node = size.gpus_per_node > 0 ? size.gpus_per_node : (size.gpus == 0 ? size.ntasks_per_node : 0);
  if (size.gpus > 0) {
    r.gpus = size.gpus;
    if (size.nodes > 0) {
      if (size.gpus % size.nodes != 0 || (per_node > 0 && per_node * size.nodes != size.gpus))
        return usage(fmt::format("--gpus={} does not split evenly over --nodes={} (Slurm gives every node of a job the "
                                 "same GPU count)",
                                 size.gpus, size.nodes));
      per_node = size.gpus / size.nodes;
    }
  } else if (per_node > 0) {
    r.gpus = per_node * std::max(size.nodes, 1);
  } else if (size.nodes > 0 && size.exclusive) {
    r.nodes = size.nodes;
  } else if (size.ntasks > 0) {
    r.gpus = size.ntasks;
    if (size.nodes > 0) {
      if (size.ntasks % size.nodes != 0)
        return usage(fmt::format("--ntasks={} does not split evenly over --nodes={}", size.ntasks, size.nodes));
      per_node = size.ntasks / size.nodes;
    }
  } else {
    return usage("the sbatch arguments do not say how many GPUs: give --gpus=N, --gpus-per-node=K (or "
                 "--gres=gpu:K) with -N, --ntasks=N, or -N with --exclusive for whole nodes");
  }
  r.gpus_per_node = per_node;
  if (size.ntasks > 0 && r.gpus > 0 && size.ntasks != r.gpus)
    return usage(fmt::format("toposched runs one task (rank) per GPU: --ntasks={} but the job has {} GPUs", size.ntasks,
                             r.gpus));
  return r;
}

Result<SubmitPlan> plan_submit(Engine& engine, const ParsedSbatchArgs& args, const PlaceRequest& shape) {
  const Cluster& c = engine.cluster();
  PlaceRequest request = shape;
  TOPOSCHED_TRY(job, request_from_sbatch(args.size, shape));
  request.job = std::move(job);
  TOPOSCHED_TRY(decision, place_uniform(engine, request));
  SubmitPlan plan;
  plan.gpus_by_rank = std::move(decision.gpus_by_rank);
  plan.placement = nlohmann::ordered_json::parse(decision.answer_json);
  auto groups = ranks_by_node(c, plan.gpus_by_rank);
  plan.nodes = static_cast<int>(groups.size());
  plan.gpus_per_node = static_cast<int>(groups.front().second.size());
  for (const auto& g : groups) plan.node_order.push_back(c.node_name(g.first));
  for (GpuId g : plan.gpus_by_rank) plan.hostfile += c.node_name(c.gpu_node(g)) + "\n";
  plan.gpu_bind = gpu_bind_for(c, plan.gpus_by_rank);
  std::string gres = args.size.gpu_type.empty() ? fmt::format("gpu:{}", plan.gpus_per_node)
                                                : fmt::format("gpu:{}:{}", args.size.gpu_type, plan.gpus_per_node);
  if (!args.size.other_gres.empty()) gres += "," + args.size.other_gres;
  plan.sbatch_args = {"--parsable",
                      fmt::format("--nodes={}", plan.nodes),
                      fmt::format("--nodelist={}", compress_hostlist(plan.node_order)),
                      fmt::format("--ntasks={}", plan.gpus_by_rank.size()),
                      fmt::format("--ntasks-per-node={}", plan.gpus_per_node),
                      fmt::format("--gres={}", gres),
                      "--distribution=arbitrary",
                      fmt::format("--gpu-bind={}", plan.gpu_bind)};
  plan.sbatch_args.insert(plan.sbatch_args.end(), args.kept.begin(), args.kept.end());
  return plan;
}

nlohmann::ordered_json dry_run_json(const SubmitPlan& plan, const std::string& hostfile_path) {
  OJson argv = OJson::array({"sbatch"});
  for (const auto& a : plan.sbatch_args) argv.push_back(a);
  return OJson{{"sbatch", std::move(argv)},
               {"env", {{"SLURM_HOSTFILE", hostfile_path}}},
               {"hostfile", plan.hostfile},
               {"gpu_bind", plan.gpu_bind},
               {"plan", plan.placement}};
}

std::string shell_command(const SubmitPlan& plan, const std::string& hostfile_path) {
  std::string out = "SLURM_HOSTFILE=" + shell_quote(hostfile_path) + " sbatch";
  for (const auto& a : plan.sbatch_args) out += " " + shell_quote(a);
  return out;
}

}  // namespace toposched::slurm
