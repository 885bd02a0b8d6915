#include "formats/kai.h"

#include <fmt/format.h>

namespace toposched {

Result<ExportOutput> write_kai(const Cluster& c, const ExportOptions& options) {
  using Json = nlohmann::ordered_json;
  ExportOutput out;
  LabelLevels levels = label_levels(c);
  for (const auto& d : levels.dropped)
    out.warnings.push_back(fmt::format("level {} is left out: its switches do not nest inside the accelerator domains", d));
  for (const auto& w : levels.not_on_every_node) out.warnings.push_back(w);
  Json levels_json = Json::array();
  for (const auto& l : levels.labels) levels_json.push_back({{"nodeLabel", l}});
  out.text = "# KAI-Scheduler Topology; workloads refer to it with the kai.scheduler/topology annotation.\n";
  out.text += "# " + generated_by(c) + "\n";
  out.text += "# The nodes need the labels of 'toposched export --to k8s-labels'.\n";
  for (const auto& w : out.warnings) out.text += "# note: " + w + "\n";
  out.text += json_to_yaml(Json{{"apiVersion", "kai.scheduler/v1alpha1"},
                                {"kind", "Topology"},
                                {"metadata", {{"name", k8s_object_name(options.object_name.empty() ? c.name() : options.object_name)}}},
                                {"spec", {{"levels", levels_json}}}});
  return out;
}

}  // namespace toposched
