#include "formats/gcp_instances.h"

#include <optional>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "formats/network_paths.h"
#include "topology/hardware.h"
#include "topology/text.h"
#include "topology/yaml_input.h"

namespace toposched {
namespace {

// Google's accelerator-optimized machine families (cloud.google.com/compute/docs/
// accelerator-optimized-machines): the GPU, whether a sub-block is a multi-node NVLink
// domain, and the line rate of each GPU's NIC where the family has one RDMA NIC per GPU
// (compute/docs/gpus/gpu-network-bandwidth: A4X Max 4 x 800G, A4X 4 x 400G, A4 and A3 Ultra
// 8 x 400G, A3 Mega 8 x 200G; A3 High and Edge share fewer NICs between their GPUs, A2 has
// no GPU NICs: 0 leaves the rate to --nic-gbit).
struct MachineFamily {
  std::string_view prefix;  // machine type name up to its GPU count ("a3-megagpu-")
  std::string_view gpu;     // a find_gpu_product name
  bool nvlink_domain;       // the sub-block is an NVLink domain
  double nic_gbit;
};

constexpr MachineFamily kFamilies[] = {
    {"a4x-maxgpu-", "GB300", true, 800}, {"a4x-highgpu-", "GB200", true, 400}, {"a4-highgpu-", "B200", false, 400},
    {"a3-ultragpu-", "H200", false, 400}, {"a3-megagpu-", "H100", false, 200}, {"a3-highgpu-", "H100", false, 0},
    {"a3-edgegpu-", "H100", false, 0},    {"a2-ultragpu-", "A100", false, 0}, {"a2-highgpu-", "A100 40GB", false, 0},
    {"a2-megagpu-", "A100 40GB", false, 0},
};

// The last part of a resource URL ("https://.../machineTypes/a3-megagpu-8g" -> "a3-megagpu-8g").
std::string_view last_path_part(std::string_view url) {
  const std::size_t slash = url.rfind('/');
  return slash == std::string_view::npos ? url : url.substr(slash + 1);
}

const MachineFamily* family_of(std::string_view machine_type) {
  for (const auto& f : kFamilies)
    if (machine_type.starts_with(f.prefix)) return &f;
  return nullptr;
}

// The GPU count a machine type's name carries: "a3-highgpu-4g" -> 4, "a4x-maxgpu-4g-metal"
// -> 4; 0 when it has none.
int gpus_in_machine_type(std::string_view machine_type) {
  std::size_t start = 0;
  while (start <= machine_type.size()) {
    std::size_t end = machine_type.find('-', start);
    if (end == std::string_view::npos) end = machine_type.size();
    std::string_view part = machine_type.substr(start, end - start);
    if (part.size() >= 2 && part.size() <= 3 && part.back() == 'g') {
      int n = 0;
      bool digits = true;
      for (char c : part.substr(0, part.size() - 1)) {
        if (c < '0' || c > '9') digits = false;
        n = n * 10 + (c - '0');
      }
      if (digits && n > 0) return n;
    }
    start = end + 1;
  }
  return 0;
}

// The product an accelerator type names: "nvidia-h100-mega-80gb" -> "H100", "nvidia-tesla-a100"
// -> "A100 40GB" (Google's A100 40GB; the 80GB one is "nvidia-a100-80gb"), "nvidia-l4" -> "L4".
std::string product_of_accelerator(std::string_view type) {
  std::string name = ascii_lower(last_path_part(type));
  for (std::string_view prefix : {"nvidia-", "tesla-"})
    if (std::string_view(name).starts_with(prefix)) name.erase(0, prefix.size());
  const std::string first = name.substr(0, name.find('-'));
  if (first == "a100" && name.find("80gb") == std::string::npos) return "A100 40GB";
  return ascii_upper(first);
}

// What one instance contributes, before the chains are joined into switches.
struct Instance {
  DiscoveredNode node;
  std::vector<std::string> chain;  // farthest first
};

// Where an instance runs: its switches, farthest first, and its sub-block (empty when the
// API gave none).
struct Location {
  std::vector<std::string> chain;
  std::string subblock;
};

class GcpReader {
 public:
  explicit GcpReader(const std::string& file) : in_(file) {}

  Result<DiscoveredTopology> read(std::string_view text) {
    TOPOSCHED_TRY(root, in_.parse(text));
    TOPOSCHED_TRY(instances, instance_lists(root));
    DiscoveredTopology out;
    out.source = in_.file();
    NetworkPaths paths("VM");
    for (const YAML::Node& list : instances)
      for (const YAML::Node& item : list) {
        TOPOSCHED_TRY(inst, read_instance(item));
        if (!inst) continue;
        paths.add(out.nodes.size(), std::move(inst->chain));
        out.nodes.push_back(std::move(inst->node));
      }
    paths.finish(out);
    warn_about_names(out.warnings, not_running_, "VM(s) not RUNNING left out (a stopped VM has no physical host)");
    warn_about_names(out.warnings, without_gpus_,
                     "VM(s) without GPUs (no guestAccelerators, no GPU machine type) left out");
    warn_about_names(out.warnings, unknown_gpus_,
                     "VM(s) whose accelerator type names no GPU product toposched knows take --gpu-model");
    return out;
  }

 private:
  // The sequences of instances in the document, whichever of the four shapes it has.
  Result<std::vector<YAML::Node>> instance_lists(const YAML::Node& root) const {
    if (root.IsSequence()) return std::vector<YAML::Node>{root};
    if (root.IsMap() && root["items"]) {
      const YAML::Node items = root["items"];
      if (items.IsSequence()) return std::vector<YAML::Node>{items};
      if (!items.IsMap())
        return in_.error_at(items, fmt::format("expected 'items' to be a list of instances or a map of zones, "
                                               "found {}",
                                               YamlInput::describe(items)));
      std::vector<YAML::Node> lists;
      for (const auto& zone : items) {  // aggregatedList: {"zones/Z": {"instances": [...]} or {"warning": ...}}
        if (!zone.second.IsMap())
          return in_.error_at(zone.second, fmt::format("expected a zone's entry (a mapping), found {}",
                                                       YamlInput::describe(zone.second)));
        if (const YAML::Node list = zone.second["instances"]) {
          TOPOSCHED_CHECK(in_.expect_sequence(list, "'instances'"));
          lists.push_back(list);
        }
      }
      return lists;
    }
    if (root.IsMap() && root["name"]) {  // one instance: gcloud compute instances describe
      YAML::Node list(YAML::NodeType::Sequence);
      list.push_back(root);
      return std::vector<YAML::Node>{list};
    }
    return in_.error_at(root, fmt::format("expected `gcloud compute instances list --format=json` output (a list "
                                          "of instances) or the Compute API's {{\"items\": ...}}, found {}",
                                          YamlInput::describe(root)));
  }

  // One instance; nullopt when it is left out (not running, no GPUs).
  Result<std::optional<Instance>> read_instance(const YAML::Node& item) {
    if (!item.IsMap())
      return in_.error_at(item, fmt::format("expected an instance (a mapping), found {}", YamlInput::describe(item)));
    TOPOSCHED_TRY(name, in_.req_string(item, "name"));
    if (name.empty()) return in_.error_at(item["name"], "expected an instance name, found an empty one");
    if (!names_.insert(name).second) return in_.error_at(item["name"], fmt::format("instance '{}' appears twice", name));
    TOPOSCHED_TRY(status, in_.opt_string(item, "status"));
    if (status && *status != "RUNNING") {
      not_running_.push_back(name);
      return std::optional<Instance>();
    }
    Instance inst;
    inst.node.name = name;
    TOPOSCHED_TRY(machine_type, in_.opt_string(item, "machineType"));
    const MachineFamily* family = machine_type ? family_of(last_path_part(*machine_type)) : nullptr;
    TOPOSCHED_CHECK(read_gpus(item, machine_type, family, inst.node));
    if (inst.node.gpu_count == 0) {
      without_gpus_.push_back(name);
      return std::optional<Instance>();
    }
    if (family) inst.node.nic_gbit = family->nic_gbit;
    TOPOSCHED_TRY(location, read_location(item));
    if (family && family->nvlink_domain) inst.node.domain = location.subblock;
    inst.chain = std::move(location.chain);
    return std::optional<Instance>(std::move(inst));
  }

  // guestAccelerators when the instance lists them, else its machine type's GPUs.
  Result<void> read_gpus(const YAML::Node& item, const std::optional<std::string>& machine_type,
                         const MachineFamily* family, DiscoveredNode& node) {
    if (const YAML::Node accelerators = item["guestAccelerators"]) {
      TOPOSCHED_CHECK(in_.expect_sequence(accelerators, "'guestAccelerators'"));
      for (const auto& a : accelerators) {
        if (!a.IsMap())
          return in_.error_at(a, fmt::format("expected an accelerator (a mapping), found {}", YamlInput::describe(a)));
        TOPOSCHED_TRY(type, in_.req_string(a, "acceleratorType"));
        if (!a["acceleratorCount"]) return in_.error_at(a, "expected 'acceleratorCount' in the accelerator");
        TOPOSCHED_TRY(count, in_.whole_number(a["acceleratorCount"], "acceleratorCount", 1, 64));
        const std::string product = product_of_accelerator(type);
        if (node.gpu_count > 0 && product != node.gpu_model)
          return in_.error_at(a, fmt::format("expected one GPU product per VM, found '{}' beside '{}'", product,
                                             node.gpu_model));
        if (node.gpu_count + count > 64)
          return in_.error_at(a["acceleratorCount"], fmt::format("expected at most 64 GPUs per VM, found {}",
                                                                 node.gpu_count + count));
        node.gpu_model = product;
        node.gpu_model_at = in_.where(a["acceleratorType"]);
        node.gpu_count += static_cast<int>(count);
      }
      if (node.gpu_count > 0 && !find_gpu_product(node.gpu_model)) {
        unknown_gpus_.push_back(node.name);
        node.gpu_model.clear();
      }
      return {};
    }
    if (family) {
      node.gpu_model = std::string(family->gpu);
      node.gpu_model_at = in_.where(item["machineType"]);
      node.gpu_count = gpus_in_machine_type(last_path_part(*machine_type));
    }
    return {};
  }

  // The instance's switches, farthest first: cluster, block, sub-block.
  Result<Location> read_location(const YAML::Node& item) const {
    Location where;
    std::vector<std::string>& chain = where.chain;
    const YAML::Node status = item["resourceStatus"];
    if (!status) return where;
    if (!status.IsMap())
      return in_.error_at(status, fmt::format("expected 'resourceStatus' to be a mapping, found {}",
                                              YamlInput::describe(status)));
    if (const YAML::Node topology = status["physicalHostTopology"]) {
      if (!topology.IsMap())
        return in_.error_at(topology, fmt::format("expected 'physicalHostTopology' to be a mapping, found {}",
                                                  YamlInput::describe(topology)));
      for (std::string_view key : {"cluster", "block", "subblock"}) {
        TOPOSCHED_TRY(id, in_.opt_string(topology, key));
        if (!id || id->empty()) continue;
        if (key == "subblock") where.subblock = *id;
        chain.push_back(std::move(*id));
      }
      return where;
    }
    TOPOSCHED_TRY(host, in_.opt_string(status, "physicalHost"));
    if (!host) return where;
    std::size_t start = 0;
    while (start < host->size()) {  // "/CLUSTER/BLOCK/HOST": every part but the last
      std::size_t end = host->find('/', start);
      if (end == std::string::npos) end = host->size();
      if (end > start) chain.push_back(host->substr(start, end - start));
      start = end + 1;
    }
    if (!chain.empty()) chain.pop_back();  // the host itself
    if (chain.size() > 16)
      return in_.error_at(status["physicalHost"],
                          fmt::format("expected at most 16 parts in 'physicalHost', found {}", chain.size() + 1));
    return where;
  }

  YamlInput in_;
  std::unordered_set<std::string> names_;
  std::vector<std::string> not_running_, without_gpus_, unknown_gpus_;
};

}  // namespace

Result<DiscoveredTopology> read_gcp_instances(std::string_view text, const std::string& file) {
  try {
    return GcpReader(file).read(text);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg), location_of(e.mark, file));
  }
}

}  // namespace toposched
