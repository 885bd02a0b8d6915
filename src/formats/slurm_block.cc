#include "formats/slurm_block.h"

#include <fmt/format.h>

#include "topology/hostlist.h"

namespace toposched {

Result<ExportOutput> write_slurm_block(const Cluster& c, const ExportOptions& options) {
  TOPOSCHED_CHECK(validate_block_sizes(options.block_sizes));
  if (options.block_name) TOPOSCHED_CHECK(validate_block_name_rule(*options.block_name));
  TopographBlockLayout layout(c);
  if (layout.empty())
    return make_error(ErrorCode::kValidation,
                      fmt::format("cluster '{}' has no accelerator domains and no leaf switches, so no blocks", c.name()));
  TOPOSCHED_TRY(blocks, layout.cluster_blocks(options.block_sizes, options.block_name));
  ExportOutput out;
  out.warnings = blocks.warnings;
  std::string& t = out.text;
  t += "# topology.conf for Slurm's topology/block plugin (slurm.conf: TopologyPlugin=topology/block; Slurm 23.11+).\n";
  t += "# " + generated_by(c) + "\n";
  t += fmt::format("# Blocks laid out as NVIDIA Topograph lays them out, one per {} (docs/export.md).\n",
                   layout.from_domains() ? "accelerator domain or sub-domain" : "leaf switch");
  for (const auto& w : out.warnings) t += "# note: " + w + "\n";
  for (const auto& b : blocks.blocks) {
    if (!b.domain.empty()) t += fmt::format("# {}={}\n", b.name, b.domain);
    t += "BlockName=" + b.name;
    if (!b.nodes.empty() && !options.skeleton_only) t += " Nodes=" + compress_hostlist(b.nodes);
    t += "\n";
  }
  std::string list;
  for (long s : blocks.sizes) list += (list.empty() ? "" : ",") + std::to_string(s);
  t += "BlockSizes=" + list + "\n";
  return out;
}

}  // namespace toposched
