// Slurm's node list as a discovery source (`toposched discover --slurm-nodes FILE`): what
// `scontrol -o show node` or `sinfo --json` says of each node's GPUs and memory, for the
// nodes a topology.conf (--slurm-topology) places under switches, which says nothing of them.
// Per node: the name, the GPU count of its gpu gres (Gres=gpu:h100:8), the GPU product its gres
// type names when toposched knows it (find_gpu_product: "h100", "a100", "gb200", ...), and
// RealMemory as the node type's host_memory_gb. Nodes without GPUs (login, CPU partitions)
// are skipped and counted in a warning, as the Kubernetes reader skips CPU nodes. Parsing is
// slurm/live_state.h's (the same captured outputs, the same file:line errors). Pure
// function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched::slurm {

// `text` is `sinfo --json` when its first non-blank character is '{', else `scontrol -o show
// node`. Errors name `file` and, for scontrol, the line.
Result<DiscoveredTopology> read_slurm_nodes(std::string_view text, const std::string& file);

// RealMemory (Slurm's megabytes, 2^20 bytes) in whole GB (10^9 bytes, rounded down), the unit
// of NodeType::host_memory_gb.
double real_memory_gb(long long real_memory_mb);

}  // namespace toposched::slurm
