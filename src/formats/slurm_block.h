// Writer for Slurm's topology.conf, topology/block plugin (Slurm 23.11+): the blocks of
// TopographBlockLayout (topograph_blocks.h), as NVIDIA Topograph writes them: per block
// "# blockNNN=<domain>" then `BlockName=blockNNN Nodes=<hostlist>` (placeholders without
// Nodes=), then `BlockSizes=`. Reads ExportOptions::block_sizes (validated with
// Topograph's rules), block_name and skeleton_only. Pure function; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

Result<ExportOutput> write_slurm_block(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
