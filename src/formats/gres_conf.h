// Writer for Slurm's gres.conf GPU lines, one block per node type with GPUs:
// `NodeName=<hostlist> Name=gpu Type=<type> File=/dev/nvidiaN Cores=<cores> Links=<counts>`,
// the way Slurm's NVML autodetection describes a node (gres.conf(5)): Type is the GPU model
// lower-cased with spaces as underscores (or ExportOptions::gres_type), Links lists the
// NVLink count to every GPU of the node in index order (-1 for itself, 0 for none), Cores
// is the GPU's CPU affinity, with the upper half of the CPU ids folded onto the lower half
// when the affinity lists hyperthread siblings numbered N apart (Linux's usual numbering).
// Pure function; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

// The gres Type= the writer uses for a node type ("" when the model has no GPU name).
std::string gres_type_name(const NodeType& type, const ExportOptions& options);

// Slurm core ids per GPU (as "0-55" lists; empty strings when the affinity is unknown).
std::vector<std::string> gres_cores(const NodeType& type);

Result<ExportOutput> write_gres_conf(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
