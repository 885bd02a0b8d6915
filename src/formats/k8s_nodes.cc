#include "formats/k8s_nodes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <charconv>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <simdjson.h>

#include "formats/json_fast_path.h"
#include "formats/k8s_quantity.h"
#include "topology/hostlist.h"
#include "topology/text.h"
#include "topology/yaml_input.h"

namespace toposched {
namespace {

constexpr int kMaxTiers = 16;

// Role of a label: tiers 0..15, then these. kAwsLayer1 + N - 1 is EKS's
// topology.k8s.aws/network-node-layer-N, numbered from the top (1) down to the node's leaf,
// whose depth varies (3 or 4 layers); kGceSubblock is GKE's sub-block, the leaf and, on A4X
// (kInstanceType), the NVLink domain too.
enum Role : int {
  kDomain = 100,
  kSubDomain,
  kGpuCount,
  kGpuProduct,
  kInstanceType,
  kGceSubblock,
  kAwsLayer1,
};
constexpr int kAwsLayers = 4;
constexpr int kRoleSlots = kMaxTiers + (kAwsLayer1 + kAwsLayers - kDomain);

Result<int> parse_role(std::string_view r) {
  if (r == "leaf") return 0;
  if (r == "spine") return 1;
  if (r == "core") return 2;
  if (r == "domain") return kDomain;
  if (r == "sub-domain") return kSubDomain;
  if (r == "gpu-count") return kGpuCount;
  if (r == "gpu-product") return kGpuProduct;
  if (r.starts_with("tier-")) {
    int n = -1;
    auto d = r.substr(5);
    auto [p, ec] = std::from_chars(d.data(), d.data() + d.size(), n);
    if (ec == std::errc() && p == d.data() + d.size() && n >= 0 && n < kMaxTiers) return n;
  }
  return make_error(
      ErrorCode::kInvalidArgument,
      fmt::format("--label-map: unknown role '{}'; expected tier-N (N in 0..{}), leaf, spine, core, domain, "
                  "sub-domain, gpu-count or gpu-product",
                  r, kMaxTiers - 1));
}

std::vector<std::pair<std::string, int>> builtin_labels() {
  std::vector<std::pair<std::string, int>> m;
  for (int t = 0; t < kMaxTiers; ++t) m.emplace_back(fmt::format("fabric.topograph.run/tier-{}", t), t);
  m.emplace_back("network.topology.nvidia.com/leaf", 0);
  m.emplace_back("network.topology.nvidia.com/spine", 1);
  m.emplace_back("network.topology.nvidia.com/core", 2);
  m.emplace_back("network.topology.nvidia.com/block", 0);       // Topograph v0.1's names
  m.emplace_back("network.topology.nvidia.com/datacenter", 2);
  m.emplace_back("cloud.google.com/gce-topology-block", 1);       // GKE
  m.emplace_back("cloud.google.com/gce-topology-subblock", kGceSubblock);
  for (int n = 1; n <= kAwsLayers; ++n)                          // EKS
    m.emplace_back(fmt::format("topology.k8s.aws/network-node-layer-{}", n), kAwsLayer1 + n - 1);
  m.emplace_back("accelerator.topograph.run/domain", kDomain);
  m.emplace_back("network.topology.nvidia.com/accelerator", kDomain);
  m.emplace_back("nvidia.com/gpu.clique", kDomain);
  m.emplace_back("topology.k8s.aws/ultraserver-id", kDomain);     // an EKS GB200 UltraServer's NVL72
  m.emplace_back("accelerator.topograph.run/sub-domain", kSubDomain);
  m.emplace_back("nvidia.com/gpu.count", kGpuCount);
  m.emplace_back("nvidia.com/gpu.product", kGpuProduct);
  m.emplace_back("node.kubernetes.io/instance-type", kInstanceType);
  return m;
}

using LabelKeys = std::vector<std::pair<std::string, int>>;

// The keys of status.capacity read: the node's memory (the kubelet's MemTotal) and the NVIDIA
// device plugin's GPU count.
enum CapacityKey : std::size_t { kCapacityMemory, kCapacityGpus, kCapacityKeys };
constexpr std::string_view kCapacityNames[kCapacityKeys] = {"memory", "nvidia.com/gpu"};
constexpr std::string_view kCapacityFields[kCapacityKeys] = {"status.capacity.memory",
                                                             "status.capacity[\"nvidia.com/gpu\"]"};  // in messages

// The label keys to read, with their roles: the --label-map entries first (they win), then
// the built-in ones.
Result<LabelKeys> label_keys(const std::vector<std::string>& label_map) {
  LabelKeys keys;
  for (const auto& entry : label_map) {
    auto eq = entry.rfind('=');
    if (eq == std::string::npos || eq == 0)
      return make_error(
          ErrorCode::kInvalidArgument,
          fmt::format("--label-map: expected KEY=ROLE (e.g. example.com/rack=tier-0), found '{}'", entry));
    TOPOSCHED_TRY(role, parse_role(std::string_view(entry).substr(eq + 1)));
    keys.emplace_back(entry.substr(0, eq), role);
  }
  for (auto& k : builtin_labels()) keys.push_back(std::move(k));
  return keys;
}

// The Node objects of a NodeList (or the one Node the document is).
Result<std::vector<YAML::Node>> node_items(YamlInput& in, const YAML::Node& root) {
  if (!root.IsMap())
    return in.error_at(root, fmt::format("expected a Kubernetes NodeList (a mapping with 'items'), found {}",
                                         YamlInput::describe(root)));
  std::vector<YAML::Node> items;
  if (root["items"]) {
    TOPOSCHED_CHECK(in.expect_sequence(root["items"], "'items'"));
    for (const auto& it : root["items"]) items.push_back(it);
  } else if (root["metadata"]) {
    items.push_back(root);
  } else {
    return in.error_at(root, "expected a Kubernetes NodeList ('items') or a Node ('metadata'), found neither");
  }
  return items;
}

// Reads Node objects one at a time into a DiscoveredTopology: the node's name, its labels by
// role, its memory and GPU capacity, then the switches its tier labels name, linked closest first. One reader per call.
// The parser is the caller's: a Node arrives as its name and the indices (into the label
// keys, ascending) of the label keys it has, with a NodeSource that gives each label's value
// and the positions for messages:
//   Result<std::string_view> value(std::size_t i)  the i-th label's value, or the error
//   Result<void> check_labels()  whether the labels are a mapping (checked after the name)
//   Result<std::optional<std::string_view>> capacity(CapacityKey k)  status.capacity's value, nullopt if absent
//   SourceLocation name_at()  SourceLocation label_at(std::size_t i)  SourceLocation capacity_at(CapacityKey k)
class NodeListReader {
 public:
  NodeListReader(const std::string& file, const LabelKeys& keys) : keys_(keys) { out_.source = file; }

  template <class NodeSource>
  Result<void> read_node(std::string name, const std::vector<std::size_t>& present, const NodeSource& src) {
    if (name.empty())
      return make_error(ErrorCode::kParse, "expected a node name, found an empty one", src.name_at());
    if (!seen_nodes_.insert(name).second)
      return make_error(ErrorCode::kParse, fmt::format("node '{}' appears twice", name), src.name_at());
    TOPOSCHED_CHECK(src.check_labels());
    DiscoveredNode node;
    node.name = std::move(name);
    std::vector<std::string> tier_value(kMaxTiers);
    TOPOSCHED_CHECK(read_labels(present, src, node, tier_value));
    TOPOSCHED_CHECK(read_memory(src, node));
    TOPOSCHED_CHECK(read_capacity_gpus(src, node));
    if (node.domain.empty()) node.sub_domain.clear();
    link_switches(node, tier_value);
    if (node.switch_name.empty() && node.domain.empty() && node.gpu_count == 0 && node.gpu_model.empty()) {
      skipped_.push_back(node.name);  // no GPU and no topology label: a CPU or control-plane node
      return {};
    }
    out_.nodes.push_back(std::move(node));
    return {};
  }

  DiscoveredTopology finish() {
    if (!skipped_.empty())
      out_.warnings.push_back(fmt::format("skipped {} node(s) without GPU or topology labels: {}", skipped_.size(),
                                          compress_hostlist(skipped_)));
    for (int t = 0; t <= max_tier_; ++t) out_.tiers.push_back(tier_name_for_level(t));
    return std::move(out_);
  }

 private:
  // The first present label of each role: tier values into tier_value, the rest into node.
  template <class NodeSource>
  Result<void> read_labels(const std::vector<std::size_t>& present, const NodeSource& src, DiscoveredNode& node,
                           std::vector<std::string>& tier_value) {
    std::vector<bool> role_done(kRoleSlots, false);
    CloudLabels cloud;
    for (std::size_t i = 0; i < present.size(); ++i) {
      const auto& [key, role] = keys_[present[i]];
      TOPOSCHED_TRY(value, src.value(i));
      if (value.empty()) continue;
      const std::size_t slot =
          role < kMaxTiers ? static_cast<std::size_t>(role) : static_cast<std::size_t>(kMaxTiers + role - kDomain);
      if (role_done[slot]) continue;  // an earlier key of the same role wins
      role_done[slot] = true;
      if (role < kMaxTiers) {
        tier_value[static_cast<std::size_t>(role)] = value;
      } else if (role == kDomain) {
        node.domain = value;
      } else if (role == kSubDomain) {
        node.sub_domain = value;
      } else if (role == kGpuCount) {
        int n = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || p != value.data() + value.size() || n < 1 || n > 64)
          return make_error(ErrorCode::kParse,
                            fmt::format("label '{}': expected a GPU count in 1..64, found '{}'", key, value),
                            src.label_at(i));
        node.gpu_count = n;
      } else if (role == kGpuProduct) {
        node.gpu_model = value;
        node.gpu_model_at = src.label_at(i);
      } else if (role == kInstanceType) {
        cloud.instance_type = value;
      } else if (role == kGceSubblock) {
        cloud.gce_subblock = value;
      } else if (role >= kAwsLayer1 && role < kAwsLayer1 + kAwsLayers) {
        cloud.aws_layer[static_cast<std::size_t>(role - kAwsLayer1)] = value;
      }
    }
    apply_cloud_labels(cloud, node, tier_value);
    return {};
  }

  // The cloud labels whose tier depends on the node (EKS's layers, numbered from the top) or
  // on its machine (GKE's sub-block, an NVLink domain on A4X).
  struct CloudLabels {
    std::string instance_type, gce_subblock;
    std::array<std::string, kAwsLayers> aws_layer;
  };

  // EKS's layers fill the tiers of a node no other tier label placed: the deepest layer
  // given is its leaf (tier 0), each one above a tier higher, as AWS's NetworkNodes are read
  // (aws_topology.h). GKE's sub-block is the leaf where no other label gives one, and the
  // NVLink domain of an A4X or A4X Max VM (Google: "An NVLink domain, also referred to as a
  // sub-block"; gcp_instances.h).
  static void apply_cloud_labels(const CloudLabels& cloud, DiscoveredNode& node, std::vector<std::string>& tier_value) {
    const bool placed = std::any_of(tier_value.begin(), tier_value.end(), [](const std::string& v) { return !v.empty(); });
    int deepest = 0;
    for (int n = 1; n <= kAwsLayers; ++n)
      if (!cloud.aws_layer[static_cast<std::size_t>(n - 1)].empty()) deepest = n;
    if (!placed && deepest > 0)
      for (int n = 1; n <= deepest; ++n)
        tier_value[static_cast<std::size_t>(deepest - n)] = cloud.aws_layer[static_cast<std::size_t>(n - 1)];
    if (cloud.gce_subblock.empty()) return;
    if (tier_value[0].empty()) tier_value[0] = cloud.gce_subblock;
    if (node.domain.empty() && cloud.instance_type.starts_with("a4x-")) node.domain = cloud.gce_subblock;
  }

  // status.capacity[k] as a number: nullopt when absent; an error at its position when it is
  // not a quantity >= 0 (and, with `whole`, a whole number), `expected` saying what it should be.
  template <class NodeSource>
  static Result<std::optional<double>> capacity_value(const NodeSource& src, CapacityKey k, bool whole,
                                                      std::string_view expected) {
    TOPOSCHED_TRY(text, src.capacity(k));
    if (!text) return std::optional<double>();
    const auto value = parse_k8s_quantity(*text);
    if (!value || *value < 0 || (whole && *value != std::floor(*value)))
      return make_error(ErrorCode::kParse,
                        fmt::format("{}: expected {}, found '{}'", kCapacityFields[k], expected, text->substr(0, 40)),
                        src.capacity_at(k));
    return value;
  }

  // status.capacity.memory (the kubelet's MemTotal), when the Node has it, in whole GB.
  template <class NodeSource>
  static Result<void> read_memory(const NodeSource& src, DiscoveredNode& node) {
    TOPOSCHED_TRY(bytes, capacity_value(src, kCapacityMemory, false,
                                        "a quantity of bytes (e.g. 2113442596Ki or 2Ti)"));
    if (bytes) node.host_memory_gb = std::floor(*bytes / 1e9);
    return {};
  }

  // status.capacity["nvidia.com/gpu"] (the device plugin's count) as the GPU count of a node
  // without GPU Feature Discovery's nvidia.com/gpu.count label, which wins: with time-slicing
  // the capacity counts replicas. A count past what one node holds (64) is such a count and is
  // left out with a warning; 0 is a node without GPUs.
  template <class NodeSource>
  Result<void> read_capacity_gpus(const NodeSource& src, DiscoveredNode& node) {
    TOPOSCHED_TRY(count, capacity_value(src, kCapacityGpus, true, "a whole number of GPUs"));
    if (!count || node.gpu_count > 0 || *count == 0) return {};
    if (*count > 64) {
      out_.warnings.push_back(fmt::format("node '{}': capacity nvidia.com/gpu is {:g}, more than a node holds "
                                          "(time-slicing replicas?); its GPU count is left to labels or "
                                          "--gpus-per-node",
                                          node.name, *count));
      return {};
    }
    node.gpu_count = static_cast<int>(*count);
    return {};
  }

  // Switches of this node, closest first; each one's parent is the next present tier.
  void link_switches(DiscoveredNode& node, const std::vector<std::string>& tier_value) {
    std::string below;
    int below_tier = -1;
    for (int t = 0; t < kMaxTiers; ++t) {
      const std::string& v = tier_value[static_cast<std::size_t>(t)];
      if (v.empty()) continue;
      auto [it, inserted] = sw_index_.try_emplace({t, v}, out_.switches.size());
      std::string sw_name = v;
      if (inserted) {
        auto [nt, fresh] = name_tier_.try_emplace(v, t);
        if (!fresh && nt->second != t) sw_name = fmt::format("{}@tier-{}", v, t);
        out_.switches.push_back({sw_name, t, ""});
      }
      sw_name = out_.switches[it->second].name;
      max_tier_ = std::max(max_tier_, t);
      if (below_tier < 0) {
        node.switch_name = sw_name;
      } else {
        DiscoveredSwitch& child = out_.switches[sw_index_[{below_tier, below}]];
        if (child.parent.empty())
          child.parent = sw_name;
        else if (child.parent != sw_name)
          out_.warnings.push_back(
              fmt::format("node '{}' puts switch '{}' under '{}', but another node put it under '{}'; "
                          "keeping '{}'",
                          node.name, child.name, sw_name, child.parent, child.parent));
      }
      below = v;
      below_tier = t;
    }
  }

  const LabelKeys& keys_;
  DiscoveredTopology out_;
  // (tier, label value) -> switch index; switch names must be unique across tiers.
  std::map<std::pair<int, std::string>, std::size_t> sw_index_;
  std::unordered_map<std::string, int> name_tier_;
  int max_tier_ = -1;
  std::unordered_set<std::string> seen_nodes_;
  std::vector<std::string> skipped_;
};

// A Node of the yaml-cpp tree as read_node sees it: its metadata's name and labels, and the
// status.capacity keys read.
class YamlNodeSource {
 public:
  YamlNodeSource(const YamlInput& in, const LabelKeys& keys, const YAML::Node& meta, const YAML::Node& status)
      : in_(in),
        keys_(keys),
        name_(meta["name"]),
        labels_(meta["labels"]),
        capacity_{capacity_of(status, kCapacityMemory), capacity_of(status, kCapacityGpus)} {}

  // The label keys present, ascending; their nodes are kept for value() and label_at().
  std::vector<std::size_t> find_labels() {
    std::vector<std::size_t> present;
    const YAML::Node& labels = labels_;  // const: operator[] of a non-const node inserts the key
    if (!labels || !labels.IsMap()) return present;
    for (std::size_t k = 0; k < keys_.size(); ++k)
      if (YAML::Node v = labels[keys_[k].first]) present.push_back(k), values_.emplace_back(k, v);
    return present;
  }
  Result<void> check_labels() const {
    if (labels_ && !labels_.IsMap())
      return in_.error_at(labels_,
                          fmt::format("expected 'labels' to be a mapping, found {}", YamlInput::describe(labels_)));
    return {};
  }
  Result<std::string_view> value(std::size_t i) const {
    const auto& [key, node] = values_[i];
    if (!node.IsScalar()) return tl::unexpected(in_.string(node, keys_[key].first).error());
    return std::string_view(node.Scalar());
  }
  Result<std::optional<std::string_view>> capacity(CapacityKey k) const {
    const YAML::Node& v = capacity_[k];
    if (!v || v.IsNull()) return std::optional<std::string_view>();
    if (!v.IsScalar())
      return in_.error_at(v, fmt::format("{}: expected a quantity, found {}", kCapacityFields[k],
                                         YamlInput::describe(v)));
    return std::optional<std::string_view>(v.Scalar());
  }
  SourceLocation name_at() const { return in_.where(name_); }
  SourceLocation label_at(std::size_t i) const { return in_.where(values_[i].second); }
  SourceLocation capacity_at(CapacityKey k) const { return in_.where(capacity_[k]); }

 private:
  // status.capacity[key], or an undefined node. A status or capacity that is not a mapping
  // carries nothing read here. (Built by copy: yaml-cpp's assignment from an undefined node throws.)
  static YAML::Node capacity_of(const YAML::Node& status, CapacityKey k) {
    if (!status || !status.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node capacity = status["capacity"];
    if (!capacity || !capacity.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    return capacity[std::string(kCapacityNames[k])];
  }

  const YamlInput& in_;
  const LabelKeys& keys_;
  YAML::Node name_, labels_;
  std::array<YAML::Node, kCapacityKeys> capacity_;
  std::vector<std::pair<std::size_t, YAML::Node>> values_;
};

// One Node of the yaml-cpp tree: its metadata and name, then read_node.
Result<void> read_yaml_item(const YamlInput& in, const LabelKeys& keys, const YAML::Node& item,
                            NodeListReader& reader) {
  if (!item.IsMap() || !item["metadata"] || !item["metadata"].IsMap())
    return in.error_at(item, fmt::format("expected a Node with 'metadata', found {}", YamlInput::describe(item)));
  const YAML::Node meta = item["metadata"];
  TOPOSCHED_TRY(name, in.req_string(meta, "name"));
  YamlNodeSource src(in, keys, meta, item["status"]);
  return reader.read_node(std::move(name), src.find_labels(), src);
}

std::optional<int> builtin_role(std::string_view key) {
  static const std::vector<std::pair<std::string, int>> kLabels = builtin_labels();
  for (const auto& [label, role] : kLabels)
    if (label == key) return role;
  return std::nullopt;
}

}  // namespace

std::optional<int> builtin_label_tier(std::string_view key) {
  auto role = builtin_role(key);
  if (role && *role < kMaxTiers) return role;
  return std::nullopt;
}

bool builtin_label_is_domain(std::string_view key) {
  auto role = builtin_role(key);
  return role && (*role == kDomain || *role == kSubDomain);
}

bool looks_like_k8s_nodes(std::string_view text) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) return false;
    if (root["kind"] && root["kind"].IsScalar() && root["kind"].Scalar() == "Node") return true;
    return root["items"] && root["items"].IsSequence() &&
           (root["items"].size() == 0 || (root["items"][0].IsMap() && root["items"][0]["metadata"]));
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

// The fast path: a JSON NodeList read with simdjson On Demand, Node by Node, without a
// document tree (a 50 MB NodeList's yaml-cpp tree is several times the text). It accepts
// exactly what the yaml-cpp path accepts with the same result, or declines (FastPathDeclines)
// and the yaml-cpp path reads the text again, for its result or its file:line:col error.
// It declines on anything it does not read the way yaml-cpp does: text that is not one JSON
// object with 'items', a \u escape (yaml-cpp encodes surrogate halves alone), a lone CR (a
// line break to yaml-cpp's positions), a byte order mark, a repeated key in any object,
// nesting deeper than yaml-cpp's limit, a label the reader needs that is not a string, and
// every error the reader finds (the yaml-cpp path reports it with its position).
namespace sj = simdjson::ondemand;
using json_fast_path::check_unused;
using json_fast_path::FastPathDeclines;
using json_fast_path::fast_path_may_read;
using json_fast_path::for_each_field;
using json_fast_path::ObjectKeys;

std::string_view string_value(sj::value v) {
  if (v.type() != sj::json_type::string) throw FastPathDeclines{};
  return v.get_string();
}

// A Node of the JSON text as read_node sees it; positions from byte offsets.
class JsonNodeSource {
 public:
  using Capacity = std::array<std::optional<std::pair<std::string_view, std::size_t>>, kCapacityKeys>;
  JsonNodeSource(std::vector<std::pair<std::string_view, std::size_t>>& values, const Capacity& capacity,
                 OffsetLocator& locator)
      : values_(values), capacity_(capacity), locator_(locator) {}
  Result<void> check_labels() const { return {}; }
  Result<std::string_view> value(std::size_t i) const { return values_[i].first; }
  Result<std::optional<std::string_view>> capacity(CapacityKey k) const {
    return capacity_[k] ? std::optional<std::string_view>(capacity_[k]->first) : std::nullopt;
  }
  SourceLocation name_at() const { return {}; }  // errors decline before positions matter
  SourceLocation label_at(std::size_t i) const { return locator_.at(values_[i].second); }
  SourceLocation capacity_at(CapacityKey k) const {
    return capacity_[k] ? locator_.at(capacity_[k]->second) : SourceLocation{};
  }

 private:
  std::vector<std::pair<std::string_view, std::size_t>>& values_;  // (value, offset) per present key
  const Capacity& capacity_;  // (value, offset) per key read
  OffsetLocator& locator_;
};

class JsonNodeListReader {
 public:
  JsonNodeListReader(std::string_view text, const std::string& file, const LabelKeys& keys, const char* base)
      : keys_(keys), reader_(file, keys), locator_(text, file), base_(base) {
    for (std::size_t k = 0; k < keys.size(); ++k) key_index_[keys[k].first].push_back(k);
  }

  void read_root(sj::object root) {
    ObjectKeys keys;
    bool items_seen = false;
    for (auto field : root) {
      std::string_view key = field.unescaped_key();
      keys.add(key);
      if (key != "items") {
        check_unused(field.value(), 1);
        continue;
      }
      items_seen = true;
      sj::value items = field.value();
      if (items.type() != sj::json_type::array) throw FastPathDeclines{};
      for (auto item : items.get_array()) read_item(item.value());
    }
    if (!items_seen) throw FastPathDeclines{};  // one Node, or not a NodeList: the yaml-cpp path
  }

  DiscoveredTopology finish() { return reader_.finish(); }

 private:
  void read_item(sj::value item) {
    if (item.type() != sj::json_type::object) throw FastPathDeclines{};
    ObjectKeys keys;
    bool have_name = false;
    std::string name;
    labels_.clear();
    capacity_ = {};
    for (auto field : item.get_object()) {
      std::string_view key = field.unescaped_key();
      keys.add(key);
      if (key == "metadata") {
        have_name = read_metadata(field.value(), name);
      } else if (key == "status") {
        read_status(field.value());
      } else {
        check_unused(field.value(), 2);
      }
    }
    if (!have_name) throw FastPathDeclines{};
    // Present keys in key order, each key's first value (a repeated label already declined).
    std::sort(labels_.begin(), labels_.end());
    present_.clear();
    values_.clear();
    for (const auto& [k, value, offset] : labels_) present_.push_back(k), values_.emplace_back(value, offset);
    JsonNodeSource src(values_, capacity_, locator_);
    if (!reader_.read_node(std::move(name), present_, src)) throw FastPathDeclines{};
  }

  // Returns whether the metadata named the node.
  bool read_metadata(sj::value meta, std::string& name) {
    if (meta.type() != sj::json_type::object) throw FastPathDeclines{};
    ObjectKeys keys;
    bool have_name = false;
    for (auto field : meta.get_object()) {
      std::string_view key = field.unescaped_key();
      keys.add(key);
      if (key == "name") {
        name = std::string(string_value(field.value()));
        have_name = true;
      } else if (key == "labels") {
        read_labels(field.value());
      } else {
        check_unused(field.value(), 3);
      }
    }
    return have_name;
  }

  // status.capacity's keys read into capacity_; a status or capacity that is not an object
  // carries nothing read here (as on the yaml-cpp path), a value that is not a string declines.
  void read_status(sj::value status) {
    if (status.type() != sj::json_type::object) return check_unused(status, 2);
    for_each_field(status, [&](std::string_view key, sj::value v) {
      if (key == "capacity")
        read_capacity(v);
      else
        check_unused(v, 3);  // the depth read_item gives its fields, plus one
    });
  }

  void read_capacity(sj::value capacity) {
    if (capacity.type() != sj::json_type::object) return check_unused(capacity, 3);
    for_each_field(capacity, [&](std::string_view key, sj::value v) {
      const auto* name = std::find(std::begin(kCapacityNames), std::end(kCapacityNames), key);
      if (name == std::end(kCapacityNames)) return check_unused(v, 4);
      const std::size_t offset = static_cast<std::size_t>(v.raw_json_token().data() - base_);
      capacity_[static_cast<std::size_t>(name - std::begin(kCapacityNames))].emplace(string_value(v), offset);
    });
  }

  void read_labels(sj::value labels) {
    if (labels.type() != sj::json_type::object) throw FastPathDeclines{};
    ObjectKeys keys;
    for (auto field : labels.get_object()) {
      std::string_view key = field.unescaped_key();
      keys.add(key);
      auto known = key_index_.find(key);
      if (known == key_index_.end()) {
        check_unused(field.value(), 4);
        continue;
      }
      sj::value v = field.value();
      const std::size_t offset = static_cast<std::size_t>(v.raw_json_token().data() - base_);
      std::string_view value = string_value(v);
      for (std::size_t k : known->second) labels_.emplace_back(k, value, offset);
    }
  }

  const LabelKeys& keys_;
  NodeListReader reader_;
  OffsetLocator locator_;
  const char* base_;  // the padded copy the offsets are taken in
  std::unordered_map<std::string_view, std::vector<std::size_t>> key_index_;  // label key -> its indices in keys_
  // Per Node, reused: (key index, value, offset) of each known label, then in key order.
  std::vector<std::tuple<std::size_t, std::string_view, std::size_t>> labels_;
  std::vector<std::size_t> present_;
  std::vector<std::pair<std::string_view, std::size_t>> values_;
  JsonNodeSource::Capacity capacity_;  // status.capacity's keys read: (value, offset)
};

// The fast path's result, or nullopt when it declines.
std::optional<DiscoveredTopology> read_k8s_nodes_json(std::string_view text, const std::string& file,
                                                      const LabelKeys& keys) {
  if (!fast_path_may_read(text)) return std::nullopt;
  try {
    simdjson::padded_string padded(text);
    sj::parser parser;
    sj::document doc = parser.iterate(padded);
    JsonNodeListReader reader(text, file, keys, padded.data());
    reader.read_root(doc.get_object());
    // A location left after the object is text after it (a second document); at the end there is none.
    if (!doc.current_location().error()) return std::nullopt;
    return reader.finish();
  } catch (const FastPathDeclines&) {
    return std::nullopt;
  } catch (const simdjson::simdjson_error&) {
    return std::nullopt;
  }
}

// Reads the document with yaml-cpp: exact positions for every error.
Result<DiscoveredTopology> read_k8s_nodes_yaml(std::string_view text, const std::string& file, const LabelKeys& keys) {
  YamlInput in(file);
  try {
    TOPOSCHED_TRY(root, in.parse(text));
    TOPOSCHED_TRY(items, node_items(in, root));
    NodeListReader reader(file, keys);
    for (const auto& item : items) TOPOSCHED_CHECK(read_yaml_item(in, keys, item, reader));
    return reader.finish();
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}

}  // namespace

std::optional<DiscoveredTopology> read_k8s_nodes_fast_path(std::string_view text, const std::string& file,
                                                           const std::vector<std::string>& label_map) {
  auto keys = label_keys(label_map);
  if (!keys) return std::nullopt;
  return read_k8s_nodes_json(text, file, *keys);
}

Result<DiscoveredTopology> read_k8s_nodes_yaml_path(std::string_view text, const std::string& file,
                                                    const std::vector<std::string>& label_map) {
  TOPOSCHED_TRY(keys, label_keys(label_map));
  return read_k8s_nodes_yaml(text, file, keys);
}

// Phases: the label keys → the fast JSON path (k8s_nodes_json.cc), or the yaml-cpp tree when
// it declines: its Node items → each Node read → the tiers.
Result<DiscoveredTopology> read_k8s_nodes(std::string_view text, const std::string& file,
                                          const std::vector<std::string>& label_map) {
  TOPOSCHED_TRY(keys, label_keys(label_map));
  if (auto fast = read_k8s_nodes_json(text, file, keys)) return std::move(*fast);
  return read_k8s_nodes_yaml(text, file, keys);
}

}  // namespace toposched
