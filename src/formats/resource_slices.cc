#include "formats/resource_slices.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "topology/hostlist.h"
#include "topology/yaml_input.h"

namespace toposched {

namespace {

constexpr const char* kPciBusId = "resource.kubernetes.io/pciBusID";
constexpr const char* kPcieRoot = "resource.kubernetes.io/pcieRoot";
constexpr const char* kNumaNode = "resource.kubernetes.io/numaNode";

// One GPU device as its slice lists it.
struct SliceGpu {
  std::string uuid, pci_bus_id, pcie_root;
  int numa = -1;
};

struct NodeGpus {
  std::vector<SliceGpu> gpus;
  std::string model;
  SourceLocation model_at;
};

// attributes.NAME.KIND (v1 / v1beta2) or basic.attributes.NAME.KIND (v1beta1); KIND is
// "string", "int", "version" or "bool". nullopt when absent (a default YAML::Node is a
// defined null, so absence cannot be an empty node). Const lookups only: yaml-cpp's
// non-const operator[] adds a missing key to the map.
std::optional<YAML::Node> attribute(const YAML::Node& device, const char* name, const char* kind = "string") {
  const YAML::Node basic = device["basic"];
  const YAML::Node attrs = device["attributes"] ? device["attributes"]
                           : basic && basic.IsMap() ? basic["attributes"]
                                                    : YAML::Node();
  if (!attrs || !attrs.IsMap()) return std::nullopt;
  const YAML::Node attr = attrs[name];
  if (!attr || !attr.IsMap()) return std::nullopt;
  const YAML::Node value = attr[kind];
  if (!value) return std::nullopt;
  return value;
}

bool hex_digits(std::string_view s, std::size_t lo, std::size_t hi) {
  return s.size() >= lo && s.size() <= hi &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// Extended BDF, as Linux names PCI devices: DOMAIN:BUS:DEVICE.FUNCTION ("0000:1b:00.0";
// nvidia-smi's 8-digit domain is accepted too).
bool is_bdf(std::string_view s) {
  const auto c1 = s.find(':'), c2 = s.find(':', c1 + 1), dot = s.rfind('.');
  if (c1 == std::string_view::npos || c2 == std::string_view::npos || dot == std::string_view::npos || dot < c2)
    return false;
  return hex_digits(s.substr(0, c1), 4, 8) && hex_digits(s.substr(c1 + 1, c2 - c1 - 1), 2, 2) &&
         hex_digits(s.substr(c2 + 1, dot - c2 - 1), 2, 2) && s.size() == dot + 2 && s[dot + 1] >= '0' &&
         s[dot + 1] <= '7';
}

// A PCIe root complex as Kubernetes names it: "pci" DOMAIN ":" BUS ("pci0000:00").
bool is_pcie_root(std::string_view s) {
  if (!s.starts_with("pci")) return false;
  s.remove_prefix(3);
  const auto colon = s.find(':');
  return colon != std::string_view::npos && hex_digits(s.substr(0, colon), 4, 8) &&
         hex_digits(s.substr(colon + 1), 2, 2);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
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
  std::unordered_map<std::string, SourceLocation> uuids_;  // each GPU uuid: where first listed
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
      const std::optional<YAML::Node> type = attribute(device, "type");
      std::string type_value;
      if (type) {
        TOPOSCHED_TRY(t, in_.string(*type, "type"));
        type_value = t;
      }
      const bool gpu = type_value == "gpu" || (type_value.empty() && driver == "gpu.nvidia.com");
      if (!gpu) {
        ++other_devices_;
        continue;
      }
      if (const auto product = attribute(device, "productName"); product && n.model.empty()) {
        TOPOSCHED_TRY(p, in_.string(*product, "productName"));
        n.model = p;
        n.model_at = in_.where(*product);
      }
      TOPOSCHED_TRY(slice_gpu, read_gpu(device, n));
      n.gpus.push_back(std::move(slice_gpu));
    }
    return {};
  }

  // A GPU device's identity and PCIe place; each value checked where it is written.
  Result<SliceGpu> read_gpu(const YAML::Node& device, const NodeGpus& node) {
    SliceGpu g;
    if (const auto uuid_at = attribute(device, "uuid")) {
      const YAML::Node& uuid = *uuid_at;
      TOPOSCHED_TRY(u, in_.string(uuid, "uuid"));
      const SourceLocation at = in_.where(uuid);
      auto [it, fresh] = uuids_.try_emplace(u, at);
      if (!fresh)
        return in_.error_at(uuid, fmt::format("GPU uuid '{}' is listed twice (first at line {}, column {})", u,
                                              it->second.line, it->second.column));
      g.uuid = u;
    }
    if (const auto bus_at = attribute(device, kPciBusId)) {
      const YAML::Node& bus = *bus_at;
      TOPOSCHED_TRY(b, in_.string(bus, kPciBusId));
      if (!is_bdf(b))
        return in_.error_at(bus, fmt::format("expected a PCI bus id DOMAIN:BUS:DEVICE.FUNCTION such as "
                                             "'0000:1b:00.0', found '{}'",
                                             b));
      g.pci_bus_id = lower(b);
      for (const SliceGpu& other : node.gpus)
        if (other.pci_bus_id == g.pci_bus_id)
          return in_.error_at(bus, fmt::format("PCI bus id '{}' is listed twice on this node", b));
    }
    if (const auto root_at = attribute(device, kPcieRoot)) {
      const YAML::Node& root = *root_at;
      TOPOSCHED_TRY(r, in_.string(root, kPcieRoot));
      if (!is_pcie_root(r))
        return in_.error_at(root, fmt::format("expected a PCIe root complex pciDOMAIN:BUS such as 'pci0000:00', "
                                              "found '{}'",
                                              r));
      g.pcie_root = lower(r);
    }
    if (const auto numa = attribute(device, kNumaNode, "int")) {
      TOPOSCHED_TRY(x, in_.whole_number(*numa, kNumaNode, 0, 1023));
      g.numa = static_cast<int>(x);
    }
    return g;
  }

  NodeGpus& entry(const std::string& name) {
    auto [it, fresh] = nodes_.try_emplace(name);
    if (fresh) order_.push_back(name);
    return it->second;
  }

  std::vector<std::string> unordered_;  // nodes with a GPU without pciBusID

  // The node's GPUs in PCI bus order, when every one says its bus id; else null.
  std::shared_ptr<const GpuPcieLayout> layout_of(NodeGpus& g, const std::string& name) {
    if (std::any_of(g.gpus.begin(), g.gpus.end(), [](const SliceGpu& x) { return x.pci_bus_id.empty(); })) {
      unordered_.push_back(name);
      return nullptr;
    }
    std::sort(g.gpus.begin(), g.gpus.end(),
              [](const SliceGpu& a, const SliceGpu& b) { return a.pci_bus_id < b.pci_bus_id; });
    auto layout = std::make_shared<GpuPcieLayout>();
    for (SliceGpu& x : g.gpus) {
      layout->uuid.push_back(std::move(x.uuid));
      layout->pci_bus_id.push_back(std::move(x.pci_bus_id));
      layout->pcie_root.push_back(std::move(x.pcie_root));
      layout->numa.push_back(x.numa);
    }
    return layout;
  }

  Result<DiscoveredTopology> finish() {
    DiscoveredTopology out;
    out.source = in_.file();
    std::vector<std::string> no_gpu;
    for (const std::string& name : order_) {
      NodeGpus& g = nodes_.at(name);
      if (g.gpus.empty()) {
        no_gpu.push_back(name);
        continue;
      }
      DiscoveredNode node;
      node.name = name;
      node.gpu_count = static_cast<int>(g.gpus.size());
      node.gpu_model = g.model;
      node.gpu_model_at = g.model_at;
      node.pcie = layout_of(g, name);
      out.nodes.push_back(std::move(node));
    }
    if (!unordered_.empty())
      out.warnings.push_back(fmt::format("{} node(s) list GPUs without resource.kubernetes.io/pciBusID (their PCI "
                                         "order, and so toposched's GPU numbering, is unknown): {}",
                                         unordered_.size(), compress_hostlist(unordered_)));
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
