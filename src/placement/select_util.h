// Building blocks shared by the placement policies: node eligibility for a request, GPU
// choice inside a node (lowest indices, or the best-connected subset), and tier lookups.
// Pure functions of their arguments; thread-safe.
#pragma once

#include <span>
#include <vector>

#include "placement/allocation_state.h"
#include "placement/job_request.h"
#include "placement/placement.h"

namespace toposched {

inline bool node_allowed(const NodeMask& allowed, NodeId n) { return allowed.empty() || allowed[n.index()]; }

// GPUs this node can contribute to the request right now; 0 when the node is not allowed,
// has another GPU model than the request asks for, or has too few free GPUs. An exclusive
// job takes only a wholly free node, and then all its GPUs (gpus_per_node when fixed); any
// other job takes exactly gpus_per_node when fixed, otherwise every free GPU.
int node_capacity(const AllocationState& s, const JobRequest& r, const NodeMask& allowed, NodeId n);

// Appends the k lowest-indexed free GPUs of the node.
void take_lowest_free(const AllocationState& s, NodeId n, int k, std::vector<GpuId>& out);

// Slurm 26.05's one-node path (_get_one_res in src/plugins/select/cons_tres/job_test.c,
// 801-870, taken at 1024-1026 for a job of at most one node when the topology plugin allows
// it, as topology/tree and topology/block do): the first node in node order (all node weights
// equal) that can run the job, all the GPUs it can give; a shortage error when none can.
Result<std::vector<GpuId>> first_node_that_fits(const AllocationState& s, const JobRequest& r, const NodeMask& allowed);

// Appends k free GPUs of the node that are best connected to each other: most NVLink pairs
// (then most NVLinks), then the closest PCIe classes (PIX < PXB < PHB < NODE < SYS). Exact
// search over subsets when small, greedy otherwise. Sorted by local index.
void take_best_connected(const AllocationState& s, NodeId n, int k, std::vector<GpuId>& out);

// Pairwise connection score of two GPUs of one node type (higher = closer).
int link_score(const NodeType& t, int a, int b);

// The switch of tier `tier` above the node (invalid when the node has none at that tier).
SwitchId ancestor_at_tier(const AllocationState& s, NodeId n, int tier);

// Switches of a tier, in id order.
std::vector<SwitchId> switches_at_tier(const Cluster& c, int tier);

// Allowed-node mask of the nodes below switch `s`.
NodeMask subtree_mask(const Cluster& c, SwitchId s);

}  // namespace toposched
