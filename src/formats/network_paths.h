// NetworkPaths: the switch tree a cloud API gives as one chain of network nodes per instance,
// farthest first (AWS DescribeInstanceTopology's NetworkNodes; Google Compute Engine's
// cluster / block / sub-block), turned into a DiscoveredTopology's tiers and switches.
//
// The last id of a chain is the node's leaf (tier 0), each id before it the parent of the
// next; chains may differ in length (a chain of L ids puts its first at tier L-1). Invariants
// of what finish() writes: one switch per (tier, id); an id seen at two tiers is named
// "<id>@tier-<N>" at the later tier; a switch two chains put under different parents keeps
// the first parent, and the second is a warning naming both. Not thread-safe: one per reader
// call.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "formats/discovered.h"

namespace toposched {

class NetworkPaths {
 public:
  // `what` names the chain's owner in warnings ("instance", "VM").
  explicit NetworkPaths(std::string_view what) : what_(what) {}

  // Node `node` (an index into the DiscoveredTopology's nodes) hangs under `chain`, farthest
  // first. An empty chain leaves the node without a switch.
  void add(std::size_t node, std::vector<std::string> chain);

  // Writes the switches, each recorded node's switch_name, the tier names (leaf, spine,
  // core, ... as deep as the longest chain) and the warnings into `out`.
  void finish(DiscoveredTopology& out) const;

 private:
  struct Chain {
    std::size_t node;
    std::vector<std::string> ids;  // farthest first
  };
  std::string what_;
  std::vector<Chain> chains_;
};

}  // namespace toposched
