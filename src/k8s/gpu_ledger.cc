#include "k8s/gpu_ledger.h"

#include <fmt/format.h>

namespace toposched::k8s {

namespace {
constexpr std::string_view kMaskedJob = "toposched:not-offered-by-kube-scheduler";
}

Result<Placement> place_within(const AllocationState& state, const JobRequest& request,
                               const PlacementPolicy& policy, const NodeMask& allowed) {
  const Cluster& c = state.cluster();
  std::vector<GpuId> blocked;
  if (!allowed.empty()) {
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      const NodeId n(static_cast<std::uint32_t>(i));
      if (allowed[i] || state.free_gpus(n) == 0) continue;
      for (int local = 0; local < c.node_gpu_count(n); ++local)
        if (GpuId g = c.node_gpu(n, local); state.gpu_free(g)) blocked.push_back(g);
    }
  }
  if (blocked.empty()) return place(state, request, policy);
  AllocationState masked = state.snapshot();
  TOPOSCHED_CHECK(masked.allocate(kMaskedJob, blocked));
  return place(masked, request, policy);
}

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

AllocationState LocalLedger::snapshot() const {
  std::lock_guard lock(mu_);
  return state_.snapshot();
}

}  // namespace toposched::k8s
