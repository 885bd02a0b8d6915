// The built-in placement policies, one file each in this folder (see docs/placement.md for
// what each does and where it comes from). Each accessor returns a stateless singleton;
// placement_policies() in placement.cc lists them. Thread-safe.
#pragma once

#include "placement/placement.h"

namespace toposched {

const PlacementPolicy& first_fit_policy();
const PlacementPolicy& random_policy();
const PlacementPolicy& slurm_tree_policy();
const PlacementPolicy& slurm_block_policy();
const PlacementPolicy& kueue_bestfit_policy();
const PlacementPolicy& kueue_balanced_policy();
const PlacementPolicy& topo_policy();

// The searches that read the free-GPU index, as they were before it: the same policy
// scanning every node. Registered nowhere; tests compare each with its indexed twin, which
// must choose the same GPUs (docs/design.md, "Free-GPU index").
const PlacementPolicy& slurm_tree_scan_policy();
const PlacementPolicy& slurm_block_scan_policy();
const PlacementPolicy& kueue_bestfit_scan_policy();
const PlacementPolicy& kueue_balanced_scan_policy();

// "needs N GPUs [in whole free nodes]; M are usable (F free)": the common infeasible reason.
Error shortage_error(const AllocationState& s, const JobRequest& r, const NodeMask& allowed);

}  // namespace toposched
