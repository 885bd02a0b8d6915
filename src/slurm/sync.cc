#include "slurm/sync.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace toposched::slurm {

namespace {

constexpr std::string_view kTag = "toposched-job=";

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool is_managed_id(std::string_view id) {
  return starts_with(id, "slurm-job:") || starts_with(id, "slurm-unavailable:");
}

// Slurm's GPUs of a job, node by node in allocation order.
Result<std::vector<GpuId>> job_gpus(const Cluster& cluster, const SlurmJob& job) {
  std::vector<GpuId> gpus;
  for (const SlurmJobNode& jn : job.nodes) {
    auto n = cluster.find_node(jn.node);
    if (!n) {
      if (jn.gpu_indices.empty()) continue;
      return make_error(ErrorCode::kValidation,
                        fmt::format("Slurm job {} holds GPUs on node '{}', which the cluster spec does not know",
                                    job.id, jn.node));
    }
    for (int idx : jn.gpu_indices) {
      if (idx >= cluster.node_gpu_count(*n))
        return make_error(ErrorCode::kValidation,
                          fmt::format("Slurm job {} holds GPU index {} on node '{}', which has {} GPUs", job.id, idx,
                                      jn.node, cluster.node_gpu_count(*n)));
      gpus.push_back(cluster.node_gpu(*n, idx));
    }
  }
  return gpus;
}

std::vector<GpuId> sorted(std::vector<GpuId> g) {
  std::sort(g.begin(), g.end(), [](GpuId a, GpuId b) { return a.index() < b.index(); });
  return g;
}

// What the service should hold for Slurm: owner -> GPUs (running jobs and unusable nodes),
// and the toposched ids of jobs Slurm still keeps pending.
struct Desired {
  std::map<std::string, std::vector<GpuId>> holds;
  std::set<std::string> pending_toposched_jobs;
};

Result<Desired> desired_state(const Cluster& cluster, const SlurmLiveState& live) {
  Desired d;
  std::set<std::size_t> taken;
  for (const SlurmJob& job : live.jobs) {
    std::string tag = toposched_job_of(job);
    if (!job.holds_resources()) {
      if (!tag.empty() && job.state == "PENDING") d.pending_toposched_jobs.insert(tag);
      continue;
    }
    TOPOSCHED_TRY(gpus, job_gpus(cluster, job));
    if (gpus.empty()) continue;
    for (GpuId g : gpus)
      if (!taken.insert(g.index()).second)
        return make_error(ErrorCode::kValidation,
                          fmt::format("Slurm reports GPU {}:{} held by two jobs (one is {})",
                                      cluster.node_name(cluster.gpu_node(g)), cluster.gpu_local_index(g), job.id));
    d.holds[tag.empty() ? slurm_job_owner(job.id) : tag] = std::move(gpus);
  }
  std::unordered_map<std::string, const SlurmNode*> by_name;
  for (const SlurmNode& n : live.nodes) by_name.emplace(n.name, &n);
  for (std::uint32_t i = 0; i < cluster.node_count(); ++i) {
    NodeId n(i);
    auto it = by_name.find(cluster.node_name(n));
    int usable_gpus = it == by_name.end() || !it->second->usable() ? 0 : it->second->gpus;
    std::vector<GpuId> blocked;
    for (int k = usable_gpus; k < cluster.node_gpu_count(n); ++k)
      if (!taken.contains(cluster.node_gpu(n, k).index())) blocked.push_back(cluster.node_gpu(n, k));
    if (!blocked.empty()) d.holds[unavailable_owner(cluster.node_name(n))] = std::move(blocked);
  }
  return d;
}

}  // namespace

std::string toposched_job_of(const SlurmJob& job) {
  auto at = job.admin_comment.find(kTag);
  if (at == std::string::npos) return {};
  std::string rest = job.admin_comment.substr(at + kTag.size());
  return rest.substr(0, rest.find_first_of(" ,;"));
}

Result<std::vector<SyncAction>> reconcile(const Cluster& cluster, const SlurmLiveState& live,
                                          const std::vector<HeldJob>& held) {
  TOPOSCHED_TRY(desired, desired_state(cluster, live));
  std::vector<SyncAction> releases, holds;
  std::map<std::size_t, std::string> desired_owner;  // GPU -> owner Slurm says
  for (const auto& [owner, gpus] : desired.holds)
    for (GpuId g : gpus) desired_owner[g.index()] = owner;
  std::set<std::string> kept;
  for (const HeldJob& job : held) {
    auto want = desired.holds.find(job.id);
    bool slurm_knows = want != desired.holds.end() || desired.pending_toposched_jobs.contains(job.id);
    if (want != desired.holds.end()) {
      if (sorted(want->second) == sorted(job.gpus)) {
        kept.insert(job.id);
      } else {
        releases.push_back({SyncAction::Kind::kRelease, job.id, {}, "Slurm runs it on other GPUs"});
      }
      continue;
    }
    if (is_managed_id(job.id) || (starts_with(job.id, "slurm-") && !slurm_knows)) {
      releases.push_back({SyncAction::Kind::kRelease, job.id, {}, "the Slurm job ended"});
      continue;
    }
    auto clash = std::find_if(job.gpus.begin(), job.gpus.end(), [&](GpuId g) { return desired_owner.contains(g.index()); });
    if (clash != job.gpus.end()) {
      releases.push_back({SyncAction::Kind::kRelease, job.id, {},
                          fmt::format("Slurm gave GPU {}:{} to {}", cluster.node_name(cluster.gpu_node(*clash)),
                                      cluster.gpu_local_index(*clash), desired_owner[clash->index()])});
    }
  }
  for (const auto& [owner, gpus] : desired.holds)
    if (!kept.contains(owner))
      holds.push_back({SyncAction::Kind::kHold, owner, gpus,
                       starts_with(owner, "slurm-unavailable:") ? "Slurm cannot use these GPUs now"
                                                                : "Slurm runs this job on these GPUs"});
  releases.insert(releases.end(), holds.begin(), holds.end());
  return releases;
}

}  // namespace toposched::slurm
