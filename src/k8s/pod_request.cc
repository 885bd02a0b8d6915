#include "k8s/pod_request.h"

#include "formats/json_input.h"
#include "formats/k8s_quantity.h"
#include "formats/volcano.h"
#include "placement/job_schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace toposched::k8s {

namespace {

const std::string* find_meta(const Pod& pod, std::string_view key) {
  if (auto it = pod.annotations.find(std::string(key)); it != pod.annotations.end()) return &it->second;
  if (auto it = pod.labels.find(std::string(key)); it != pod.labels.end()) return &it->second;
  return nullptr;
}

std::optional<long long> parse_int(std::string_view s) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// resource.Quantity text -> its value when it is a whole number ("8", "8000m", "1k").
std::optional<long long> whole_quantity(std::string_view q) {
  const auto v = parse_k8s_quantity(q);
  if (!v || *v < 0 || *v > 1e9 || std::fabs(*v - std::round(*v)) > 1e-9) return std::nullopt;
  return static_cast<long long>(std::llround(*v));
}

Result<long long> container_gpus(const Container& c, const Pod& pod) {
  const ResourceList* from = &c.requests;
  auto it = c.requests.find(std::string(kGpuResource));
  if (it == c.requests.end()) {
    from = &c.limits;
    it = c.limits.find(std::string(kGpuResource));
    if (it == c.limits.end()) return 0;
  }
  (void)from;
  auto n = whole_quantity(it->second);
  if (!n)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("pod {}/{}: container '{}' asks for {} = '{}', not a whole number of GPUs",
                                  pod.namespace_name, pod.name, c.name, kGpuResource, it->second));
  return *n;
}

Result<int> positive_annotation(const Pod& pod, std::string_view key, int fallback) {
  const std::string* v = find_meta(pod, key);
  if (!v) return fallback;
  auto n = parse_int(*v);
  if (!n || *n < 1 || *n > 1'000'000)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("pod {}/{}: annotation {}='{}' must be a positive integer", pod.namespace_name,
                                  pod.name, key, *v));
  return static_cast<int>(*n);
}

}  // namespace

Result<int> pod_gpu_count(const Pod& pod) {
  long long sum = 0;
  for (const Container& c : pod.containers) {
    TOPOSCHED_TRY(n, container_gpus(c, pod));
    sum += n;
  }
  long long init_max = 0;
  for (const Container& c : pod.init_containers) {
    TOPOSCHED_TRY(n, container_gpus(c, pod));
    init_max = std::max(init_max, n);
  }
  const long long total = std::max(sum, init_max);
  if (total > 1'000'000)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("pod {}/{}: {} GPUs", pod.namespace_name, pod.name, total));
  return static_cast<int>(total);
}

Result<std::optional<GangInfo>> pod_gang(const Pod& pod) {
  struct Source {
    std::string_view source, name_key;
    std::initializer_list<std::string_view> size_keys;
  };
  static const Source kSources[] = {
      {"scheduler-plugins", "scheduling.x-k8s.io/pod-group",
       {"scheduling.x-k8s.io/min-member", "toposched.io/group-size"}},
      {"kueue", "kueue.x-k8s.io/pod-group-name", {"kueue.x-k8s.io/pod-group-total-count", "toposched.io/group-size"}},
      {"volcano", "scheduling.k8s.io/group-name", {"toposched.io/group-size"}},
      // KAI-Scheduler's pod-grouper names each pod's PodGroup in this annotation; the
      // group's minMember lives in the PodGroup object, which the extender does not read.
      {"kai", "pod-group-name", {"toposched.io/group-size"}},
      // Kubernetes' own PodGroup (scheduling.k8s.io): the plugin build copies its name and
      // gang minCount here from the pod's spec.schedulingGroup and the PodGroup object.
      {"kubernetes", "toposched.io/pod-group", {"toposched.io/group-size"}},
  };
  for (const Source& s : kSources) {
    const std::string* name = find_meta(pod, s.name_key);
    if (!name || name->empty()) continue;
    for (std::string_view key : s.size_keys) {
      if (!find_meta(pod, key)) continue;
      TOPOSCHED_TRY(size, positive_annotation(pod, key, 0));
      return std::optional<GangInfo>(GangInfo{std::string(s.source), *name, size});
    }
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("pod {}/{} is in {} group '{}' but has no group size: set annotation {}",
                                  pod.namespace_name, pod.name, s.source, *name, *s.size_keys.begin()));
  }
  return std::optional<GangInfo>();
}

std::optional<int> pod_rank(const Pod& pod) {
  static constexpr std::string_view kKeys[] = {
      "toposched.io/rank", "batch.kubernetes.io/job-completion-index", "apps.kubernetes.io/pod-index",
      "training.kubeflow.org/replica-index", "leaderworkerset.sigs.k8s.io/worker-index"};
  for (std::string_view key : kKeys) {
    if (const std::string* v = find_meta(pod, key)) {
      if (auto n = parse_int(*v); n && *n >= 0 && *n < 1'000'000) return static_cast<int>(*n);
    }
  }
  const auto dash = pod.name.find_last_of('-');
  if (dash == std::string::npos || dash + 1 == pod.name.size()) return std::nullopt;
  if (auto n = parse_int(std::string_view(pod.name).substr(dash + 1)); n && *n >= 0 && *n < 1'000'000)
    return static_cast<int>(*n);
  return std::nullopt;
}

namespace {

// Kueue's multi-layer slices (TASMultiLayerTopology, beta and on by default since v0.19):
// kueue.x-k8s.io/podset-slice-required-topology-constraints holds a JSON array of 1 to 3
// {"topology": LABEL, "size": N} entries, outermost first, instead of the two-level
// podset-slice-required-topology + podset-slice-size pair (pkg/controller/jobframework/
// tas.go, tas_validation.go at ff69552e). The first entry is the slice, the rest its layers.
constexpr std::string_view kSliceConstraints = "kueue.x-k8s.io/podset-slice-required-topology-constraints";

Result<void> read_slice_constraints(const Pod& pod, PlaceRequest& request) {
  const std::string* text = find_meta(pod, kSliceConstraints);
  if (!text) return {};
  auto bad = [&](std::string why) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("pod {}/{}: annotation {} {}", pod.namespace_name, pod.name, kSliceConstraints, why));
  };
  if (find_meta(pod, find_job_field("slice_tier")->annotation) || find_meta(pod, find_job_field("slice_size")->annotation))
    return bad("may not be set with kueue.x-k8s.io/podset-slice-required-topology or podset-slice-size");
  auto doc = parse_json_document(*text, "annotation");
  if (!doc) return bad(doc.error().message);
  if (!doc->is_array() || doc->empty() || doc->size() > 3)
    return bad(fmt::format("must be a JSON array of 1 to 3 {{\"topology\", \"size\"}} entries, found {}", quote_json(*doc)));
  std::string layers;
  for (std::size_t i = 0; i < doc->size(); ++i) {
    const nlohmann::json& entry = (*doc)[i];
    const bool well_formed = entry.is_object() && entry.size() == 2 && entry.contains("topology") &&
                             entry["topology"].is_string() && entry.contains("size") &&
                             entry["size"].is_number_integer() && entry["size"].get<long long>() >= 1 &&
                             entry["size"].get<long long>() <= kMaxCount;
    if (!well_formed)
      return bad(fmt::format("entry {} must be {{\"topology\": LABEL, \"size\": N >= 1}}, found {}", i, quote_json(entry)));
    const std::string tier = entry["topology"].get<std::string>();
    const int size = static_cast<int>(entry["size"].get<long long>());
    if (i == 0) {
      request.job.slice_tier = tier;
      request.job.slice_size = size;
    } else {
      layers += fmt::format("{}{}:{}", layers.empty() ? "" : ",", tier, size);
    }
  }
  request.job.slice_layers_text = layers;
  return {};
}

// The annotations by which each scheduler asks for a level the whole group stays in. A pod
// may speak for one scheduler only: two could disagree, and neither would be obeyed.
struct TierAnnotations {
  std::string_view scheduler;
  std::initializer_list<std::string_view> keys;
};
constexpr std::string_view kKaiRequired = "kai.scheduler/topology-required-placement";
constexpr std::string_view kKaiPreferred = "kai.scheduler/topology-preferred-placement";
constexpr std::string_view kVolcanoMode = "volcano.sh/network-topology-mode";
constexpr std::string_view kVolcanoHighestTier = "volcano.sh/network-topology-highest-tier";

Result<void> check_one_tier_source(const Pod& pod) {
  static const TierAnnotations kSources[] = {
      {"Kueue",
       {find_job_field("required_tier")->annotation, find_job_field("preferred_tier")->annotation,
        find_job_field("unconstrained")->annotation}},
      {"KAI-Scheduler", {kKaiRequired, kKaiPreferred}},
      {"Volcano", {kVolcanoMode, kVolcanoHighestTier}},
  };
  const TierAnnotations* first_source = nullptr;
  std::string_view first_key;
  for (const TierAnnotations& source : kSources) {
    for (std::string_view key : source.keys) {
      if (!find_meta(pod, key)) continue;
      if (first_source && first_source != &source)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("pod {}/{}: annotations {} ({}) and {} ({}) both ask for a topology level; "
                                      "keep one scheduler's",
                                      pod.namespace_name, pod.name, first_key, first_source->scheduler, key,
                                      source.scheduler));
      first_source = &source;
      first_key = key;
    }
  }
  return {};
}

// KAI-Scheduler's topology annotations (docs/topology/README.md; its pod-grouper copies them
// from the workload's top owner into the PodGroup's topologyConstraint, and a bare pod is its
// own top owner): node labels of the KAI Topology's levels, which `export --to kai` writes
// and normalize() resolves as it resolves Kueue's. With both, KAI packs inside the required
// domain toward the preferred level; toposched's placement keeps the required level only.
void read_kai_topology(const Pod& pod, JobRequest& job) {
  if (const std::string* required = find_meta(pod, kKaiRequired)) job.required_tier = *required;
  if (const std::string* preferred = find_meta(pod, kKaiPreferred)) job.preferred_tier = *preferred;
}

// Volcano's network-topology annotations (volcano-sh/apis pkg/apis/topology/v1alpha1/
// labels.go), which Volcano's podgroup controller turns into the PodGroup's networkTopology
// for pods it groups itself (pkg/controllers/podgroup/pg_controller_handler.go,
// parseNetworkTopologyFromPod). highest-tier is a HyperNode spec.tier, numbered as
// `export --to volcano` numbers them (volcano_tiers). hard: the group stays inside one
// HyperNode of that tier, as --required-tier; soft: as --preferred-tier (Volcano's soft mode
// prefers the lowest tier it can find). Without a tier Volcano sets no limit
// (JobInfo.IsHardTopologyMode needs highestTierAllowed), and neither does toposched; a tier
// above every level is the whole cluster.
Result<void> read_volcano_network_topology(const Pod& pod, const Cluster& cluster, JobRequest& job) {
  const std::string* mode_text = find_meta(pod, kVolcanoMode);
  const std::string* tier_text = find_meta(pod, kVolcanoHighestTier);
  auto bad = [&](std::string_view key, const std::string& value, std::string why) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("pod {}/{}: annotation {}='{}' {}", pod.namespace_name, pod.name, key, value, why));
  };
  bool soft = false;
  if (mode_text) {
    std::string mode = *mode_text;
    std::transform(mode.begin(), mode.end(), mode.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (mode != "hard" && mode != "soft") return bad(kVolcanoMode, *mode_text, "must be hard or soft");
    soft = mode == "soft";
  }
  if (!tier_text) return {};
  const std::vector<VolcanoTier> levels = volcano_tiers(cluster);
  std::string known;
  for (const VolcanoTier& level : levels)
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", level.tier, level.tier_name);
  const auto tier = parse_int(*tier_text);
  if (!tier || *tier < 1)
    return bad(kVolcanoHighestTier, *tier_text,
               fmt::format("must be a HyperNode tier, a whole number from 1; those of cluster '{}': {}",
                           cluster.name(), known.empty() ? "none" : known));
  if (levels.empty() || *tier > levels.back().tier) return {};
  const VolcanoTier& level = levels[static_cast<std::size_t>(*tier - 1)];  // tiers are 1, 2, ... in order
  if (!level.fabric_tier)
    return bad(kVolcanoHighestTier, *tier_text,
               fmt::format("is the {} level (one HyperNode per NVLink domain): toposched's tiers are the fabric "
                           "tiers and the node (policy topo keeps each job's groups inside NVLink domains by "
                           "itself); tiers of cluster '{}': {}",
                           level.tier_name, cluster.name(), known));
  (soft ? job.preferred_tier : job.required_tier) = level.tier_name;
  return {};
}

}  // namespace

Result<JobRequest> job_request_for(const Pod& pod, const Cluster& cluster, std::string job_id, int members,
                                   int gpus_per_pod) {
  PlaceRequest request;
  request.job.job_id = std::move(job_id);
  request.job.gpus = members * gpus_per_pod;
  // A single pod: all its GPUs on one node. A group: each member's GPUs on one node, and a
  // node may hold several members (two 4-GPU pods on an 8-GPU node keep their TP on NVLink).
  if (members > 1)
    request.job.gpus_per_pod = gpus_per_pod;
  else
    request.job.gpus_per_node = gpus_per_pod;
  // The schema's rows that have an annotation, with their bounds (the policy row is read
  // by pod_policy, whose fallback is the server's policy).
  for (const JobField& field : job_fields()) {
    if (field.annotation.empty() || field.key == "policy") continue;
    const std::string* value = find_meta(pod, field.annotation);
    if (!value) continue;
    if (auto ok = set_job_field_from_text(field, *value, request); !ok)
      return make_error(ErrorCode::kInvalidArgument, fmt::format("pod {}/{}: annotation {}='{}' {}", pod.namespace_name,
                                                                 pod.name, field.annotation, *value, ok.error().message));
  }
  TOPOSCHED_CHECK(read_slice_constraints(pod, request));
  TOPOSCHED_CHECK(check_one_tier_source(pod));
  read_kai_topology(pod, request.job);
  TOPOSCHED_CHECK(read_volcano_network_topology(pod, cluster, request.job));
  return request.job;
}

std::string pod_policy(const Pod& pod, const std::string& fallback) {
  const std::string* p = find_meta(pod, find_job_field("policy")->annotation);
  return p && !p->empty() ? *p : fallback;
}

}  // namespace toposched::k8s
