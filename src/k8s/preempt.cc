// GangPlanner::preempt: which of the victims kube-scheduler proposes would free a whole
// placement for the preemptor's group, at least cost.
//
// Greedy: candidate nodes in order of cost (PodDisruptionBudget violations, then number of
// victims, then the victims' summed priority), the nodes of the group's earlier answers
// first; the victims' jobs are added one node at a time to the jobs an engine dry run
// assumes released (with what kube-scheduler already preempts for the pod's siblings) until
// the group's request fits. kube-scheduler preempts for one pod on one node per attempt, so
// the answer is one node: the first node of the found placement with victims that is not
// already meant for a sibling, with its victims. Victims whose GPUs toposched does not know
// (pods it did not place) free nothing in its model. When no prefix frees a whole
// placement, or the placement needs no victims for this member, the answer is empty (null):
// kube-scheduler preempts nothing.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "k8s/gang_planner.h"
#include "k8s/pod_request.h"

namespace toposched::k8s {

namespace {

struct Candidate {
  std::string node;
  NodeId id;
  MetaVictims victims;
  std::int64_t priority_sum = 0;
};

std::vector<Candidate> candidates_of(const ExtenderPreemptionArgs& args, const Cluster& c) {
  std::vector<Candidate> out;
  if (args.node_name_to_meta_victims) {
    for (const auto& [node, mv] : *args.node_name_to_meta_victims)
      if (auto id = c.find_node(node)) out.push_back({node, *id, mv, 0});
  } else if (args.node_name_to_victims) {
    for (const auto& [node, vs] : *args.node_name_to_victims) {
      auto id = c.find_node(node);
      if (!id) continue;
      Candidate cand{node, *id, {{}, vs.num_pdb_violations}, 0};
      for (const Pod& p : vs.pods) {
        cand.victims.pods.push_back(
            MetaPod{p.uid.empty() ? fmt::format("{}/{}", p.namespace_name, p.name) : p.uid});
        cand.priority_sum += p.priority.value_or(0);
      }
      out.push_back(std::move(cand));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.victims.num_pdb_violations != b.victims.num_pdb_violations)
      return a.victims.num_pdb_violations < b.victims.num_pdb_violations;
    if (a.victims.pods.size() != b.victims.pods.size()) return a.victims.pods.size() < b.victims.pods.size();
    return a.priority_sum < b.priority_sum;
  });
  return out;
}

}  // namespace

std::vector<std::string> GangPlanner::jobs_of_victims(const MetaVictims& victims) const {
  std::vector<std::string> jobs;
  for (const MetaPod& victim : victims.pods)
    if (auto it = slot_of_pod_.find(victim.uid); it != slot_of_pod_.end()) jobs.push_back(it->second.first);
  return jobs;
}

ExtenderPreemptionResult GangPlanner::preempt(const ExtenderPreemptionArgs& args) {
  MutexLock lock(mu_);
  expire_locked(clock_());
  ExtenderPreemptionResult none;
  if (!args.pod) return none;
  const Pod& pod = *args.pod;
  auto gpus = pod_gpu_count(pod);
  auto gang = pod_gang(pod);
  if (!gpus || *gpus == 0 || !gang) return none;
  const std::string job_id = job_id_for(pod, *gang);
  if (groups_.contains(job_id)) return none;  // already planned: its members need no victims
  const Cluster& c = ledger_.cluster();
  auto request = job_request_for(pod, c, job_id, *gang ? (*gang)->size : 1, *gpus);
  if (!request) return none;
  const std::string policy = pod_policy(pod, options_.policy);
  const std::string key = pod_key(pod);
  note_nomination(job_id, key, pod);
  const PendingGroup* pending = nullptr;
  if (auto it = pending_.find(job_id); it != pending_.end()) pending = &it->second;

  // The jobs the what-if releases (a dry run of the engine: nothing changes for real).
  std::set<std::string> released;
  auto release = [&](const std::string& job) { return ledger_.holds(job) && released.insert(job).second; };
  // What kube-scheduler already preempts for the siblings is going: free in the what-if.
  if (pending)
    for (const auto& [sibling, jobs] : pending->victim_jobs)
      if (sibling != key)
        for (const std::string& j : jobs) release(j);
  const std::set<NodeId> siblings = sibling_nodes(job_id, key);
  std::vector<Candidate> cands = candidates_of(args, c);
  if (pending) {  // the group's earlier placement first, so every member's answer belongs to it
    const auto& earlier = pending->victim_nodes;
    std::stable_partition(cands.begin(), cands.end(), [&](const Candidate& cand) {
      return std::find(earlier.begin(), earlier.end(), cand.id) != earlier.end();
    });
  }
  for (std::size_t k = 0; k < cands.size(); ++k) {
    bool freed = false;
    for (const std::string& j : jobs_of_victims(cands[k].victims)) freed = release(j) || freed;
    if (!freed) continue;
    auto p = ledger_.what_if(*request, policy, {released.begin(), released.end()});
    if (!p) continue;
    std::set<NodeId> used;
    for (GpuId g : p->gpus_by_rank) used.insert(c.gpu_node(g));
    // This pod's node: the first of the placement's nodes with victims that is not a
    // sibling's (kube-scheduler preempts on one node per attempt).
    std::vector<NodeId> victim_nodes;
    const Candidate* mine = nullptr;
    for (std::size_t j = 0; j <= k; ++j) {
      if (!used.contains(cands[j].id) || cands[j].victims.pods.empty()) continue;
      victim_nodes.push_back(cands[j].id);
      if (!mine && !siblings.contains(cands[j].id)) mine = &cands[j];
    }
    if (!mine) return none;  // the placement needs no more victims for this member
    PendingGroup& record = pending_[job_id];
    record.victim_nodes = std::move(victim_nodes);
    record.nominated[key] = mine->id;
    record.victim_jobs[key] = jobs_of_victims(mine->victims);
    record.deadline_ms = clock_() + options_.reservation_timeout_ms;
    ExtenderPreemptionResult out;
    out.node_name_to_meta_victims.emplace();
    (*out.node_name_to_meta_victims)[mine->node] = mine->victims;
    return out;
  }
  return none;
}

}  // namespace toposched::k8s
