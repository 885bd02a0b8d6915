#include "formats/resource_slices.h"

#include <map>

#include <fmt/format.h>

#include "topology/hostlist.h"
#include "topology/yaml_input.h"

namespace toposched {

namespace {

struct NodeGpus {
  int gpus = 0;
  std::string model;
  SourceLocation model_at;
};

// attributes.NAME.string (v1 / v1beta2) or basic.attributes.NAME.string (v1beta1).
YAML::Node attribute(const YAML::Node& device, const char* name) {
  YAML::Node attrs = device["attributes"];
  if (!attrs && device["basic"] && device["basic"].IsMap()) attrs = device["basic"]["attributes"];
  if (!attrs || !attrs.IsMap() || !attrs[name] || !attrs[name].IsMap()) return YAML::Node();
  return attrs[name]["string"];
}

class SliceReader {
 public:
  explicit SliceReader(const std::string& file) : in_(file) {}

  Result<DiscoveredTopology> read(std::string_view text) {
    auto root = in_.parse(text);
    if (!root) return tl::unexpected(root.error());
    if (!root->IsMap())
      return in_.error_at(*root, fmt::format("expected a ResourceSlice list (a mapping with 'items'), found {}",
                                             YamlInput::describe(*root)));
    if ((*root)["items"]) {
      TOPOSCHED_CHECK(in_.expect_sequence((*root)["items"], "'items'"));
      for (const auto& item : (*root)["items"]) TOPOSCHED_CHECK(read_slice(item));
    } else {
      TOPOSCHED_CHECK(read_slice(*root));
    }
    return finish();
  }

 private:
  YamlInput in_;
  std::map<std::string, NodeGpus> nodes_;  // by name
  std::vector<std::string> order_;         // first seen first
  std::vector<std::string> warnings_;
  int without_node_ = 0, other_devices_ = 0;

  Result<void> read_slice(const YAML::Node& item) {
    if (!item.IsMap() || !item["spec"] || !item["spec"].IsMap())
      return in_.error_at(item, fmt::format("expected a ResourceSlice with 'spec', found {}", YamlInput::describe(item)));
    const YAML::Node spec = item["spec"];
    TOPOSCHED_TRY(driver, in_.req_string(spec, "driver"));
    TOPOSCHED_TRY(node, in_.opt_string(spec, "nodeName"));
    if (!node || node->empty()) {
      ++without_node_;
      return {};
    }
    NodeGpus& n = entry(*node);
    if (!spec["devices"]) return {};
    TOPOSCHED_CHECK(in_.expect_sequence(spec["devices"], "'devices'"));
    for (const auto& device : spec["devices"]) {
      if (!device.IsMap())
        return in_.error_at(device, fmt::format("expected a device (a mapping), found {}", YamlInput::describe(device)));
      const YAML::Node type = attribute(device, "type");
      std::string type_value;
      if (type) {
        TOPOSCHED_TRY(t, in_.string(type, "type"));
        type_value = t;
      }
      const bool gpu = type_value == "gpu" || (type_value.empty() && driver == "gpu.nvidia.com");
      if (!gpu) {
        ++other_devices_;
        continue;
      }
      ++n.gpus;
      if (const YAML::Node product = attribute(device, "productName"); product && n.model.empty()) {
        TOPOSCHED_TRY(p, in_.string(product, "productName"));
        n.model = p;
        n.model_at = in_.where(product);
      }
    }
    return {};
  }

  NodeGpus& entry(const std::string& name) {
    auto [it, fresh] = nodes_.try_emplace(name);
    if (fresh) order_.push_back(name);
    return it->second;
  }

  Result<DiscoveredTopology> finish() {
    DiscoveredTopology out;
    out.source = in_.file();
    std::vector<std::string> no_gpu;
    for (const std::string& name : order_) {
      const NodeGpus& g = nodes_.at(name);
      if (g.gpus == 0) {
        no_gpu.push_back(name);
        continue;
      }
      DiscoveredNode node;
      node.name = name;
      node.gpu_count = g.gpus;
      node.gpu_model = g.model;
      node.gpu_model_at = g.model_at;
      out.nodes.push_back(std::move(node));
    }
    if (out.nodes.empty())
      return make_error(ErrorCode::kParse, "no ResourceSlice lists a GPU device on a node (spec.nodeName with "
                                           "devices of type gpu)",
                        SourceLocation{in_.file(), 1, 1});
    if (!no_gpu.empty())
      out.warnings.push_back(fmt::format("skipped {} node(s) whose slices list no GPU: {}", no_gpu.size(),
                                         compress_hostlist(no_gpu)));
    if (without_node_ > 0)
      out.warnings.push_back(fmt::format("skipped {} slice(s) without spec.nodeName (pools not on one node)",
                                         without_node_));
    if (other_devices_ > 0)
      out.warnings.push_back(fmt::format("ignored {} device(s) that are not whole GPUs (MIG partitions, other "
                                         "drivers' devices)",
                                         other_devices_));
    return out;
  }
};

}  // namespace

Result<DiscoveredTopology> read_resource_slices(std::string_view text, const std::string& file) {
  try {
    SliceReader reader(file);
    return reader.read(text);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}

}  // namespace toposched
