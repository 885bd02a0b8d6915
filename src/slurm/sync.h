// Keeping a toposched engine equal to Slurm's view (`toposched serve --slurm`): from Slurm's
// live state, the jobs the service holds and the node marks Slurm's source holds, the
// releases, holds and node marks that make the service hold exactly what Slurm runs and
// close exactly the nodes Slurm cannot use.
//
// What the sync manages:
//   "slurm-job:ID"          a Slurm job started outside toposched, holding its real GPUs;
//   node marks of source "slurm" (placement/node_availability.h) on the nodes Slurm cannot
//                           use now (down, drained, unknown to Slurm), the reason saying why
//                           (slurm/live_state.h's apply_live_state decides them);
//   "slurm-unavailable:N"   the GPUs of node N beyond the count Slurm configured there (held,
//                           since a node mark would close the node's configured GPUs too);
//   an id named by a Slurm job's admin_comment "toposched-job=ID" (set by the
//   job_submit.lua): the service placed it. While Slurm keeps it pending the service's
//   reservation stays; once it runs, the service holds the GPUs Slurm really gave it; when
//   it ends (or Slurm no longer lists it) it is released.
// Other service jobs are left alone unless a running Slurm job holds one of their GPUs:
// Slurm is the truth, so such a job is released (the action says why). Marks of other
// sources (an operator's, Kubernetes') are not the sync's.
// Pure function; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "slurm/live_state.h"

namespace toposched::slurm {

struct SyncAction {
  enum class Kind { kRelease, kHold, kMarkNode, kUnmarkNode };
  Kind kind = Kind::kRelease;
  std::string job_id;       // kRelease, kHold
  std::vector<GpuId> gpus;  // kHold: the GPUs to hold
  std::string reason;       // for the log; kMarkNode: the mark's reason
  // kRelease of a job the job_submit.lua placed that Slurm does not list: it may be gone, or
  // slurmctld may not have created it yet (the plugin asks before the job exists), so the
  // caller waits a grace period before releasing it.
  bool slurm_may_not_know_yet = false;
  std::string node{};  // kMarkNode, kUnmarkNode
};

// A mark of source "slurm" the engine holds: the node's name and the mark's reason.
struct SlurmNodeMark {
  std::string node;
  std::string reason;
};

// The id the job_submit.lua recorded in a job's admin_comment; empty when none.
std::string toposched_job_of(const SlurmJob& job);

// Releases first, then lifted marks, new (or changed) marks, holds. kValidation errors as
// apply_live_state (a Slurm job on a node or GPU the cluster does not have).
Result<std::vector<SyncAction>> reconcile(const Cluster& cluster, const SlurmLiveState& live,
                                          const std::vector<HeldJob>& held,
                                          const std::vector<SlurmNodeMark>& marks = {});

}  // namespace toposched::slurm
