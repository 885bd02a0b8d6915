// Writer for Volcano's network topology: `HyperNode` objects (topology.volcano.sh/v1alpha1,
// cluster-scoped), one per switch and, when every accelerator domain sits under a single
// leaf switch, one per domain below them. spec.tier counts from 1 at the finest HyperNode;
// spec.tierName is the model's tier name ("accelerator-domain" for domains); spec.members
// lists child HyperNodes (type HyperNode, selector.exactMatch.name) and nodes (type Node),
// either one exactMatch per node (MemberStyle::kExact) or one selector.regexMatch.pattern
// derived from the nodes' hostlist (MemberStyle::kRegex). Object names are made valid
// DNS-1123 names. Multi-document YAML. Pure function; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

Result<ExportOutput> write_volcano(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
