#include "placement/job_request.h"

#include <charconv>

#include "cost/job_comm.h"
#include "formats/export_common.h"
#include "formats/k8s_nodes.h"
#include "formats/volcano.h"
#include "placement/job_schema.h"
#include "topology/registry.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace toposched {

namespace {

// In the enum's order: workload_kind_name indexes the rows.
const Registry<WorkloadKind>& workload_kinds() {
  static const Registry<WorkloadKind> kKinds(
      "workload kind", {{"training", "one job of tp x cp x ep x dp x pp GPUs", WorkloadKind::kTraining},
                        {"inference", "independent replicas of tp x pp GPUs", WorkloadKind::kInference},
                        {"inference-pd", "replicas split into prefill and decode (at least two)",
                         WorkloadKind::kInferencePD}});
  return kKinds;
}

}  // namespace

std::string_view workload_kind_name(WorkloadKind k) { return workload_kinds().rows()[static_cast<std::size_t>(k)].name; }

std::optional<WorkloadKind> parse_workload_kind(std::string_view name) {
  if (const auto* row = workload_kinds().row(name)) return row->value;
  return std::nullopt;
}

namespace {

bool icontains(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != hay.end();
}

// A Kubernetes node label that names a level, as Kueue's TAS annotations do (the levels of
// the Topology that `export --to kueue` writes, and Topograph's older keys: read_k8s_nodes'
// table): the tier index, kNodeTier for the hostname, nullopt when it names no tier here.
std::optional<int> tier_of_label(std::string_view label, const Cluster& c) {
  if (label == kHostnameLabel) return kNodeTier;
  auto tier = builtin_label_tier(label);
  if (tier && *tier < static_cast<int>(c.tiers().size())) return tier;
  return std::nullopt;
}

Result<std::optional<int>> resolve_tier(const std::string& name, const Cluster& c, std::string_view what) {
  if (name.empty()) return std::optional<int>();
  if (name == "node") return std::optional<int>(kNodeTier);
  std::string known = "node";
  for (std::size_t i = 0; i < c.tiers().size(); ++i) {
    if (c.tiers()[i].name == name) return std::optional<int>(static_cast<int>(i));
    known += ", " + c.tiers()[i].name;
  }
  if (auto tier = tier_of_label(name, c)) return std::optional<int>(*tier);
  // Volcano's tierName of the NVLink-domain HyperNodes `export --to volcano` writes (what a
  // job's networkTopology.highestTierName names) is that level too.
  if (builtin_label_is_domain(name) || name == kVolcanoDomainTierName)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} tier '{}' is an NVLink-domain level: toposched's tiers are the fabric tiers "
                                  "and the node (policy topo keeps each job's groups inside NVLink domains by itself)",
                                  what, name));
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{} tier '{}' is not a tier of cluster '{}'; its tiers: {} (or by node label, as "
                                "Kueue's annotations name them: {}, {}N)",
                                what, name, c.name(), known, kHostnameLabel, kFabricTierLabelPrefix));
}

// Kueue's multi-layer slices: each inner layer strictly below the one before (Kueue:
// "additional slice layer topology X must be at a lower level than Y") and dividing its size.
Result<void> normalize_inner_slices(JobRequest& r, const Cluster& c) {
  auto bad = [](std::string m) { return make_error(ErrorCode::kInvalidArgument, std::move(m)); };
  int prev_tier = *r.slice_tier_index;
  int prev_size = r.slice_size;
  std::string prev_name = r.slice_tier;
  for (JobRequest::SliceLayer& layer : r.inner_slices) {
    if (layer.size <= 0) return bad(fmt::format("slice layer '{}': the size must be positive", layer.tier));
    auto tier = resolve_tier(layer.tier, c, "slice layer");
    if (!tier) return tl::unexpected(tier.error());
    if (!*tier) return bad("a slice layer needs a tier");
    if (**tier >= prev_tier)
      return bad(fmt::format("slice layer tier '{}' must be below '{}'", layer.tier, prev_name));
    if (prev_size % layer.size != 0)
      return bad(fmt::format("slice layer size {} must evenly divide the layer above's size {}", layer.size,
                             prev_size));
    layer.tier_index = *tier;
    prev_tier = **tier;
    prev_size = layer.size;
    prev_name = layer.tier;
  }
  return {};
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
  if (r.slice_size == 0) {
    if (!r.inner_slices.empty()) return bad("--slice-layer needs --slice-size and --slice-tier (the outermost layer)");
    return {};
  }
  auto slice = resolve_tier(r.slice_tier, c, "slice");
  if (!slice) return tl::unexpected(slice.error());
  r.slice_tier_index = *slice;
  const std::optional<int>& main = r.required_tier_index ? r.required_tier_index : r.preferred_tier_index;
  if (main && *r.slice_tier_index > *main)  // tier indices grow upwards from kNodeTier = -1
    return bad(fmt::format("slice tier '{}' is above the {} tier '{}'", r.slice_tier,
                           r.required_tier_index ? "required" : "preferred",
                           r.required_tier_index ? r.required_tier : r.preferred_tier));
  const int pod_gpus = r.pod_gpus();
  const int pods = r.total_gpus / pod_gpus;
  if (pods % r.slice_size != 0)
    return bad(fmt::format("{} pod(s) of {} GPU(s) cannot be cut into slices of {}", pods, pod_gpus, r.slice_size));
  return normalize_inner_slices(r, c);
}

}  // namespace

namespace {

Result<long> positive_count(std::string_view text) {
  long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < 1 || v > 1'000'000'000)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("expected a positive whole number, found '{}'", text));
  return v;
}

std::vector<std::string_view> comma_parts(std::string_view text) {
  std::vector<std::string_view> parts;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    parts.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return parts;
}

}  // namespace

Result<std::vector<JobRequest::SliceLayer>> parse_slice_layers(std::string_view text) {
  std::vector<JobRequest::SliceLayer> layers;
  for (std::string_view part : comma_parts(text)) {
    const auto colon = part.rfind(':');
    const auto bad_layer = [&] {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("needs TIER:SIZE[,TIER:SIZE...] (e.g. node:2), found '{}'", part));
    };
    if (colon == std::string_view::npos || colon == 0) return bad_layer();
    auto size = positive_count(part.substr(colon + 1));
    if (!size) return bad_layer();
    layers.push_back({std::string(part.substr(0, colon)), static_cast<int>(*size), std::nullopt});
  }
  return layers;
}

Result<std::vector<long>> parse_block_size_list(std::string_view text) {
  std::vector<long> sizes;
  for (std::string_view part : comma_parts(text)) {
    auto size = positive_count(part);
    if (!size)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("needs block sizes such as 18,72, found '{}'", text));
    sizes.push_back(*size);
  }
  return sizes;
}

namespace {

// The schema's text forms (slice_layer, block_sizes) into the fields the policies read.
Result<void> parse_text_forms(JobRequest& r) {
  if (!r.slice_layers_text.empty()) {
    TOPOSCHED_TRY(layers, parse_slice_layers(r.slice_layers_text));
    r.inner_slices = std::move(layers);
  }
  if (!r.block_sizes_text.empty()) {
    TOPOSCHED_TRY(sizes, parse_block_size_list(r.block_sizes_text));
    r.block_sizes = std::move(sizes);
  }
  return {};
}

}  // namespace

bool model_matches(const JobRequest& r, const Cluster& cluster, NodeId n) {
  return r.gpu_model.empty() || icontains(cluster.node_type(n).gpu_model, r.gpu_model);
}

namespace {

tl::unexpected<Error> invalid_request(std::string m) { return make_error(ErrorCode::kInvalidArgument, std::move(m)); }

// The request's own ranges, before the cluster is looked at.
Result<void> check_ranges(const JobRequest& r) {
  if (r.gpus < 0 || r.nodes < 0 || r.gpus_per_node < 0 || r.gpus_per_pod < 0)
    return invalid_request("GPU and node counts must be positive");
  if ((r.gpus > 0) == (r.nodes > 0))
    return invalid_request("give exactly one of a GPU count (--gpus N) or a node count (--nodes N)");
  if (r.tp < 1 || r.pp < 1 || r.ep < 1 || r.cp < 1 || r.dp < 0)
    return invalid_request("parallelism degrees (--tp --pp --dp --ep --cp) must be at least 1");
  if (r.max_switches < 0 || r.segment < 0) return invalid_request("--switches and --segment must be positive");
  if (!r.slurm_version.empty() && r.slurm_version != "22.05" && r.slurm_version != "24.05" &&
      r.slurm_version != "25.11" && r.slurm_version != "26.05")
    return invalid_request(
        fmt::format("--slurm-version must be 22.05, 24.05, 25.11 or 26.05, not '{}'", r.slurm_version));
  if (r.consolidate_segments && r.segment == 0) return invalid_request("--consolidate-segments needs --segment");
  return {};
}

// The GPU counts of the node types whose model the request accepts (never empty).
Result<std::set<int>> eligible_node_sizes(const JobRequest& r, const Cluster& c) {
  std::set<int> sizes;
  std::set<std::string> models;
  bool any_model = false;
  // Each node type in use once, not each node: this runs for every placement (the
  // simulator's hot path), and string work per node dominated it. The walk stops once every
  // type has been seen (with one node type: after the first node), so it does not scan a
  // 100,000-GPU cluster's nodes on every request.
  std::vector<char> seen(c.node_type_count(), 0);
  std::size_t unseen = c.node_type_count();
  for (std::size_t i = 0; i < c.node_count() && unseen > 0; ++i) {
    NodeTypeId id = c.node_type_id(NodeId(static_cast<std::uint32_t>(i)));
    if (seen[id.index()]) continue;
    seen[id.index()] = 1;
    --unseen;
    const NodeType& type = c.node_type_at(id);
    models.insert(type.gpu_model);
    if (!r.gpu_model.empty() && !icontains(type.gpu_model, r.gpu_model)) continue;
    any_model = true;
    sizes.insert(type.gpu_count);
  }
  if (!any_model) {
    std::string list;
    for (const auto& m : models) list += (list.empty() ? "" : ", ") + m;
    return invalid_request(
        fmt::format("no node of cluster '{}' has GPU model '{}'; its models: {}", c.name(), r.gpu_model, list));
  }
  return sizes;
}

Result<void> resolve_pod_shape(const JobRequest& r, const std::set<int>& sizes);

// total_gpus, and nodes and gpus_per_node where the request implies them; then the pods.
Result<void> resolve_node_shape(JobRequest& r, const Cluster& c, const std::set<int>& sizes) {
  if (r.nodes > 0) {
    r.exclusive = true;
    if (r.gpus_per_node == 0) {
      if (sizes.size() != 1)
        return invalid_request("the eligible nodes have different GPU counts; give --gpus-per-node with --nodes");
      r.gpus_per_node = *sizes.begin();
    }
    const std::int64_t total = static_cast<std::int64_t>(r.nodes) * r.gpus_per_node;  // both <= kMaxCount
    if (total > std::numeric_limits<int>::max())
      return make_error(ErrorCode::kInfeasible,
                        fmt::format("needs {} GPUs; cluster '{}' has {} in all", total, c.name(), c.gpu_count()));
    r.total_gpus = static_cast<int>(total);
  } else {
    r.total_gpus = r.gpus;
    if (r.exclusive && r.gpus_per_node == 0) {
      // Exclusive GPUs come as whole nodes: every policy takes a node's GPUs or none.
      if (sizes.size() != 1 || r.gpus % *sizes.begin() != 0)
        return invalid_request(fmt::format(
            "--exclusive with {} GPUs takes whole nodes: give --gpus-per-node G (G divides {})", r.gpus, r.gpus));
      r.gpus_per_node = *sizes.begin();
    }
    if (r.gpus_per_node > 0) {
      if (r.gpus % r.gpus_per_node != 0)
        return invalid_request(fmt::format("{} GPUs cannot be split into nodes of {} GPUs", r.gpus, r.gpus_per_node));
      r.nodes = r.gpus / r.gpus_per_node;
    }
  }
  if (r.gpus_per_node > *sizes.rbegin())
    return invalid_request(fmt::format("{} GPUs per node requested, but the largest eligible node has {}",
                                       r.gpus_per_node, *sizes.rbegin()));
  if (r.total_gpus > static_cast<int>(c.gpu_count()))
    return make_error(ErrorCode::kInfeasible,
                      fmt::format("needs {} GPUs; cluster '{}' has {} in all", r.total_gpus, c.name(), c.gpu_count()));
  return resolve_pod_shape(r, sizes);
}

// gpus_per_pod against the size: whole pods, each on one node.
Result<void> resolve_pod_shape(const JobRequest& r, const std::set<int>& sizes) {
  if (r.gpus_per_pod == 0) return {};
  if (r.total_gpus % r.gpus_per_pod != 0)
    return invalid_request(
        fmt::format("{} GPUs cannot be split into pods of {} GPUs (--gpus-per-pod)", r.total_gpus, r.gpus_per_pod));
  if (r.gpus_per_node > 0 && r.gpus_per_node % r.gpus_per_pod != 0)
    return invalid_request(fmt::format("{} GPUs per node cannot hold whole pods of {} GPUs (--gpus-per-pod)",
                                       r.gpus_per_node, r.gpus_per_pod));
  if (r.gpus_per_pod > *sizes.rbegin())
    return invalid_request(fmt::format("pods of {} GPUs requested, but the largest eligible node has {}",
                                       r.gpus_per_pod, *sizes.rbegin()));
  return {};
}

// dp (and replica_gpus for inference) from the GPU count and the other degrees.
Result<void> resolve_parallelism(JobRequest& r) {
  if (r.workload == WorkloadKind::kTraining) {
    // The cost model's convention: tp x cp x ep x dp x pp GPUs (ep is its own dimension).
    // A checked product: degrees from a request body can be up to kMaxCount each.
    TOPOSCHED_TRY(world, parallel_product(r, false));
    if (r.total_gpus % world != 0)
      return invalid_request(fmt::format("{} GPUs is not a multiple of tp x cp x ep x pp = {}", r.total_gpus, world));
    const int dp = static_cast<int>(r.total_gpus / world);
    if (r.dp != 0 && r.dp != dp) {
      TOPOSCHED_TRY(all, parallel_product(r, true));
      return invalid_request(fmt::format("tp x cp x ep x pp x dp = {} but the job has {} GPUs", all, r.total_gpus));
    }
    r.dp = dp;
    r.replica_gpus = 0;
    return {};
  }
  if (r.replica_gpus == 0) {
    JobRequest tp_pp = r;
    tp_pp.cp = tp_pp.ep = 1;
    TOPOSCHED_TRY(replica, parallel_product(tp_pp, false));
    if (replica > r.total_gpus)
      return invalid_request(
          fmt::format("{} GPUs cannot be split into replicas of tp x pp = {} GPUs", r.total_gpus, replica));
    r.replica_gpus = static_cast<int>(replica);
  }
  if (r.replica_gpus < 1 || r.total_gpus % r.replica_gpus != 0)
    return invalid_request(
        fmt::format("{} GPUs cannot be split into replicas of {} GPUs", r.total_gpus, r.replica_gpus));
  if (r.workload == WorkloadKind::kInferencePD && (r.total_gpus / r.replica_gpus) < 2)
    return invalid_request("inference-pd needs at least two replicas (one prefill, one decode)");
  r.dp = r.total_gpus / r.replica_gpus;  // independent replicas
  return {};
}

// The model class, the tier names, Kueue's pod-set slices and Slurm's segments.
Result<void> resolve_placement_constraints(JobRequest& r, const Cluster& c) {
  if (!r.model_class.empty()) {
    if (auto m = workload_class(r.model_class); !m) return invalid_request(m.error().message);
  }
  TOPOSCHED_TRY(req, resolve_tier(r.required_tier, c, "required"));
  r.required_tier_index = req;
  TOPOSCHED_TRY(pref, resolve_tier(r.preferred_tier, c, "preferred"));
  r.preferred_tier_index = pref;
  TOPOSCHED_CHECK(normalize_kueue_podset(r, c));
  if (r.segment > 0 && r.nodes == 0)
    return invalid_request("--segment counts nodes: use it with --nodes or --gpus-per-node");
  if (r.segment > 0 && r.nodes % r.segment != 0)
    return invalid_request(fmt::format("{} nodes cannot be split into segments of {}", r.nodes, r.segment));
  return {};
}

}  // namespace

// Phases: the request's ranges → its text forms → the eligible node sizes → the node shape
// → the parallel degrees → tiers, slices and segments.
Result<JobRequest> normalize(JobRequest r, const Cluster& c) {
  TOPOSCHED_CHECK(check_ranges(r));
  TOPOSCHED_CHECK(parse_text_forms(r));
  TOPOSCHED_TRY(sizes, eligible_node_sizes(r, c));
  TOPOSCHED_CHECK(resolve_node_shape(r, c, sizes));
  TOPOSCHED_CHECK(resolve_parallelism(r));
  TOPOSCHED_CHECK(resolve_placement_constraints(r, c));
  return r;
}

}  // namespace toposched
