#include "formats/kueue.h"

#include <fmt/format.h>

namespace toposched {

Result<ExportOutput> write_kueue(const Cluster& c, const ExportOptions& options) {
  using Json = nlohmann::ordered_json;
  ExportOutput out;
  LabelLevels levels = label_levels(c);
  if (levels.labels.size() > 16)
    return make_error(ErrorCode::kUnsupported, fmt::format("Kueue allows at most 16 topology levels; this cluster needs {}", levels.labels.size()));
  for (const auto& d : levels.dropped)
    out.warnings.push_back(fmt::format("level {} is left out: its switches do not nest inside the accelerator domains", d));
  std::string topology = k8s_object_name(options.object_name.empty() ? c.name() : options.object_name);
  Json levels_json = Json::array();
  for (const auto& l : levels.labels) levels_json.push_back({{"nodeLabel", l}});
  std::string& t = out.text;
  t += "# Kueue Topology-Aware Scheduling: a Topology and one ResourceFlavor per node type.\n";
  t += "# " + generated_by(c) + "\n";
  t += "# The nodes need the labels of 'toposched export --to k8s-labels'.\n";
  for (const auto& w : out.warnings) t += "# note: " + w + "\n";
  t += json_to_yaml(Json{{"apiVersion", "kueue.x-k8s.io/v1alpha1"},
                         {"kind", "Topology"},
                         {"metadata", {{"name", topology}}},
                         {"spec", {{"levels", levels_json}}}});
  for (std::uint32_t ti = 0; ti < c.node_type_count(); ++ti) {
    const NodeType& type = c.node_type_at(NodeTypeId(ti));
    t += "---\n";
    t += json_to_yaml(Json{{"apiVersion", "kueue.x-k8s.io/v1beta1"},
                           {"kind", "ResourceFlavor"},
                           {"metadata", {{"name", k8s_object_name(topology + "-" + type.name)}}},
                           {"spec", {{"nodeLabels", {{std::string(kNodeTypeLabel), k8s_label_value(type.name)}}},
                                     {"topologyName", topology}}}});
  }
  return out;
}

}  // namespace toposched
