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

// Slurm's topology.yaml (Slurm 25.05+, topology.yaml(5)): a list of named topologies, each
// `tree: {switches: [{switch, children, nodes}]}`, `block: {block_sizes, blocks: [{block,
// nodes}]}` or `flat: true`. The cluster takes one tree and one set of blocks: of each kind
// the `cluster_default: true` one, else the first; the others are named in a warning. Read
// as the topology.conf reader reads the same statements (same checks), errors at the YAML.
Result<DiscoveredTopology> read_slurm_topology_yaml(std::string_view text, const std::string& file);

// True when the first statement starts with SwitchName=, BlockName= or BlockSizes=.
bool looks_like_slurm_topology(std::string_view text);

}  // namespace toposched
