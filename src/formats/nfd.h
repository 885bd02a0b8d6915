// Writer for Node Feature Discovery objects (nfd.k8s-sigs.io/v1alpha1), as NVIDIA
// Topograph's `nfd` engine publishes a topology (pkg/engines/nfd): one NodeFeature per node
// whose spec.features.attributes hold `system.name` {nodename} and `topograph.network`
// {fabric-tier-N, accelerator-domain, accelerator-sub-domain: the values of the node's
// k8s-labels export}, and one NodeFeatureGroup per distinct (kind, value) whose rule matches
// `topograph.network` KIND In [VALUE]; NFD master fills the groups' status.nodes. Objects
// carry Topograph's labels and annotations (app.kubernetes.io/managed-by: topograph,
// topograph.run/engine: nfd, ...) and its names (nfd_object_name), so objects from either
// replace the other's. Nodes sorted by name, groups by kind then value, as Topograph writes
// them; multi-document YAML in ExportOptions::nfd_namespace. A node name that is no valid
// label value (over 63 characters) is an error, as in Topograph. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "formats/export_common.h"

namespace toposched {

inline constexpr std::string_view kNfdDefaultNamespace = "node-feature-discovery";

// Topograph's stableObjectName: PREFIX-PART-HASH, where PART is `value` lower-cased with
// every run of other characters than [a-z0-9] made one '-' (ends trimmed; "value" if
// nothing is left), cut so that the name fits in 63 characters, and HASH the first 8 hex
// digits of SHA-256(value).
std::string nfd_object_name(std::string_view prefix, std::string_view value);

Result<ExportOutput> write_nfd(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
