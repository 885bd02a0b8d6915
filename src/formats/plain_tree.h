// PlainTree: a cluster that a file describes by names alone -- switches in a forest, nodes
// under them, every node of the discovery's generic node type -- held as views of the
// file's text, for the readers that build a large cluster straight from their text
// (formats/slurm_topology_fast.h, formats/topograph_fast.h) instead of through a
// DiscoveredTopology and merge_discovered (docs/performance.md, "Large inputs").
//
// A node costs 16 bytes here (a view of its name and its switch's index) and no allocation;
// the only per-node allocation of a read is the model's own name. build() makes the model
// merge_discovered makes of the same names: the hint-less generic node type, tiers "leaf",
// "spine", ... by switch height, switches in the order added, nodes in natural name order.
//
// Invariants: switch names are distinct and non-empty; a node's switch is a valid index;
// the views point into text the caller keeps alive, or into `arena`. Every step returns
// false where the caller must leave the file to its general reader. Single-threaded; one
// per read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/discovery.h"
#include "topology/cluster.h"

namespace toposched {

// Names that are not in the text as they are (a bracket group's expansion), kept for the
// whole read: chunks that never grow past the capacity they were given, so a view into one
// stays valid while the arena lives.
class NameArena {
 public:
  std::string_view add(std::string_view s);

 private:
  std::vector<std::string> chunks_;
};

class PlainTree {
 public:
  // False when `name` is empty or already a switch.
  bool add_switch(std::string_view name);
  std::size_t switch_count() const { return switch_names_.size(); }
  std::optional<std::uint32_t> find_switch(std::string_view name) const;
  // False where the name is too long for a node record (4 GiB).
  bool add_node(std::string_view name, std::uint32_t sw);
  std::size_t node_count() const { return nodes_.size(); }
  // For a reader that learns a group's switch after its nodes: each node's switch becomes
  // switch_of[its switch] (every value < switch_of.size(), every result a switch).
  void remap_node_switches(const std::vector<std::uint32_t>& switch_of);

  // `child` under `parent` (indices); a switch's parent is set at most once.
  void set_parent(std::uint32_t child, std::uint32_t parent) { parent_of(child) = static_cast<int>(parent); }
  int& parent_of(std::uint32_t s);

  // Heights from the leaves (Kahn's order, as the general readers find them): false on a cycle.
  bool find_heights();
  // Nodes in natural name order: false when a name is given twice, or two distinct names
  // compare equal (the general path would leave their order to its sort).
  bool sort_nodes();
  // The model; nullopt where ClusterBuilder refuses it (the general path names why).
  std::optional<Cluster> build(const DiscoveryOptions& options) const;

  NameArena arena;

 private:
  struct NodeRec {
    const char* name;
    std::uint32_t length;
    std::uint32_t sw;
    std::string_view view() const { return {name, length}; }
  };

  std::vector<std::string_view> switch_names_;  // in the order added
  std::unordered_map<std::string_view, std::uint32_t> switch_index_;
  std::vector<int> parent_;  // per switch; -1 = a root
  std::vector<int> height_;  // per switch: its tier, after find_heights
  int max_height_ = 0;
  std::vector<NodeRec> nodes_;
};

}  // namespace toposched
