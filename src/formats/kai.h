// Writer for a KAI-Scheduler `Topology` (kai.scheduler/v1alpha1, cluster-scoped):
// spec.levels[].nodeLabel, coarsest first, down to `kubernetes.io/hostname`, from
// label_levels() over Topograph's label keys. Pure function; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

Result<ExportOutput> write_kai(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
