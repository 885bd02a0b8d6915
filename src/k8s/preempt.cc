// GangPlanner::preempt: which of the victims kube-scheduler proposes would free a whole
// placement for the preemptor's group, at least cost.
//
// Greedy: candidate nodes in order of cost (PodDisruptionBudget violations, then number of
// victims, then the victims' summed priority); the victims' jobs are released one node at a
// time on a copy of the allocation until the group's request fits; the answer lists the
// victims of the nodes, among those released, that the found placement uses. Victims whose
// GPUs toposched does not know (pods it did not place) free nothing in its model. When no
// prefix frees a whole placement, the answer is empty (null): kube-scheduler preempts nothing.
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

ExtenderPreemptionResult GangPlanner::preempt(const ExtenderPreemptionArgs& args) {
  std::lock_guard lock(mu_);
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
  auto request = job_request_for(pod, job_id, *gang ? (*gang)->size : 1, *gpus);
  if (!request) return none;
  auto norm = normalize(*request, c);
  auto policy = find_policy(pod_policy(pod, options_.policy));
  if (!norm || !policy) return none;

  AllocationState what_if = ledger_.snapshot();
  std::set<std::string> released;
  std::vector<Candidate> cands = candidates_of(args, c);
  for (std::size_t k = 0; k < cands.size(); ++k) {
    bool freed = false;
    for (const MetaPod& victim : cands[k].victims.pods) {
      auto it = slot_of_pod_.find(victim.uid);
      if (it == slot_of_pod_.end() || !released.insert(it->second.first).second) continue;
      freed = what_if.release(it->second.first).has_value() || freed;
    }
    if (!freed) continue;
    auto p = place(what_if, *norm, **policy);
    if (!p) continue;
    std::set<NodeId> used;
    for (GpuId g : p->gpus_by_rank) used.insert(c.gpu_node(g));
    ExtenderPreemptionResult out;
    out.node_name_to_meta_victims.emplace();
    for (std::size_t j = 0; j <= k; ++j)
      if (used.contains(cands[j].id) && !cands[j].victims.pods.empty())
        (*out.node_name_to_meta_victims)[cands[j].node] = cands[j].victims;
    if (out.node_name_to_meta_victims->empty()) return none;
    return out;
  }
  return none;
}

}  // namespace toposched::k8s
