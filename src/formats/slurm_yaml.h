// Writer for Slurm's topology.yaml (Slurm 25.05+), which holds several named topologies
// that partitions choose with `Topology=`: "<cluster>-tree" (topology/tree, the same
// switches as slurm_tree.h, cluster_default: true) and, when the cluster has accelerator
// domains or leaf switches, "<cluster>-block" (topology/block, as slurm_block.h). Field
// names follow topology.yaml(5): topology, cluster_default, tree.switches[].switch /
// children / nodes, block.block_sizes, block.blocks[].block / nodes. Pure; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

Result<ExportOutput> write_slurm_yaml(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
