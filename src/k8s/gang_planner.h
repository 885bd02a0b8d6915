// GangPlanner: the kube-scheduler extender's decisions. On the first filter call of a pod
// group it plans the whole group (one placement request: members x GPUs per pod, each member
// on one node (several may share one), the parallel plan from the annotations) and holds the GPUs in the ledger under
// the job id "k8s:<namespace>:<group>" ("k8s:<namespace>:pod:<name>" for a pod without a
// group); every member's filter then answers exactly its planned node, so kube-scheduler
// skips scoring and binds it there. Reservations hold from filter time (kube-scheduler binds
// asynchronously: the next pod's filter can come before the previous pod's bind) and expire
// `reservation_timeout_ms` after planning unless every member has been bound; expired
// reservations are released. A group that cannot fit whole gets no node at all.
//
// Members are placed in rank order: slot i is the node holding the i-th block of GPU ranks
// (ranks i*g .. i*g+g-1 for g GPUs per pod); a pod takes the slot of its rank (pod_rank)
// when that slot is free and its node offered, else the first free slot on an offered node,
// else the first free slot; a pod keeps its slot across retries.
//
// Preemption for a group (kube-scheduler preempts for one pod at a time, on one node each):
// the first member's `preempt` finds the victims that free a whole placement and answers
// only the node meant for that member; each later member's answer is another node of the
// same placement, so a group of n needing n freed nodes evicts on n nodes, not more. While
// the group is not planned, kube-scheduler keeps a node nominated for one member
// (status.nominatedNodeName) out of its siblings' offers (a nominated pod of equal priority
// counts as running there); the plan therefore treats the nodes nominated for, or
// preempted for, the pod's siblings as offered. Those records expire with the reservation
// timeout and are dropped when the group is planned.
//
// Answers (docs/kubernetes.md): pods without GPUs pass through (every offered node); nodes
// not in the cluster model go to FailedAndUnresolvableNodes; malformed pods (bad quantities
// or annotations) and requests without Pod or nodes get the `Error` field.
//
// Time comes from an injectable clock (milliseconds); the planner never sleeps.
// Thread-safe: one mutex serialises every verb (decisions are serialised, as kube-scheduler
// itself calls the extender one pod at a time); the Binding is posted outside it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "k8s/extender_types.h"
#include "k8s/gpu_ledger.h"
#include "topology/mutex.h"

namespace toposched::k8s {

using Clock = std::function<std::int64_t()>;  // milliseconds, monotonic
Clock steady_clock_ms();

struct PlannerOptions {
  std::string policy = "topo";
  std::int64_t reservation_timeout_ms = 300'000;  // coscheduling's scheduleTimeoutSeconds default
};

// What bind posts to the API server: pods/{name}/binding with these annotations.
struct BindingPlan {
  std::string pod_name, pod_namespace, pod_uid, node;
  std::string job_id;
  std::map<std::string, std::string> annotations;  // toposched.io/gpus, ranks, job
};

struct MemberView {
  std::string node;
  std::vector<int> gpus;   // local indices, rank order
  std::vector<int> ranks;  // global ranks of those GPUs
  std::string pod;         // namespace/name of the pod holding the slot, empty if none yet
  bool bound = false;
};

// A pod's place in its planned group, for the plugin build's Permit (kube/scheduler).
struct MemberStatus {
  std::string job_id;
  int size = 0;    // members the group needs
  int bound = 0;   // members bound so far
  int slot = 0;    // this pod's slot (its rank block)
  std::string node;
  std::vector<int> gpus;  // the slot's local GPU indices on `node`, rank order (DRA pins these)
};

struct GroupView {
  std::string job_id;
  int size = 0;
  int gpus_per_pod = 0;
  std::int64_t deadline_ms = 0;
  std::vector<MemberView> members;  // slot order = rank order
};

class GangPlanner {
 public:
  GangPlanner(GpuLedger& ledger, Clock clock, PlannerOptions options = {});

  ExtenderFilterResult filter(const ExtenderArgs& args);
  HostPriorityList prioritize(const ExtenderArgs& args);
  ExtenderPreemptionResult preempt(const ExtenderPreemptionArgs& args);
  // Checks the bind against the plan and returns what to post; kInvalidArgument when the
  // pod is unknown or the node is not its planned node.
  Result<BindingPlan> prepare_bind(const ExtenderBindingArgs& args);
  // Records the outcome of posting the Binding (success marks the member bound).
  void finish_bind(const BindingPlan& plan, bool posted);
  // The plugin build's placement generator: where the pod's whole group would be placed
  // within the offered nodes (args.NodeNames or args.Nodes), as the `place` JSON of an engine
  // dry run (EngineLedger::dry_run). The request is the one filter plans with (job_request_for:
  // every annotation serve reads), so a candidate is judged on the plan filter would make.
  // Holds nothing, changes no group. kInvalidArgument for a pod without GPUs or with bad
  // annotations; kInfeasible when the group does not fit there.
  Result<std::string> dry_run(const ExtenderArgs& args) const;
  // The group the pod holds a slot in; kNotFound when it holds none (no GPUs, never filtered,
  // or its reservation expired).
  Result<MemberStatus> member_of(const ExtenderBindingArgs& pod);
  // The plugin build's Unreserve: the pod's reservation did not complete (rejected at Permit,
  // timed out there, or its bind failed). When no member of its group is bound, the whole
  // group's GPUs are released (kube-scheduler rejects the waiting siblings too, and the next
  // attempt plans again on the cluster as it is then); otherwise only the pod's claim on its
  // slot is dropped and the slot's GPUs stay held for its retry. Returns the released job id,
  // or empty.
  std::string unreserve(const ExtenderBindingArgs& pod);
  // Releases reservations past their deadline; returns the released job ids.
  std::vector<std::string> expire();
  // Forgets a job (after its release through the service API).
  void forget(std::string_view job_id);

  std::vector<GroupView> groups() const;
  const PlannerOptions& options() const { return options_; }

 private:
  struct Member {
    NodeId node;
    std::vector<int> gpus, ranks;
    std::string pod_key;  // uid, or namespace/name
    std::string pod_name;
    bool bound = false;
  };
  struct Group {
    std::string job_id;
    int size = 0;
    int gpus_per_pod = 0;
    std::int64_t deadline_ms = 0;
    std::vector<Member> members;
    int bound_count() const {
      return static_cast<int>(std::count_if(members.begin(), members.end(), [](const Member& m) { return m.bound; }));
    }
  };
  // A group not planned yet for whose members kube-scheduler has preempted or nominated nodes.
  struct PendingGroup {
    std::vector<NodeId> victim_nodes;                   // the whole placement's nodes with victims
    std::map<std::string, NodeId> nominated;            // pod key -> node (preempt's answer, then the pod's status)
    std::map<std::string, std::vector<std::string>> victim_jobs;  // pod key -> jobs preempted for it
    std::int64_t deadline_ms = 0;
  };
  struct Offer;

  std::vector<std::string> expire_locked(std::int64_t now) REQUIRES(mu_);
  ExtenderFilterResult filter_locked(const ExtenderArgs& args) REQUIRES(mu_);
  Result<Group*> plan_group(const Pod& pod, const std::string& job_id, int size, int gpus, const NodeMask& usable)
      REQUIRES(mu_);
  int take_slot(Group& g, const Pod& pod, const std::string& pod_key, const NodeMask& offered) REQUIRES(mu_);
  void note_nomination(const std::string& job_id, const std::string& pod_key, const Pod& pod) REQUIRES(mu_);
  // The nodes preempted for, or nominated for, the other members of a group not yet planned.
  std::set<NodeId> sibling_nodes(const std::string& job_id, const std::string& pod_key) const REQUIRES(mu_);
  NodeMask offer_with_siblings(const std::string& job_id, const std::string& pod_key, NodeMask offered) const
      REQUIRES(mu_);
  // The jobs of the victims that hold a slot here (victims this planner did not place have none).
  std::vector<std::string> jobs_of_victims(const MetaVictims& victims) const REQUIRES(mu_);

  GpuLedger& ledger_;
  Clock clock_;
  PlannerOptions options_;
  mutable Mutex mu_;
  std::map<std::string, Group> groups_ GUARDED_BY(mu_);  // by job id
  std::unordered_map<std::string, std::pair<std::string, int>> slot_of_pod_ GUARDED_BY(mu_);  // pod key -> (job, slot)
  std::map<std::string, PendingGroup> pending_ GUARDED_BY(mu_);  // by job id
};

// Job id of the pod's job: "k8s:<ns>:<group>" or "k8s:<ns>:pod:<name>".
std::string job_id_for(const Pod& pod, const std::optional<struct GangInfo>& gang);
// The key the planner knows a pod by: its uid, or namespace/name when it has none.
std::string pod_key(const Pod& pod);

}  // namespace toposched::k8s
