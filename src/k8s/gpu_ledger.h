// GpuLedger: what the extender needs from the engine that owns the cluster's GPUs: place and
// hold a job atomically, release it, and copy the current allocation for what-if questions.
// The service implements it over its engine state (so `POST /v1/jobs` and the extender share
// one set of GPUs); LocalLedger is an in-memory one for tests and benchmarks.
//
// Placements honour the node mask (placement/place_within.h): kube-scheduler offers only the
// nodes that passed its own filters.
//
// Implementations are thread-safe (LocalLedger: one mutex around its state).
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include "placement/allocation_state.h"
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
  // Frees the job's GPUs; kNotFound when it holds none.
  virtual Result<void> release(std::string_view job_id) = 0;
  virtual AllocationState snapshot() const = 0;
  // True while the job holds GPUs (a job released through the service API no longer does).
  virtual bool holds(std::string_view job_id) const = 0;
};

class LocalLedger final : public GpuLedger {
 public:
  explicit LocalLedger(const Cluster& cluster) : state_(cluster) {}
  const Cluster& cluster() const override { return state_.cluster(); }
  Result<Placement> reserve(const JobRequest& request, std::string_view policy, const NodeMask& allowed) override;
  Result<void> release(std::string_view job_id) override;
  AllocationState snapshot() const override;
  bool holds(std::string_view job_id) const override;

 private:
  mutable std::mutex mu_;
  AllocationState state_;  // guarded by mu_
};

}  // namespace toposched::k8s
