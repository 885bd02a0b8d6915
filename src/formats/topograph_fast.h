// The cluster model of a Topograph model YAML, built straight from the text: the fast path
// of load_cluster_text for large models (docs/performance.md, "Large inputs").
//
// The general path parses the whole document into a yaml-cpp tree (about a kilobyte per
// node), makes a DiscoveredNode per node and merges those: for a 50 MB model of 3 million
// nodes, 10x what the model itself costs. This path reads the text line by line into a
// PlainTree (formats/plain_tree.h) and builds the model from it.
//
// It takes only the plain shape large models have, which it reads exactly as yaml-cpp and
// read_topograph_model would:
//
//   switches:                     # entries indented by two
//     NAME: {}                    # or `NAME:` alone, or with a body of
//     NAME:                       #   `switches: [A, B]` or `switches:` and `- A` lines
//       switches: [A, B]
//   blocks:                       # items at column 0 or 2
//   - switch: NAME                # keys switch, nodes (and name, ignored)
//     nodes:                      # `- N` lines, or a flow list `[A, "n[1-4]"]`
//     - N
//
// with names of letters, digits, '.', '_' and '-' (a node item may also be a hostlist, in
// double quotes or plain in a block list), blank lines and whole-line comments. Anything else
// -- labels or annotations (domains), the old layout, other keys, tabs, trailing comments,
// anchors, escapes, a duplicate, an error of any kind -- returns nullopt, and the caller
// reads the file with the general path, which gives the same result or names the error at
// file:line:col. Where it returns a cluster, that cluster equals the general path's
// (tests/formats/topograph_fast_test.cc).
//
// Pure function; thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "formats/discovery.h"
#include "topology/cluster.h"

namespace toposched {

std::optional<Cluster> topograph_model_cluster_fast(std::string_view text, const DiscoveryOptions& options);

}  // namespace toposched
