// place_within: place() restricted to a set of nodes, for front ends whose caller has
// already excluded some nodes (kube-scheduler offers the extender only the nodes that passed
// its own filters: taints, node selectors, affinity). Nodes outside the mask are treated as
// full; with an empty mask, or when no masked-out node has a free GPU, this is exactly
// place(). Pure function of its arguments; thread-safe on distinct or read-only states.
#pragma once

#include "placement/placement.h"

namespace toposched {

// The nodes a request may use: `allowed` (empty = every node) narrowed to the request's
// `within_nodes` hostlist when it has one. A name the cluster lacks is an error.
Result<NodeMask> allowed_nodes(const Cluster& cluster, const JobRequest& request, NodeMask allowed);

Result<Placement> place_within(const AllocationState& state, const JobRequest& request,
                               const PlacementPolicy& policy, const NodeMask& allowed,
                               PlaceDetail detail = PlaceDetail::kFull);

}  // namespace toposched
