// Loads a cluster from the CLI's SPEC argument: "preset:NAME[?k=v&...]" or a file whose
// format is detected by content (native YAML/JSON spec, Slurm topology.conf, Topograph model
// YAML; further readers register in cluster_source.cc). Pure function of its input; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "formats/discovery.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

Result<Cluster> load_cluster(const std::string& spec);

// Loads from text already read; `file` names it in errors.
Result<Cluster> load_cluster_text(std::string_view text, const std::string& file);

// One discovery reader's result merged into a cluster, as load_cluster_text merges a Slurm
// topology.conf or a Topograph model (nodes get discovery's generic node type); an error
// without a file names `file`. Merge warnings are not reported.
Result<Cluster> cluster_from_discovered(Result<DiscoveredTopology> read, const DiscoveryOptions& options,
                                        const std::string& file);

}  // namespace toposched
