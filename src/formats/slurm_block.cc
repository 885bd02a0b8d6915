#include "formats/slurm_block.h"

#include <fmt/format.h>

#include "topology/hostlist.h"

namespace toposched {

Result<ExportOutput> write_slurm_block(const Cluster& c, const ExportOptions& options) {
  BlockLayout layout = node_blocks(c);
  auto sizes = block_sizes(layout, options.block_sizes);
  if (!sizes) return tl::unexpected(sizes.error());
  ExportOutput out;
  std::string& t = out.text;
  t += "# topology.conf for Slurm's topology/block plugin (slurm.conf: TopologyPlugin=topology/block; Slurm 23.11+).\n";
  t += "# " + generated_by(c) + "\n";
  t += fmt::format("# {} blocks, one per {}, in fabric order (Slurm pairs neighbouring blocks).\n", layout.blocks.size(),
                   layout.from_domains ? "accelerator domain" : "leaf switch");
  NameMap names(NameMap::Target::kSlurm);
  std::string lines;
  for (const auto& b : layout.blocks) {
    std::vector<std::string> nodes;
    for (NodeId n : b.nodes) nodes.push_back(c.node_name(n));
    const std::string& name = names(b.name);
    if (name != b.name) t += fmt::format("# block '{}' is written as {}\n", b.name, name);
    lines += fmt::format("BlockName={} Nodes={}\n", name, compress_hostlist(nodes));
  }
  if (!layout.left_out.empty()) {
    std::vector<std::string> nodes;
    for (NodeId n : layout.left_out) nodes.push_back(c.node_name(n));
    out.warnings.push_back(fmt::format("{} node(s) are in no {} and so in no block: {}", nodes.size(),
                                       layout.from_domains ? "accelerator domain" : "leaf switch", compress_hostlist(nodes)));
    t += "# note: " + out.warnings.back() + "\n";
  }
  t += lines;
  std::string list;
  for (long s : *sizes) list += (list.empty() ? "" : ",") + std::to_string(s);
  t += "BlockSizes=" + list + "\n";
  return out;
}

}  // namespace toposched
