// The cluster model of a Slurm topology.conf, built straight from the text: the fast path of
// load_cluster_text for large tree files (docs/performance.md, "Large inputs").
//
// read_slurm_topology + merge_discovered make a DiscoveredNode per node (five strings, two
// shared pointers), index, copy and sort those, and only then call ClusterBuilder: for a
// 50 MB file of 4 million nodes, 5x what the model itself costs. This path reads the file's
// lines in place, keeps a node as a view of its name (into the text, or into an arena for
// names a bracket group expands) and its switch's index, sorts those 16-byte records, and
// hands them to ClusterBuilder, so the only per-node allocation is the model's own.
//
// It takes only files it reads exactly as the general path would: tree statements
// (SwitchName= with Nodes=, Switches=, LinkSpeed=), no line continuations, no quoted values,
// each node under one switch, no error of any kind. Anything else (blocks, a duplicate, a
// bad hostlist, a cycle, an unknown key, ...) returns nullopt, and the caller reads the
// file with the general path, which gives the same result or names the error at
// file:line:col. Where it returns a cluster, that cluster equals the general path's
// (tests/formats/slurm_topology_fast_test.cc).
//
// Pure function; thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "formats/discovery.h"
#include "topology/cluster.h"

namespace toposched {

std::optional<Cluster> slurm_topology_cluster_fast(std::string_view text, const DiscoveryOptions& options);

}  // namespace toposched
