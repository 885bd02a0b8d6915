#include "k8s/gpu_ledger.h"

#include <fmt/format.h>

namespace toposched::k8s {

Result<Placement> LocalLedger::reserve(const JobRequest& request, std::string_view policy_name,
                                       const NodeMask& allowed) {
  TOPOSCHED_TRY(policy, find_policy(policy_name));
  std::lock_guard lock(mu_);
  if (state_.has_job(request.job_id))
    return make_error(ErrorCode::kConflict, fmt::format("job '{}' already holds GPUs", request.job_id));
  TOPOSCHED_TRY(p, place_within(state_, request, *policy, allowed));
  TOPOSCHED_CHECK(state_.allocate(request.job_id, p.gpus_by_rank));
  return p;
}

Result<void> LocalLedger::release(std::string_view job_id) {
  std::lock_guard lock(mu_);
  if (!state_.has_job(job_id)) return make_error(ErrorCode::kNotFound, fmt::format("no job '{}'", job_id));
  TOPOSCHED_CHECK(state_.release(job_id));
  return {};
}

bool LocalLedger::holds(std::string_view job_id) const {
  std::lock_guard lock(mu_);
  return state_.has_job(job_id);
}

AllocationState LocalLedger::snapshot() const {
  std::lock_guard lock(mu_);
  return state_.snapshot();
}

}  // namespace toposched::k8s
