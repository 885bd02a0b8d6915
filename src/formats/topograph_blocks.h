// The blocks of Slurm's topology/block plugin, laid out as NVIDIA Topograph lays them out
// (pkg/translate at e2b62507, 2026-08-21: topology.go initBlocks, block.go, block_tree.go
// complementBlocks, yaml.go getBlockTopologyUnit), so toposched's slurm-block and
// slurm-yaml outputs are Topograph's:
//
// - One block per accelerator domain, numbered block001... in domain-name order. Without
//   block sizes and sub-domains they are listed in the order a breadth-first walk of the
//   fabric (children sorted by name) first meets one of their nodes; a domain none of whose
//   nodes hangs under a switch is then left out (a warning says so). A cluster whose only
//   switch is discovery's `no-topology` leaf has no fabric tree (Topograph: no graph.Tiers).
// - With block sizes, or with sub-domains (sizes then inferred: [largest sub-domain,
//   smallest power-of-two multiple of it holding the largest domain]), each domain (or
//   sub-domain) is cut into blocks of the base (first) size, in host-name order; empty
//   placeholder blocks (`BlockName=blockNNN` without nodes) pad each domain to its slot so
//   every aggregate starts on a domain boundary, and the total to a multiple of the largest
//   size. Blocks are then in domain-name order.
// - Without sizes: [D, 2D, ..., 2^k D], D the smallest block, k = floor(log2(blocks)).
// - A cluster without accelerator domains gets one block per leaf (tier-0) switch, named
//   after the switch (Topograph refuses such a cluster; toposched extension).
//
// Invariants: every node of the input appears in at most one block; block names are
// unique. Plain values and pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

// Topograph's `blockName`: each node name is searched (unanchored) with `node_name_regexp`
// (RE2 syntax, as Go's regexp) and `format` is expanded with Go's Regexp.Expand rules
// ($1, ${1}, $name, ${name}, $$). Every node of a block must give the same, non-empty name;
// blocks without nodes keep their number.
struct BlockNameRule {
  std::string node_name_regexp;
  std::string format;
};

// Topograph's checks (engines/slurm validateBlockSizes): at most 20 sizes, each in
// 1..65536, strictly increasing, each a power-of-two multiple of the previous.
// kInvalidArgument with Topograph's wording ("blockSizes[1]=6 must be ...").
Result<void> validate_block_sizes(const std::vector<long>& sizes);
// Both fields non-empty and the regexp valid. kInvalidArgument.
Result<void> validate_block_name_rule(const BlockNameRule& rule);

// Go's Regexp.Expand of `format` for the first match of `rule` in `text`; nullopt when the
// regexp does not match. The rule must have passed validate_block_name_rule.
std::optional<std::string> expand_block_name(const BlockNameRule& rule, const std::string& text);

struct SlurmBlock {
  std::string name;                // blockNNN (or from the BlockNameRule)
  std::string domain;              // the (sub-)domain it holds, for a comment; "" for a placeholder
  std::vector<std::string> nodes;  // sorted by name; empty for a placeholder
};
struct SlurmBlocks {
  std::vector<SlurmBlock> blocks;
  std::vector<long> sizes;  // BlockSizes
  std::vector<std::string> warnings;
};

// The cluster as Topograph's translate package sees it for blocks.
class TopographBlockLayout {
 public:
  explicit TopographBlockLayout(const Cluster& cluster);

  bool from_domains() const { return from_domains_; }
  bool empty() const { return blocks_.empty(); }

  // The cluster-wide blocks (`topology.conf`). `sizes` must have passed
  // validate_block_sizes; empty = computed. Numbered "block%03d".
  Result<SlurmBlocks> cluster_blocks(const std::vector<long>& sizes, const std::optional<BlockNameRule>& rule) const;

  // One partition's blocks (`topology.yaml`): the blocks restricted to `nodes` (unknown
  // nodes and nodes in no block are skipped), then complemented. Numbered "block%d", as
  // Topograph numbers them there. No block at all: an empty `blocks`.
  Result<SlurmBlocks> partition_blocks(const std::vector<std::string>& nodes, const std::vector<long>& sizes,
                                       const std::optional<BlockNameRule>& rule) const;

 private:
  struct Host {
    std::string name;
    std::string sub_domain;
  };
  struct Block {
    std::string domain;
    std::vector<std::string> nodes;  // sorted
    std::size_t number = 0;          // 1-based, in domain-name order
  };
  Result<SlurmBlocks> finish(std::vector<Block> blocks, const std::vector<long>& sizes,
                             const std::optional<BlockNameRule>& rule, bool padded_ids) const;

  bool from_domains_ = false;
  std::map<std::string, std::map<std::string, Host>> domains_;  // domain -> host name -> host
  std::vector<Block> blocks_;                                   // in Topograph's order
  std::map<std::string, std::size_t, std::less<>> block_of_node_;
  std::vector<std::string> warnings_;
};

}  // namespace toposched
