// place_within: place() restricted to a set of nodes, for front ends whose caller has
// already excluded some nodes (kube-scheduler offers the extender only the nodes that passed
// its own filters: taints, node selectors, affinity), and kept off a set of GPUs (GPUs the
// scheduler that runs the job cannot hand out: Slurm's beyond a node's configured count).
// Nodes outside the mask and blocked GPUs are treated as held; with an empty mask and no
// blocked GPU, or when none of them is free, this is exactly place(). Pure function of its
// arguments; thread-safe on distinct or read-only states.
#pragma once

#include <span>

#include "placement/placement.h"

namespace toposched {

// The nodes a request may use: `allowed` (empty = every node) narrowed to the request's
// `within_nodes` hostlist when it has one. A name the cluster lacks is an error.
Result<NodeMask> allowed_nodes(const Cluster& cluster, const JobRequest& request, NodeMask allowed);

// kInvalidArgument when a blocked GPU is not a GPU of the cluster.
Result<Placement> place_within(const AllocationState& state, const JobRequest& request,
                               const PlacementPolicy& policy, const NodeMask& allowed,
                               PlaceDetail detail = PlaceDetail::kFull, std::span<const GpuId> blocked_gpus = {});

}  // namespace toposched
