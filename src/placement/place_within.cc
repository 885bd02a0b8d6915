#include "placement/place_within.h"

namespace toposched {

namespace {
// Holds the free GPUs of masked-out nodes on the copy; never visible outside this function.
constexpr std::string_view kMaskedJob = "toposched:masked-out-nodes";
}  // namespace

Result<Placement> place_within(const AllocationState& state, const JobRequest& request,
                               const PlacementPolicy& policy, const NodeMask& allowed, PlaceDetail detail) {
  const Cluster& c = state.cluster();
  std::vector<GpuId> blocked;
  if (!allowed.empty()) {
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      const NodeId n(static_cast<std::uint32_t>(i));
      if ((i < allowed.size() && allowed[i]) || state.free_gpus(n) == 0) continue;
      for (int local = 0; local < c.node_gpu_count(n); ++local)
        if (GpuId g = c.node_gpu(n, local); state.gpu_free(g)) blocked.push_back(g);
    }
  }
  if (blocked.empty()) return place(state, request, policy, detail);
  AllocationState masked = state.snapshot();
  TOPOSCHED_CHECK(masked.allocate(kMaskedJob, blocked));
  return place(masked, request, policy, detail);
}

}  // namespace toposched
