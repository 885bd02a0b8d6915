// The export formats by name, for `toposched export --to FORMAT`: each row of the registry
// names a writer in this folder (one file per format) and says in one line what it
// produces. The registry is constant data; export_cluster is a pure function. Thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "formats/export_common.h"
#include "topology/registry.h"

namespace toposched {

using ExportWriter = Result<ExportOutput> (*)(const Cluster&, const ExportOptions&);

// Rows named "slurm-tree", "k8s-labels", ...; descriptions are one line, for --help.
const Registry<ExportWriter>& export_formats();

// The registry's kInvalidArgument (listing the formats) when `format` is unknown.
Result<ExportOutput> export_cluster(const Cluster& cluster, std::string_view format, const ExportOptions& options);

}  // namespace toposched
