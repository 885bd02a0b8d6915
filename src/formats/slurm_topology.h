// Reader for Slurm's topology.conf, both plugins:
//   tree:  SwitchName=NAME [Switches=HOSTLIST] [Nodes=HOSTLIST] [LinkSpeed=N]
//   block: BlockName=NAME Nodes=HOSTLIST, and BlockSizes=N,N,...
// with `#` comments and `\` line continuations; keys are case-insensitive as in Slurm.
// Tree switches get tiers by height (a switch with nodes only is tier 0, its parent one
// more, ...); blocks become accelerator domains named after the block. A switch listed under
// two parents, or a node under two switches, is kept under the first with a warning (the
// model is a tree); a cycle or an unknown child switch is an error naming file:line:col.
// Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

Result<DiscoveredTopology> read_slurm_topology(std::string_view text, const std::string& file);

// True when the first statement starts with SwitchName=, BlockName= or BlockSizes=.
bool looks_like_slurm_topology(std::string_view text);

}  // namespace toposched
