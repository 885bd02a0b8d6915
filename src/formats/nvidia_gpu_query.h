// Reader for the GPU names of one node, as
//   `nvidia-smi --query-gpu=name,pci.bus_id --format=csv` (or `--format=csv,noheader`):
// one "NVIDIA A100-SXM4-80GB, 00000000:07:00.0" line per GPU, after an optional
// "name, pci.bus_id" header. Extra columns after the two are ignored (a query with more
// fields). The product is the first GPU's name; GPUs that name another product give a
// warning (the node is modelled with the first). Errors name file:line:col.
// Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/error.h"

namespace toposched {

struct NodeGpuQuery {
  std::string product;  // e.g. "NVIDIA A100-SXM4-80GB"
  int gpus = 0;
  std::vector<std::string> bus_ids;  // in nvidia-smi's order (its GPU index)
  std::vector<std::string> warnings;
};

Result<NodeGpuQuery> read_nvidia_gpu_query(std::string_view text, const std::string& file);

}  // namespace toposched
