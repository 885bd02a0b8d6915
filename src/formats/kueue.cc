#include "formats/kueue.h"

#include <fmt/format.h>

namespace toposched {

namespace {
// Kueue's Topology API versions, newest first, with the ResourceFlavor version that goes
// with each (docs/export.md lists the Kueue releases that serve them).
struct KueueApi {
  std::string_view topology;
  std::string_view resource_flavor;
};
constexpr KueueApi kKueueApis[] = {
    {"v1beta2", "v1beta2"},   // Kueue v0.15 and later (the current API)
    {"v1beta1", "v1beta1"},   // Kueue v0.14 to today (deprecated since v0.16)
    {"v1alpha1", "v1beta1"},  // Kueue v0.9 to v0.13
};
}  // namespace

Result<ExportOutput> write_kueue(const Cluster& c, const ExportOptions& options) {
  using Json = nlohmann::ordered_json;
  const KueueApi* api = nullptr;
  for (const auto& a : kKueueApis)
    if (a.topology == options.kueue_version) api = &a;
  if (!api)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--kueue-version must be v1beta2, v1beta1 or v1alpha1, not '{}'", options.kueue_version));
  ExportOutput out;
  LabelLevels levels = label_levels(c);
  if (levels.labels.size() > 16)
    return make_error(ErrorCode::kUnsupported, fmt::format("Kueue allows at most 16 topology levels; this cluster needs {}", levels.labels.size()));
  for (const auto& d : levels.dropped)
    out.warnings.push_back(fmt::format("level {} is left out: its switches do not nest inside the accelerator domains", d));
  for (const auto& w : levels.not_on_every_node) out.warnings.push_back(w);
  std::string topology = k8s_object_name(options.object_name.empty() ? c.name() : options.object_name);
  Json levels_json = Json::array();
  for (const auto& l : levels.labels) levels_json.push_back({{"nodeLabel", l}});
  std::string& t = out.text;
  t += "# Kueue Topology-Aware Scheduling: a Topology and one ResourceFlavor per node type.\n";
  t += "# " + generated_by(c) + "\n";
  t += "# The nodes need the labels of 'toposched export --to k8s-labels'.\n";
  for (const auto& w : out.warnings) t += "# note: " + w + "\n";
  t += json_to_yaml(Json{{"apiVersion", fmt::format("kueue.x-k8s.io/{}", api->topology)},
                         {"kind", "Topology"},
                         {"metadata", {{"name", topology}}},
                         {"spec", {{"levels", levels_json}}}});
  for (std::uint32_t ti = 0; ti < c.node_type_count(); ++ti) {
    const NodeType& type = c.node_type_at(NodeTypeId(ti));
    t += "---\n";
    t += json_to_yaml(Json{{"apiVersion", fmt::format("kueue.x-k8s.io/{}", api->resource_flavor)},
                           {"kind", "ResourceFlavor"},
                           {"metadata", {{"name", k8s_object_name(topology + "-" + type.name)}}},
                           {"spec", {{"nodeLabels", {{std::string(kNodeTypeLabel), k8s_label_value(type.name)}}},
                                     {"topologyName", topology}}}});
  }
  return out;
}

}  // namespace toposched
