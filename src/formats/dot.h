// Writer for Graphviz DOT: the fabric as nested clusters (a subgraph "cluster_..." per
// switch, inside its parent's), each node a box labelled with its name, GPU count and
// accelerator domain; nodes under no switch sit at the top level. Render with
// `dot -Tsvg`. Pure function; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

Result<ExportOutput> write_dot(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
