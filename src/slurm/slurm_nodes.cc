#include "slurm/slurm_nodes.h"

#include <cmath>

#include <fmt/format.h>

#include "slurm/live_state.h"
#include "topology/hardware.h"
#include "topology/hostlist.h"
#include "topology/text.h"

namespace toposched::slurm {

double real_memory_gb(long long real_memory_mb) {
  return std::floor(static_cast<double>(real_memory_mb) * 1048576.0 / 1e9);
}

Result<DiscoveredTopology> read_slurm_nodes(std::string_view text, const std::string& file) {
  TOPOSCHED_TRY(nodes, trim(text).starts_with('{') ? parse_sinfo_json(text, file) : parse_scontrol_nodes(text, file));
  DiscoveredTopology out;
  out.source = file;
  std::vector<std::string> no_gpus, unknown_type;
  for (SlurmNode& n : nodes) {
    if (n.gpus <= 0) {
      no_gpus.push_back(n.name);
      continue;
    }
    DiscoveredNode d;
    d.name = std::move(n.name);
    d.gpu_count = n.gpus;
    if (!n.gpu_type.empty() && find_gpu_product(n.gpu_type))
      d.gpu_model = n.gpu_type;
    else if (!n.gpu_type.empty())
      unknown_type.push_back(fmt::format("{} ({})", d.name, n.gpu_type));
    d.host_memory_gb = real_memory_gb(n.real_memory_mb);
    out.nodes.push_back(std::move(d));
  }
  if (!no_gpus.empty())
    out.warnings.push_back(fmt::format("skipped {} node(s) without a gpu gres: {}", no_gpus.size(),
                                       compress_hostlist(no_gpus)));
  if (!unknown_type.empty()) {
    std::string list;
    for (std::size_t i = 0; i < unknown_type.size() && i < 8; ++i) list += (i ? ", " : "") + unknown_type[i];
    if (unknown_type.size() > 8) list += fmt::format(", ... ({} in all)", unknown_type.size());
    out.warnings.push_back(fmt::format("gres type names no GPU product toposched knows; those nodes take --gpu-model: {}",
                                       list));
  }
  return out;
}

}  // namespace toposched::slurm
