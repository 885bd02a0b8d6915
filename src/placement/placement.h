// Placement: the answer to "which GPUs, and which rank on which GPU" for one JobRequest,
// and the policy interface and registry that produce it.
//
// A policy returns the job's GPUs in rank order (rank r = gpus_by_rank[r]); place() checks
// the result against the request (check_placement: count, free, distinct, model, exclusive
// nodes, GPUs per node, each pod on one node, required tier, leaf-switch limit) and derives everything else:
// hostlist, CUDA_VISIBLE_DEVICES per node, the levels the job spans, the predicted
// communication time (from the cost model, when it can estimate the request: predict_comm)
// and an explanation.
// Infeasible requests are kInfeasible errors whose message says why.
//
// Policies are stateless singletons: select() is const and may be called from several
// threads at once on distinct states. place() does not modify the state; the caller
// allocates (AllocationState::allocate) when it accepts the placement.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "placement/allocation_state.h"
#include "placement/job_request.h"
#include "topology/registry.h"

namespace toposched {

// Nodes a policy may use (true = allowed); an empty mask allows every node.
using NodeMask = std::vector<char>;

struct Placement {
  std::string job_id;
  std::string policy;
  std::vector<GpuId> gpus_by_rank;
  std::string nodes_hostlist;                                             // nodes in first-rank order, compressed
  std::vector<std::pair<std::string, std::string>> cuda_visible_devices;  // node -> "0,1,2,3"
  // Path levels between GPUs of the job, closest first ("nvlink", "tier:leaf", ...).
  std::vector<std::string> levels_spanned;
  std::vector<std::string> tiers_spanned;  // fabric tiers crossed (subset of levels_spanned)
  int node_count = 0;
  int leaf_switch_count = 0;
  int tp_groups_split = 0;                  // TP groups whose GPUs are not all on one node / NVLink domain
  int max_stage_leaves = 0;                 // largest number of leaf switches one PP stage touches
  std::optional<double> predicted_comm_us;  // per training step; absent when predict_comm has none
  std::optional<double> ideal_comm_us;
  std::optional<double> slowdown;
  std::string explanation;
};

// What a policy can tell from counts about one request on the states that differ from a
// base state only by GPUs freed (the simulator's reservation probes: the live state with
// some running jobs ended), kept as GPUs are freed and taken back, without building those
// states. Its answers are exact: kFails only when choose_gpus() of the request fails
// (kInfeasible) on such a state, kFits only when it succeeds (which GPUs it would choose is
// not known: ask the policy for those). Requires the base state to outlive it unchanged;
// not thread-safe (one user at a time).
class FreedStateCheck {
 public:
  enum class Answer { kNotKnown, kFails, kFits };
  virtual ~FreedStateCheck() = default;
  // GPUs allocated in the base state become free (each at most once while freed).
  virtual void free_gpus(std::span<const GpuId> gpus) = 0;
  // GPUs freed by free_gpus are allocated again.
  virtual void unfree_gpus(std::span<const GpuId> gpus) = 0;
  // Whether the request can be placed with the freed GPUs free, where the counts tell.
  virtual Answer answer() = 0;
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  // GPUs in rank order, or a kInfeasible error saying why. `allowed` restricts the nodes.
  virtual Result<std::vector<GpuId>> select(const AllocationState& state, const JobRequest& request,
                                            const NodeMask& allowed) const = 0;
  // True when the policy honours required/preferred tiers itself; otherwise place() runs it
  // once per switch of the required tier.
  virtual bool handles_tier_constraints() const { return false; }
  virtual bool supports_segments() const { return false; }
  // True when the policy places Kueue PodSet slices (JobRequest::slice_size / slice_tier).
  virtual bool supports_slices() const { return false; }
  // True when any request without per-node or tier constraints fits as soon as enough
  // eligible GPUs are free, wherever they are: counting free GPUs then predicts exactly
  // when a job can start (the simulator's backfill uses this to skip placement probes).
  virtual bool fits_any_free_gpus() const { return false; }
  // True when the choice depends on JobRequest::seed (a draw, not a model of a scheduler):
  // two sizes of one job are then unrelated draws, so a curve across sizes means nothing.
  virtual bool randomized() const { return false; }
  // Optional: a FreedStateCheck for the normalized request `r` on `base` (nullptr when the
  // policy has none, or none for this request).
  virtual std::unique_ptr<FreedStateCheck> freed_state_check(const AllocationState& base, const JobRequest& r) const {
    (void)base;
    (void)r;
    return nullptr;
  }
};

// Every policy, in a stable order.
const std::vector<const PlacementPolicy*>& placement_policies();
// Variants of those with a peer's non-default setting (kueue-balanced: Kueue with
// TASBalancedPlacement on): found by name, left out of "every policy" (simulate, scale).
const std::vector<const PlacementPolicy*>& policy_variants();
// Both lists by name (descriptions: the policies' summaries).
const Registry<const PlacementPolicy*>& policy_registry();
// The registry's kInvalidArgument listing the known names when `name` is unknown.
Result<const PlacementPolicy*> find_policy(std::string_view name);

// How much of a Placement place() fills in: everything (the `place` JSON's fields, the
// predicted communication and the explanation), or only job, policy and GPUs (the
// simulator, which places thousands of jobs and wants the same decision, not its story).
enum class PlaceDetail { kFull, kGpusOnly };

// Chooses GPUs for `request` (normalized or not) without changing `state`: choose_gpus(),
// then the description.
Result<Placement> place(const AllocationState& state, const JobRequest& request, const PlacementPolicy& policy,
                        PlaceDetail detail = PlaceDetail::kFull);

// The decision itself, on a normalized request: the policy's support for segments and
// slices, enough free GPUs, the required/preferred tier (one switch of that tier at a time
// unless the policy handles tiers), the policy's select(), then check_placement().
Result<std::vector<GpuId>> choose_gpus(const AllocationState& state, const JobRequest& request,
                                       const PlacementPolicy& policy);

// Checks that `gpus` satisfy the (normalized) request on `state`: the constraints every
// policy must honour. Used by place() and by the tests.
Result<void> check_placement(const AllocationState& state, const JobRequest& request, std::span<const GpuId> gpus);

// Predicted communication of a placement: (step_comm_us, ideal_step_comm_us); nullopt when
// the cost model cannot estimate it: no GPUs, a parallel plan whose product is not the GPU
// count (inference replicas that do not divide it), an unknown model class, or an estimate
// error. Implemented in comm_estimate.cc.
struct CommPrediction {
  double step_comm_us = 0;
  double ideal_step_comm_us = 0;
  double step_compute_us = 0;  // the step's compute on the first rank's GPU model (0: not known)
};
std::optional<CommPrediction> predict_comm(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                           const JobRequest& request);
// The same on the state's cluster, with the ideal side of the estimate cached per thread for
// the state's cluster_key() (the ideal depends on the cluster, the first GPU's node type,
// the plan and the workload class only): identical results, without recomputing the ideal
// placement's estimate on every call. Thread-safe (one cache per thread).
std::optional<CommPrediction> predict_comm(const AllocationState& state, std::span<const GpuId> gpus_by_rank,
                                           const JobRequest& request);

}  // namespace toposched
