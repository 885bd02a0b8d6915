// AllocationLedger: an allocation state that changes only by applying Mutation records
// (placement/mutation.h), for a caller that decides and changes its own state at simulation
// speed: the simulator's placer (sim/placement_backend.cc), its reservation probe state and
// its look-ahead hold. It is the engine's apply without what a service needs on top (the
// answers readers get, node marks, a lock, the inverse list of a batch): a failed apply
// changes nothing, because AllocationState's allocate and release are all or nothing
// themselves, so a single mutation needs no undo.
//
// Deciding reads the state: decide() is place_job without holding (the CLI's and the
// service's decision, placement/engine.h); place() decides and applies the kPlace
// mutation of the decision. The shorthands hold(), release_job() build that same record (in
// a kept mutation, so the simulator's hot loop allocates no strings once warm) and apply it.
//
// Invariants: the state is always consistent (AllocationState::check_invariants); every
// change since construction or the last copy_from() was one apply(). Not thread-safe
// (one owner); const queries from several threads are fine while nobody applies.
#pragma once

#include <span>
#include <string_view>

#include "placement/allocation_state.h"
#include "placement/job_request.h"
#include "placement/job_schema.h"
#include "placement/mutation.h"
#include "placement/placement.h"
#include "topology/error.h"

namespace toposched {

class AllocationLedger {
 public:
  explicit AllocationLedger(const Cluster& cluster) : state_(cluster) {}

  const AllocationState& state() const { return state_; }
  const Cluster& cluster() const { return state_.cluster(); }

  // kPlace: allocates m.gpus_by_rank to m.job_id at position m.order (0: after every job);
  // kRelease: frees m.job_id's GPUs. Errors as AllocationState::allocate / release (a GPU
  // already held, an unknown job), the state unchanged; node marks are kInvalidArgument
  // (a ledger keeps no node availability: Engine does).
  Result<void> apply(const Mutation& m);
  // apply() of {kPlace, job_id, gpus} and of {kRelease, job_id}.
  Result<void> hold(std::string_view job_id, std::span<const GpuId> gpus);
  Result<void> release_job(std::string_view job_id);

  // place_job's decision on this state, nothing held (placement/engine.h: the same errors).
  Result<Placement> decide(const PlaceRequest& request, PlaceDetail detail) const;
  // decide(), then apply() of the decision's kPlace mutation.
  Result<Placement> place(const PlaceRequest& request, PlaceDetail detail);

  // This ledger becomes a copy of `other` (a snapshot, O(state size)): nothing is applied.
  void copy_from(const AllocationLedger& other) { state_.restore(other.state_); }

 private:
  AllocationState state_;
  Mutation scratch_;  // hold() / release_job()'s record, kept for its buffers
};

}  // namespace toposched
