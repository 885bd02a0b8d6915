#include "formats/slurm_yaml.h"

#include <fmt/format.h>

#include "formats/slurm_tree.h"
#include "topology/hostlist.h"

namespace toposched {

Result<ExportOutput> write_slurm_yaml(const Cluster& c, const ExportOptions& options) {
  using Json = nlohmann::ordered_json;
  ExportOutput out;
  NameMap topo_names(NameMap::Target::kSlurm);
  Json doc = Json::array();
  SlurmTree tree = slurm_tree(c);
  out.warnings = tree.warnings;
  if (!tree.switches.empty()) {
    Json switches = Json::array();
    for (const auto& sw : tree.switches) {
      Json j = {{"switch", sw.name}};
      if (!sw.switches.empty()) j["children"] = compress_hostlist(sw.switches);
      if (!sw.nodes.empty()) j["nodes"] = compress_hostlist(sw.nodes);
      switches.push_back(j);
    }
    doc.push_back({{"topology", topo_names(c.name() + "-tree")}, {"cluster_default", true}, {"tree", {{"switches", switches}}}});
  }
  BlockLayout layout = node_blocks(c);
  if (!layout.blocks.empty()) {
    auto sizes = block_sizes(layout, options.block_sizes);
    if (!sizes) return tl::unexpected(sizes.error());
    NameMap names(NameMap::Target::kSlurm);
    Json blocks = Json::array();
    for (const auto& b : layout.blocks) {
      std::vector<std::string> nodes;
      for (NodeId n : b.nodes) nodes.push_back(c.node_name(n));
      blocks.push_back({{"block", names(b.name)}, {"nodes", compress_hostlist(nodes)}});
    }
    doc.push_back({{"topology", topo_names(c.name() + "-block")},
                   {"cluster_default", tree.switches.empty()},
                   {"block", {{"block_sizes", *sizes}, {"blocks", blocks}}}});
  }
  if (doc.empty()) doc.push_back({{"topology", topo_names(c.name() + "-flat")}, {"cluster_default", true}, {"flat", true}});
  out.text = "# topology.yaml for Slurm 25.05+ (replaces topology.conf; partitions pick one with Topology=NAME).\n";
  out.text += "# " + generated_by(c) + "\n";
  for (const auto& w : out.warnings) out.text += "# note: " + w + "\n";
  out.text += json_to_yaml(doc);
  return out;
}

}  // namespace toposched
