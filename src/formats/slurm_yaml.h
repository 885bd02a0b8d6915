// Writer for Slurm's topology.yaml (Slurm 25.05+), which holds several named topologies
// that partitions choose with `Topology=`. With ExportOptions::topologies (Topograph's
// `topologies` parameter) it writes those, sorted by name, as Topograph does: tree (the
// switches above the partition's nodes, breadth-first), block (TopographBlockLayout's
// partition blocks, numbered block1...) or flat (also for a tree or block partition none
// of whose nodes the cluster knows); `cluster_default` as given. Without it:
// "<cluster>-tree" (cluster_default: true) and, when the cluster has blocks,
// "<cluster>-block" over all nodes. Fields follow topology.yaml(5): topology,
// cluster_default, flat, tree.switches[].switch / children / nodes, block.block_sizes,
// block.blocks[].block / nodes. Reads skeleton_only (no nodes). Pure; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

Result<ExportOutput> write_slurm_yaml(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
