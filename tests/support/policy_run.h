// Test helpers for running one placement policy directly: a whole-node job request, and a
// request normalised on the state's cluster and handed to the policy's select() (what place()
// does before its tier and description steps). Header-only.
#pragma once

#include <vector>

#include "placement/placement.h"

namespace toposched::testing {

// `sbatch --exclusive -N n`: n whole nodes.
inline JobRequest nodes_job(int n) {
  JobRequest r;
  r.nodes = n;
  return r;
}

inline Result<std::vector<GpuId>> normalize_and_select(const PlacementPolicy& policy, const AllocationState& s,
                                                        const JobRequest& r) {
  auto n = normalize(r, s.cluster());
  if (!n) return tl::unexpected(n.error());
  return policy.select(s, *n, {});
}

}  // namespace toposched::testing
