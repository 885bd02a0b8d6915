// Writer for Kubernetes node labels with Topograph's keys (export_common.h):
// `fabric.topograph.run/tier-N` = the node's tier-N switch (N = the model's tier index, 0 =
// closest), `accelerator.topograph.run/domain` and `.../sub-domain`, plus
// `toposched.io/node-type` (used by the Kueue ResourceFlavors of kueue.h). Values go through
// k8s_label_value (Topograph's 63-character rule and FNV-1a hashing). Two styles:
// kubectl (a POSIX sh script of `kubectl label node NAME --overwrite k=v ...`) and patch (a
// JSON object mapping each node name to its JSON merge patch `{"metadata":{"labels":{}}}`).
//
// Labels describe the real structure only (a node under no switch has no tier label);
// label_levels() keeps out of the Kueue / KAI levels any label some node lacks. Node names
// are Kubernetes node names (k8s_node_name: invalid ones are an error unless mapped). Pure
// function; thread-safe.
#pragma once

#include <map>

#include "formats/export_common.h"

namespace toposched {

// Labels per node, indexed by node id; `warnings` gets label values two names share.
std::vector<std::map<std::string, std::string>> topology_labels(const Cluster& cluster, std::vector<std::string>* warnings);

// Labels per node (by Kubernetes node name), in node order.
Result<std::vector<std::pair<std::string, std::map<std::string, std::string>>>> node_labels(
    const Cluster& cluster, const ExportOptions& options, std::vector<std::string>* warnings);

Result<ExportOutput> write_k8s_labels(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
