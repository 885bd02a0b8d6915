// Keeping a toposched allocation state equal to Slurm's (`toposched serve --slurm`): from
// Slurm's live state and the jobs the service holds, the releases and holds that make the
// service hold exactly what Slurm runs.
//
// Jobs the sync manages, by id:
//   "slurm-job:ID"          a Slurm job started outside toposched, holding its real GPUs;
//   "slurm-unavailable:N"   the GPUs of node N that Slurm cannot use now (down, drained);
//   an id named by a Slurm job's admin_comment "toposched-job=ID" (set by the
//   job_submit.lua): the service placed it. While Slurm keeps it pending the service's
//   reservation stays; once it runs, the service holds the GPUs Slurm really gave it; when
//   it ends (or Slurm no longer lists it) it is released.
// Other service jobs are left alone unless a running Slurm job holds one of their GPUs:
// Slurm is the truth, so such a job is released (the action says why).
// Pure function; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "slurm/live_state.h"

namespace toposched::slurm {

struct HeldJob {
  std::string id;
  std::vector<GpuId> gpus;  // rank order
};

struct SyncAction {
  enum class Kind { kRelease, kHold };
  Kind kind = Kind::kRelease;
  std::string job_id;
  std::vector<GpuId> gpus;  // kHold: the GPUs to hold
  std::string reason;       // for the log
};

// The id the job_submit.lua recorded in a job's admin_comment; empty when none.
std::string toposched_job_of(const SlurmJob& job);

// Releases first, then holds. kValidation errors as apply_live_state (a Slurm job on a node
// or GPU the cluster does not have).
Result<std::vector<SyncAction>> reconcile(const Cluster& cluster, const SlurmLiveState& live,
                                          const std::vector<HeldJob>& held);

}  // namespace toposched::slurm
