#include "slurm/submit_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "placement/engine.h"
#include "topology/hostlist.h"

namespace toposched::slurm {

namespace {

using OJson = nlohmann::ordered_json;

tl::unexpected<Error> usage(std::string message) { return make_error(ErrorCode::kInvalidArgument, std::move(message)); }

// Ranks per node, nodes in first-rank order.
std::vector<std::pair<NodeId, std::vector<std::size_t>>> ranks_by_node(const Cluster& c, std::span<const GpuId> gpus) {
  std::vector<std::pair<NodeId, std::vector<std::size_t>>> out;
  std::map<std::uint32_t, std::size_t> slot;
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    NodeId n = c.gpu_node(gpus[r]);
    auto [it, fresh] = slot.emplace(static_cast<std::uint32_t>(n.index()), out.size());
    if (fresh) out.push_back({n, {}});
    out[it->second].second.push_back(r);
  }
  return out;
}

// Node-local GPU indices of each node, in rank order.
std::vector<std::vector<int>> local_sequences(const Cluster& c, std::span<const GpuId> gpus) {
  std::vector<std::vector<int>> out;
  for (const auto& [n, ranks] : ranks_by_node(c, gpus)) {
    std::vector<int> seq;
    for (std::size_t r : ranks) seq.push_back(c.gpu_local_index(gpus[r]));
    out.push_back(std::move(seq));
  }
  return out;
}

bool all_equal(const std::vector<std::vector<int>>& seqs) {
  return std::all_of(seqs.begin(), seqs.end(), [&](const auto& s) { return s == seqs.front(); });
}

// Gives each node's ranks the node's lowest free GPUs (what select/cons_tres allocates),
// keeping the order pattern the policy chose; when nodes then differ in their index lists
// and some list is not ascending, map_gpu cannot express it: ranks go in ascending order.
std::vector<GpuId> align_to_slurm(const AllocationState& state, std::vector<GpuId> gpus) {
  const Cluster& c = state.cluster();
  auto groups = ranks_by_node(c, gpus);
  std::vector<std::vector<int>> lowest_free(groups.size());
  for (std::size_t k = 0; k < groups.size(); ++k) {
    auto& [n, ranks] = groups[k];
    for (int i = 0; i < c.node_gpu_count(n) && lowest_free[k].size() < ranks.size(); ++i)
      if (state.gpu_free(c.node_gpu(n, i))) lowest_free[k].push_back(i);
    std::vector<std::size_t> by_planned(ranks);
    std::sort(by_planned.begin(), by_planned.end(),
              [&](std::size_t a, std::size_t b) { return c.gpu_local_index(gpus[a]) < c.gpu_local_index(gpus[b]); });
    for (std::size_t j = 0; j < by_planned.size() && j < lowest_free[k].size(); ++j)
      gpus[by_planned[j]] = c.node_gpu(n, lowest_free[k][j]);
  }
  auto seqs = local_sequences(c, gpus);
  bool ascending = std::all_of(seqs.begin(), seqs.end(), [](const auto& s) { return std::is_sorted(s.begin(), s.end()); });
  if (!all_equal(seqs) && !ascending)
    for (std::size_t k = 0; k < groups.size(); ++k)
      for (std::size_t j = 0; j < groups[k].second.size() && j < lowest_free[k].size(); ++j)
        gpus[groups[k].second[j]] = c.node_gpu(groups[k].first, lowest_free[k][j]);
  return gpus;
}

// A policy as Slurm can carry it out: the inner policy's choice, aligned by align_to_slurm.
// place() still checks the aligned GPUs and derives the plan (prediction, spans) from them.
class SlurmAlignedPolicy final : public PlacementPolicy {
 public:
  explicit SlurmAlignedPolicy(const PlacementPolicy& inner) : inner_(inner) {}
  std::string_view name() const override { return inner_.name(); }
  std::string_view summary() const override { return inner_.summary(); }
  bool handles_tier_constraints() const override { return inner_.handles_tier_constraints(); }
  bool supports_segments() const override { return inner_.supports_segments(); }
  Result<std::vector<GpuId>> select(const AllocationState& state, const JobRequest& request,
                                    const NodeMask& allowed) const override {
    TOPOSCHED_TRY(gpus, inner_.select(state, request, allowed));
    return align_to_slurm(state, std::move(gpus));
  }

 private:
  const PlacementPolicy& inner_;
};

bool uniform_per_node(const Cluster& c, const Placement& p) {
  auto groups = ranks_by_node(c, p.gpus_by_rank);
  return std::all_of(groups.begin(), groups.end(),
                     [&](const auto& g) { return g.second.size() == groups.front().second.size(); });
}

Result<Placement> place_uniform(const AllocationState& live, const JobRequest& request, const PlacementPolicy& policy) {
  const Cluster& c = live.cluster();
  auto attempt = [&](const JobRequest& r) -> Result<Placement> {
    TOPOSCHED_TRY(norm, normalize(r, c));
    return place(live, norm, policy);
  };
  auto first = attempt(request);
  if (!first || uniform_per_node(c, *first) || request.gpus_per_node > 0 || request.nodes > 0) return first;
  // Unequal per-node counts: try equal ones, most GPUs per node first (fewest nodes).
  int max_per_node = 0;
  for (std::uint32_t i = 0; i < c.node_count(); ++i) max_per_node = std::max(max_per_node, c.node_gpu_count(NodeId(i)));
  for (int per_node = std::min(max_per_node, request.gpus); per_node >= 1; --per_node) {
    if (request.gpus % per_node != 0) continue;
    JobRequest r = request;
    r.gpus_per_node = per_node;
    auto p = attempt(r);
    if (p && uniform_per_node(c, *p)) return p;
  }
  return make_error(ErrorCode::kInfeasible,
                    fmt::format("{} GPUs fit only with unequal GPU counts per node ({}), and Slurm gives a job the same "
                                "GPU count on every node",
                                request.gpus, first->nodes_hostlist));
}

std::string gpu_bind_for(const Cluster& c, const Placement& p) {
  auto seqs = local_sequences(c, p.gpus_by_rank);
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

Result<JobRequest> request_from_sbatch(const SbatchSize& size, const SubmitShape& shape) {
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

Result<SubmitPlan> plan_submit(const AllocationState& live, const ParsedSbatchArgs& args, const SubmitShape& shape) {
  const Cluster& c = live.cluster();
  TOPOSCHED_TRY(inner, find_policy(shape.policy));
  TOPOSCHED_TRY(request, request_from_sbatch(args.size, shape));
  SlurmAlignedPolicy policy(*inner);
  TOPOSCHED_TRY(placement, place_uniform(live, request, policy));
  SubmitPlan plan;
  auto groups = ranks_by_node(c, placement.gpus_by_rank);
  plan.nodes = static_cast<int>(groups.size());
  plan.gpus_per_node = static_cast<int>(groups.front().second.size());
  for (const auto& g : groups) plan.node_order.push_back(c.node_name(g.first));
  for (GpuId g : placement.gpus_by_rank) plan.hostfile += c.node_name(c.gpu_node(g)) + "\n";
  plan.gpu_bind = gpu_bind_for(c, placement);
  std::string gres = args.size.gpu_type.empty() ? fmt::format("gpu:{}", plan.gpus_per_node)
                                                : fmt::format("gpu:{}:{}", args.size.gpu_type, plan.gpus_per_node);
  if (!args.size.other_gres.empty()) gres += "," + args.size.other_gres;
  plan.sbatch_args = {"--parsable",
                      fmt::format("--nodes={}", plan.nodes),
                      fmt::format("--nodelist={}", compress_hostlist(plan.node_order)),
                      fmt::format("--ntasks={}", placement.gpus_by_rank.size()),
                      fmt::format("--ntasks-per-node={}", plan.gpus_per_node),
                      fmt::format("--gres={}", gres),
                      "--distribution=arbitrary",
                      fmt::format("--gpu-bind={}", plan.gpu_bind)};
  plan.sbatch_args.insert(plan.sbatch_args.end(), args.kept.begin(), args.kept.end());
  plan.placement = std::move(placement);
  return plan;
}

nlohmann::ordered_json dry_run_json(const Cluster& cluster, const SubmitPlan& plan, const std::string& hostfile_path) {
  OJson argv = OJson::array({"sbatch"});
  for (const auto& a : plan.sbatch_args) argv.push_back(a);
  return OJson{{"sbatch", std::move(argv)},
               {"env", {{"SLURM_HOSTFILE", hostfile_path}}},
               {"hostfile", plan.hostfile},
               {"gpu_bind", plan.gpu_bind},
               {"plan", placement_to_json(cluster, plan.placement)}};
}

std::string shell_command(const SubmitPlan& plan, const std::string& hostfile_path) {
  std::string out = "SLURM_HOSTFILE=" + shell_quote(hostfile_path) + " sbatch";
  for (const auto& a : plan.sbatch_args) out += " " + shell_quote(a);
  return out;
}

}  // namespace toposched::slurm
