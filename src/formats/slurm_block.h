// Writer for Slurm's topology.conf, topology/block plugin (Slurm 23.11+): one
// `BlockName=... Nodes=...` line per accelerator domain (or per leaf switch when the cluster
// has no domains), in fabric order so that neighbouring blocks pair up, then `BlockSizes=`
// computed as Topograph does or taken from ExportOptions::block_sizes after validation
// (see block_sizes() in export_common.h). Pure function; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

Result<ExportOutput> write_slurm_block(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
