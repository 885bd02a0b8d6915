// The export formats by name, for `toposched export --to FORMAT`: each entry names a writer
// in this folder (one file per format) and says in one line what it produces. The registry
// is constant data; export_cluster is a pure function. Thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "formats/export_common.h"

namespace toposched {

struct ExportFormat {
  std::string_view name;         // "slurm-tree", "k8s-labels", ...
  std::string_view description;  // one line, for --help
  Result<ExportOutput> (*write)(const Cluster&, const ExportOptions&);
};

const std::vector<ExportFormat>& export_formats();

// kInvalidArgument (listing the formats) when `format` is unknown.
Result<ExportOutput> export_cluster(const Cluster& cluster, std::string_view format, const ExportOptions& options);

}  // namespace toposched
