// Reader for `ibnetdiscover` output: InfiniBand switches, channel adapters (CAs) and links,
// turned into a switch tree over named nodes.
//
// A node is the first word of a CA's description "<host> <device>" (as set by the
// node-name-map or rdma-ndd); CAs with another description (e.g. the default
// "MT4129 ConnectX7 Mellanox Technologies") and SHARP aggregation nodes are skipped and
// counted in a warning. `hca_regex` keeps only the CAs whose device name fully matches it
// (the compute HCAs), so a storage leaf on the same fabric does not become a compute leaf.
// Leaves are the switches holding a kept CA; leaves that serve (mostly) the same nodes are
// merged into one leaf group, so a rail-optimised scalable unit becomes one group (a
// superset of Topograph's "identical children" rule that also survives a missing HCA).
// Upper tiers are built upward: switches linked to the groups of one tier form the next
// tier, and switches sharing a child group are merged. A node reaching several leaf groups
// is placed under the smallest one and named in a warning. A dump without a switch gives an
// empty fabric. Each node's NIC speed hint is the link rate of its kept HCAs ("4xNDR" = 400
// Gbit/s; the slowest when they differ). Pure function; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

struct IbnetOptions {
  std::optional<std::string> hca_regex;  // ECMAScript, matched against the whole device name
};

struct IbnetStats {
  int switches = 0;
  int cas = 0;
  int kept_hcas = 0;
  int skipped_unnamed = 0;    // description not "<host> <device>"
  int aggregation_nodes = 0;  // SHARP aggregation nodes
  int filtered_hcas = 0;      // named, but the device does not match hca_regex
  int leaf_groups = 0;
  int nodes_in_several_leaf_groups = 0;
};

struct IbnetFabric {
  DiscoveredTopology topology;
  IbnetStats stats;
};

Result<IbnetFabric> read_ibnetdiscover(std::string_view text, const std::string& file,
                                       const IbnetOptions& options = {});

bool looks_like_ibnetdiscover(std::string_view text);

}  // namespace toposched
