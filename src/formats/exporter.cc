#include "formats/exporter.h"

#include <fmt/format.h>

#include "formats/dot.h"
#include "formats/gres_conf.h"
#include "formats/k8s_labels.h"
#include "formats/kai.h"
#include "formats/nfd.h"
#include "formats/kueue.h"
#include "formats/native_spec.h"
#include "formats/slurm_block.h"
#include "formats/slurm_tree.h"
#include "formats/slurm_yaml.h"
#include "formats/volcano.h"

namespace toposched {
namespace {

Result<ExportOutput> write_json(const Cluster& c, const ExportOptions&) {
  TOPOSCHED_TRY(text, write_native_json(c));
  return ExportOutput{std::move(text), {}};
}
Result<ExportOutput> write_yaml(const Cluster& c, const ExportOptions&) { return ExportOutput{write_native_yaml(c), {}}; }

}  // namespace

const Registry<ExportWriter>& export_formats() {
  static const Registry<ExportWriter> kFormats("export format", {
      {"slurm-tree", "Slurm topology.conf for topology/tree (SwitchName= ... Switches=/Nodes=)", write_slurm_tree},
      {"slurm-block", "Slurm topology.conf for topology/block, blocks as NVIDIA Topograph lays them out (BlockName=, BlockSizes=)", write_slurm_block},
      {"slurm-yaml", "Slurm 25.05+ topology.yaml (a tree and a block topology, or per partition: --topologies)", write_slurm_yaml},
      {"gres", "Slurm gres.conf GPU lines with Cores= and NVLink Links=", write_gres_conf},
      {"k8s-labels", "Kubernetes node labels with Topograph's keys (--style kubectl|patch)", write_k8s_labels},
      {"kueue", "Kueue Topology + ResourceFlavor per node type", write_kueue},
      {"volcano", "Volcano HyperNode per switch and NVLink domain (--members exact|regex)", write_volcano},
      {"kai", "KAI-Scheduler Topology", write_kai},
      {"nfd", "Node Feature Discovery NodeFeature per node and NodeFeatureGroup per switch and domain, as Topograph's nfd engine", write_nfd},
      {"dot", "Graphviz DOT: tiers as nested clusters", write_dot},
      {"json", "native cluster spec, JSON", write_json},
      {"yaml", "native cluster spec, YAML", write_yaml},
  });
  return kFormats;
}

Result<ExportOutput> export_cluster(const Cluster& cluster, std::string_view format, const ExportOptions& options) {
  TOPOSCHED_TRY(write, export_formats().find(format));
  return write(cluster, options);
}

}  // namespace toposched
