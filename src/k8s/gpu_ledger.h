// GpuLedger: what the extender needs from the engine that owns the cluster's GPUs: place and
// hold a job atomically, release it, and copy the current allocation for what-if questions.
// EngineLedger is the one implementation: every reservation and release is a decision of the
// placement Engine (Command kPlace / kRelease) handed to a submit function, which in `serve`
// is the Scheduler's (committed to the store, so `POST /v1/jobs` and the extender share one
// set of GPUs) and in tests and benchmarks the engine's own decide with nothing to commit:
// the same code as served, without a store.
//
// Placements honour the node mask (placement/place_within.h): kube-scheduler offers only the
// nodes that passed its own filters. The extender reads only the GPUs, so reservations are
// decided without the description (PlaceDetail::kGpusOnly).
//
// Thread-safe: the engine serialises decisions and reads take its shared lock.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "placement/allocation_state.h"
#include "placement/engine.h"
#include "placement/place_within.h"

namespace toposched::k8s {

class GpuLedger {
 public:
  virtual ~GpuLedger() = default;
  virtual const Cluster& cluster() const = 0;
  // Places `request` (not normalized: the engine normalizes; job id set) with `policy` on the allowed nodes (empty mask:
  // every node) and holds its GPUs under the request's job id, or changes nothing.
  // Errors: kInfeasible (does not fit), kConflict (job id in use), kInvalidArgument.
  virtual Result<Placement> reserve(const JobRequest& request, std::string_view policy, const NodeMask& allowed) = 0;
  // Where `request` would be placed if the `released` jobs held no GPUs (preemption's
  // what-if): an engine dry run, nothing held or changed. Errors as reserve().
  virtual Result<Placement> what_if(const JobRequest& request, std::string_view policy,
                                    std::vector<std::string> released) const = 0;
  // Where `request` would be placed now on the allowed nodes, described in full: the `place`
  // JSON that POST /v1/jobs?dry_run=1 answers (GPUs, nodes, predicted_comm_us). An engine dry
  // run, nothing held or changed (the plugin build's placement generator ranks candidate node
  // sets by it). Errors as reserve().
  virtual Result<std::string> dry_run(const JobRequest& request, std::string_view policy,
                                      const NodeMask& allowed) const = 0;
  // Frees the job's GPUs; kNotFound when it holds none.
  virtual Result<void> release(std::string_view job_id) = 0;
  virtual AllocationState snapshot() const = 0;
  // True while the job holds GPUs (a job released through the service API no longer does).
  virtual bool holds(std::string_view job_id) const = 0;
};

class EngineLedger final : public GpuLedger {
 public:
  using Submit = std::function<Result<Decision>(Command)>;
  // Over an engine someone else owns; `submit` decides (and commits) a command on it.
  EngineLedger(const Engine& engine, Submit submit);
  // An engine of its own, on an empty allocation state, committing nothing (tests, benchmarks).
  explicit EngineLedger(const Cluster& cluster);

  const Cluster& cluster() const override { return engine_->cluster(); }
  Result<Placement> reserve(const JobRequest& request, std::string_view policy, const NodeMask& allowed) override;
  Result<Placement> what_if(const JobRequest& request, std::string_view policy,
                            std::vector<std::string> released) const override;
  Result<std::string> dry_run(const JobRequest& request, std::string_view policy,
                              const NodeMask& allowed) const override;
  Result<void> release(std::string_view job_id) override;
  AllocationState snapshot() const override;
  bool holds(std::string_view job_id) const override;

 private:
  std::unique_ptr<Engine> own_;  // set by the Cluster constructor only
  const Engine* engine_;
  Submit submit_;
};

}  // namespace toposched::k8s
