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

std::vector<GpuId> sorted(std::vector<GpuId> g) {
  std::sort(g.begin(), g.end(), [](GpuId a, GpuId b) { return a.index() < b.index(); });
  return g;
}

// What the service should hold for Slurm: owner -> GPUs (running jobs, GPUs Slurm has not
// configured), node -> mark reason (nodes Slurm cannot use), and the toposched ids of jobs
// Slurm still keeps pending.
struct Desired {
  std::map<std::string, std::vector<GpuId>> holds;
  std::map<std::string, std::string> marks;
  std::set<std::string> pending_toposched_jobs;
  std::set<std::string> ended_toposched_jobs;  // listed by Slurm as completed, cancelled, failed, ...
};

Result<Desired> desired_state(const Cluster& cluster, const SlurmLiveState& live) {
  // The mapping checks the jobs' GPUs (known nodes and indices, no GPU held twice) and
  // decides the node marks and the GPUs Slurm has not configured.
  TOPOSCHED_TRY(mapping, apply_live_state(cluster, live));
  Desired d;
  for (const SlurmJob& job : live.jobs) {
    std::string tag = toposched_job_of(job);
    if (!job.holds_resources()) {
      if (!tag.empty()) (job.state == "PENDING" ? d.pending_toposched_jobs : d.ended_toposched_jobs).insert(tag);
      continue;
    }
    TOPOSCHED_TRY(gpus, slurm_job_gpus(cluster, job));
    if (gpus.empty()) continue;
    d.holds[tag.empty() ? slurm_job_owner(job.id) : tag] = std::move(gpus);
  }
  for (const NodeAvailabilityChange& m : mapping.node_marks) d.marks[m.node] = m.reason;
  for (GpuId g : mapping.unconfigured_gpus)
    d.holds[unavailable_owner(cluster.node_name(cluster.gpu_node(g)))].push_back(g);
  return d;
}

// The marks to set (new or with another reason) and to lift, given the ones held.
void mark_actions(const Desired& desired, const std::vector<SlurmNodeMark>& marks, std::vector<SyncAction>& lifts,
                  std::vector<SyncAction>& sets) {
  std::map<std::string, std::string> held;
  for (const SlurmNodeMark& m : marks) held[m.node] = m.reason;
  for (const auto& [node, reason] : desired.marks) {
    auto it = held.find(node);
    if (it != held.end() && it->second == reason) continue;
    SyncAction a;
    a.kind = SyncAction::Kind::kMarkNode;
    a.node = node;
    a.reason = reason;
    sets.push_back(std::move(a));
  }
  for (const auto& [node, reason] : held) {
    if (desired.marks.contains(node)) continue;
    SyncAction a;
    a.kind = SyncAction::Kind::kUnmarkNode;
    a.node = node;
    a.reason = "Slurm can use the node again";
    lifts.push_back(std::move(a));
  }
}

}  // namespace

std::string toposched_job_of(const SlurmJob& job) {
  auto at = job.admin_comment.find(kTag);
  if (at == std::string::npos) return {};
  std::string rest = job.admin_comment.substr(at + kTag.size());
  return rest.substr(0, rest.find_first_of(" ,;"));
}

Result<std::vector<SyncAction>> reconcile(const Cluster& cluster, const SlurmLiveState& live,
                                          const std::vector<HeldJob>& held, const std::vector<SlurmNodeMark>& marks) {
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
    if (is_managed_id(job.id)) {
      releases.push_back({SyncAction::Kind::kRelease, job.id, {}, "the Slurm job ended"});
      continue;
    }
    if (desired.ended_toposched_jobs.contains(job.id) && !slurm_knows) {
      releases.push_back({SyncAction::Kind::kRelease, job.id, {}, "the Slurm job ended"});
      continue;
    }
    if (starts_with(job.id, "slurm-") && !slurm_knows) {
      releases.push_back({SyncAction::Kind::kRelease, job.id, {}, "Slurm lists no such job (ended)", true});
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
                       starts_with(owner, "slurm-unavailable:") ? "beyond the GPU count Slurm configured there"
                                                                : "Slurm runs this job on these GPUs"});
  std::vector<SyncAction> lifts, sets;
  mark_actions(desired, marks, lifts, sets);
  releases.insert(releases.end(), lifts.begin(), lifts.end());
  releases.insert(releases.end(), sets.begin(), sets.end());
  releases.insert(releases.end(), holds.begin(), holds.end());
  return releases;
}

}  // namespace toposched::slurm
