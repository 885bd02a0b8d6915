#include "placement/job_request.h"

#include "cost/job_comm.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace toposched {

std::string_view workload_kind_name(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kTraining:
      return "training";
    case WorkloadKind::kInference:
      return "inference";
    case WorkloadKind::kInferencePD:
      return "inference-pd";
  }
  return "training";
}

std::optional<WorkloadKind> parse_workload_kind(std::string_view name) {
  if (name == "training") return WorkloadKind::kTraining;
  if (name == "inference") return WorkloadKind::kInference;
  if (name == "inference-pd") return WorkloadKind::kInferencePD;
  return std::nullopt;
}

namespace {

// a x b x ... of request numbers, or nullopt past INT_MAX: products of degrees and counts
// wrapped to 0 (a division by zero later) or to a small count (8 GPUs for 536,870,913 nodes).
std::optional<int> checked_product(std::initializer_list<int> factors) {
  int out = 1;
  for (int f : factors)
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  return out;
}

bool icontains(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != hay.end();
}

Result<std::optional<int>> resolve_tier(const std::string& name, const Cluster& c, std::string_view what) {
  if (name.empty()) return std::optional<int>();
  if (name == "node") return std::optional<int>(kNodeTier);
  std::string known = "node";
  for (std::size_t i = 0; i < c.tiers().size(); ++i) {
    if (c.tiers()[i].name == name) return std::optional<int>(static_cast<int>(i));
    known += ", " + c.tiers()[i].name;
  }
  return make_error(
      ErrorCode::kInvalidArgument,
      fmt::format("{} tier '{}' is not a tier of cluster '{}'; its tiers: {}", what, name, c.name(), known));
}

// Kueue's PodSet options: slices and the explicit unconstrained form.
Result<void> normalize_kueue_podset(JobRequest& r, const Cluster& c) {
  auto bad = [](std::string m) { return make_error(ErrorCode::kInvalidArgument, std::move(m)); };
  if (r.unconstrained && (!r.required_tier.empty() || !r.preferred_tier.empty()))
    return bad("--unconstrained excludes --required-tier and --preferred-tier");
  if (r.slice_size < 0) return bad("--slice-size must be positive");
  if (r.slice_tier.empty() != (r.slice_size == 0))
    return bad(r.slice_tier.empty() ? "--slice-size needs --slice-tier (the tier each slice stays inside)"
                                    : "--slice-tier needs --slice-size (slice topology requested, but slice size "
                                      "not provided)");
  if (r.slice_size == 0) return {};
  auto slice = resolve_tier(r.slice_tier, c, "slice");
  if (!slice) return tl::unexpected(slice.error());
  r.slice_tier_index = *slice;
  const std::optional<int>& main = r.required_tier_index ? r.required_tier_index : r.preferred_tier_index;
  if (main && *r.slice_tier_index > *main)  // tier indices grow upwards from kNodeTier = -1
    return bad(fmt::format("slice tier '{}' is above the {} tier '{}'", r.slice_tier,
                           r.required_tier_index ? "required" : "preferred",
                           r.required_tier_index ? r.required_tier : r.preferred_tier));
  const int pod_gpus = r.gpus_per_node > 0 ? r.gpus_per_node : 1;
  const int pods = r.total_gpus / pod_gpus;
  if (pods % r.slice_size != 0)
    return bad(fmt::format("{} pod(s) of {} GPU(s) cannot be cut into slices of {}", pods, pod_gpus, r.slice_size));
  return {};
}

}  // namespace

bool model_matches(const JobRequest& r, const Cluster& cluster, NodeId n) {
  return r.gpu_model.empty() || icontains(cluster.node_type(n).gpu_model, r.gpu_model);
}

Result<JobRequest> normalize(JobRequest r, const Cluster& c) {
  auto bad = [](std::string m) { return make_error(ErrorCode::kInvalidArgument, std::move(m)); };
  if (r.gpus < 0 || r.nodes < 0 || r.gpus_per_node < 0) return bad("GPU and node counts must be positive");
  if ((r.gpus > 0) == (r.nodes > 0))
    return bad("give exactly one of a GPU count (--gpus N) or a node count (--nodes N)");
  if (r.tp < 1 || r.pp < 1 || r.ep < 1 || r.cp < 1 || r.dp < 0)
    return bad("parallelism degrees (--tp --pp --dp --ep --cp) must be at least 1");
  if (r.max_switches < 0 || r.segment < 0) return bad("--switches and --segment must be positive");

  std::set<int> sizes;
  std::set<std::string> models;
  bool any_model = false;
  // Each node type in use once, not each node: this runs for every placement (the
  // simulator's hot path), and string work per node dominated it.
  std::vector<char> seen(c.node_type_count(), 0);
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    NodeTypeId id = c.node_type_id(NodeId(static_cast<std::uint32_t>(i)));
    if (seen[id.index()]) continue;
    seen[id.index()] = 1;
    const NodeType& type = c.node_type_at(id);
    models.insert(type.gpu_model);
    if (!r.gpu_model.empty() && !icontains(type.gpu_model, r.gpu_model)) continue;
    any_model = true;
    sizes.insert(type.gpu_count);
  }
  if (!any_model) {
    std::string list;
    for (const auto& m : models) list += (list.empty() ? "" : ", ") + m;
    return bad(fmt::format("no node of cluster '{}' has GPU model '{}'; its models: {}", c.name(), r.gpu_model, list));
  }

  if (r.nodes > 0) {
    r.exclusive = true;
    if (r.gpus_per_node == 0) {
      if (sizes.size() != 1)
        return bad("the eligible nodes have different GPU counts; give --gpus-per-node with --nodes");
      r.gpus_per_node = *sizes.begin();
    }
    auto total = checked_product({r.nodes, r.gpus_per_node});
    if (!total) return make_error(ErrorCode::kInfeasible, fmt::format("{} nodes of {} GPUs: more GPUs than any cluster has", r.nodes, r.gpus_per_node));
    r.total_gpus = *total;
  } else {
    r.total_gpus = r.gpus;
    if (r.exclusive && r.gpus_per_node == 0) {
      // Exclusive GPUs come as whole nodes: every policy takes a node's GPUs or none.
      if (sizes.size() != 1 || r.gpus % *sizes.begin() != 0)
        return bad(fmt::format("--exclusive with {} GPUs takes whole nodes: give --gpus-per-node G (G divides {})",
                               r.gpus, r.gpus));
      r.gpus_per_node = *sizes.begin();
    }
    if (r.gpus_per_node > 0) {
      if (r.gpus % r.gpus_per_node != 0)
        return bad(fmt::format("{} GPUs cannot be split into nodes of {} GPUs", r.gpus, r.gpus_per_node));
      r.nodes = r.gpus / r.gpus_per_node;
    }
  }
  if (r.gpus_per_node > *sizes.rbegin())
    return bad(fmt::format("{} GPUs per node requested, but the largest eligible node has {}", r.gpus_per_node,
                           *sizes.rbegin()));
  if (r.total_gpus > static_cast<int>(c.gpu_count()))
    return make_error(ErrorCode::kInfeasible,
                      fmt::format("needs {} GPUs; cluster '{}' has {} in all", r.total_gpus, c.name(), c.gpu_count()));

  if (r.workload == WorkloadKind::kTraining) {
    // The cost model's convention: tp x cp x ep x dp x pp GPUs (ep is its own dimension).
    auto product = checked_product({r.tp, r.cp, r.ep, r.pp});
    if (!product)
      return bad(fmt::format("tp x cp x ep x pp = {} x {} x {} x {} is more GPUs than any job has", r.tp, r.cp, r.ep, r.pp));
    const long world = *product;
    if (r.total_gpus % world != 0)
      return bad(fmt::format("{} GPUs is not a multiple of tp x cp x ep x pp = {}", r.total_gpus, world));
    const int dp = static_cast<int>(r.total_gpus / world);
    if (r.dp != 0 && r.dp != dp)
      return bad(fmt::format("tp x cp x ep x pp x dp = {} but the job has {} GPUs", world * r.dp, r.total_gpus));
    r.dp = dp;
    r.replica_gpus = 0;
  } else {
    if (r.replica_gpus == 0) {
      auto replica = checked_product({r.tp, r.pp});
      if (!replica) return bad(fmt::format("tp x pp = {} x {} is more GPUs than any replica has", r.tp, r.pp));
      r.replica_gpus = *replica;
    }
    if (r.replica_gpus < 1 || r.total_gpus % r.replica_gpus != 0)
      return bad(fmt::format("{} GPUs cannot be split into replicas of {} GPUs", r.total_gpus, r.replica_gpus));
    if (r.workload == WorkloadKind::kInferencePD && (r.total_gpus / r.replica_gpus) < 2)
      return bad("inference-pd needs at least two replicas (one prefill, one decode)");
    r.dp = r.total_gpus / r.replica_gpus;  // independent replicas
  }

  if (!r.model_class.empty()) {
    if (auto m = workload_class(r.model_class); !m) return bad(m.error().message);
  }
  auto req = resolve_tier(r.required_tier, c, "required");
  if (!req) return tl::unexpected(req.error());
  r.required_tier_index = *req;
  auto pref = resolve_tier(r.preferred_tier, c, "preferred");
  if (!pref) return tl::unexpected(pref.error());
  r.preferred_tier_index = *pref;
  if (auto ok = normalize_kueue_podset(r, c); !ok) return tl::unexpected(ok.error());
  if (r.segment > 0 && r.nodes == 0) return bad("--segment counts nodes: use it with --nodes or --gpus-per-node");
  if (r.segment > 0 && r.nodes % r.segment != 0)
    return bad(fmt::format("{} nodes cannot be split into segments of {}", r.nodes, r.segment));
  return r;
}

}  // namespace toposched
