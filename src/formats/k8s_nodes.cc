#include "formats/k8s_nodes.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "topology/hostlist.h"
#include "topology/yaml_input.h"

namespace toposched {
namespace {

constexpr int kMaxTiers = 16;

// Role of a label: tiers 0..15, then these.
enum Role : int { kDomain = 100, kSubDomain, kGpuCount, kGpuProduct };

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
  m.emplace_back("accelerator.topograph.run/domain", kDomain);
  m.emplace_back("network.topology.nvidia.com/accelerator", kDomain);
  m.emplace_back("nvidia.com/gpu.clique", kDomain);
  m.emplace_back("accelerator.topograph.run/sub-domain", kSubDomain);
  m.emplace_back("nvidia.com/gpu.count", kGpuCount);
  m.emplace_back("nvidia.com/gpu.product", kGpuProduct);
  return m;
}

using LabelKeys = std::vector<std::pair<std::string, int>>;

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
// role, then the switches its tier labels name, linked closest first. One reader per call.
class NodeListReader {
 public:
  NodeListReader(YamlInput& in, const std::string& file, const LabelKeys& keys) : in_(in), keys_(keys) {
    out_.source = file;
  }

  Result<void> read_item(const YAML::Node& item) {
    if (!item.IsMap() || !item["metadata"] || !item["metadata"].IsMap())
      return in_.error_at(item, fmt::format("expected a Node with 'metadata', found {}", YamlInput::describe(item)));
    const YAML::Node meta = item["metadata"];
    TOPOSCHED_TRY(name, in_.req_string(meta, "name"));
    if (name.empty()) return in_.error_at(meta["name"], "expected a node name, found an empty one");
    if (seen_nodes_[name]) return in_.error_at(meta["name"], fmt::format("node '{}' appears twice", name));
    seen_nodes_[name] = true;
    DiscoveredNode node;
    node.name = name;
    std::vector<std::string> tier_value(kMaxTiers);
    if (const YAML::Node labels = meta["labels"]) TOPOSCHED_CHECK(read_labels(labels, node, tier_value));
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
  Result<void> read_labels(const YAML::Node& labels, DiscoveredNode& node, std::vector<std::string>& tier_value) {
    if (!labels.IsMap())
      return in_.error_at(labels, fmt::format("expected 'labels' to be a mapping, found {}", YamlInput::describe(labels)));
    std::vector<bool> role_done(kMaxTiers + 4, false);
    for (const auto& [key, role] : keys_) {
      const YAML::Node v = labels[key];
      if (!v) continue;
      TOPOSCHED_TRY(value, in_.string(v, key));
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
          return in_.error_at(v, fmt::format("label '{}': expected a GPU count in 1..64, found '{}'", key, value));
        node.gpu_count = n;
      } else if (role == kGpuProduct) {
        node.gpu_model = value;
        node.gpu_model_at = in_.where(v);
      }
    }
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

  YamlInput& in_;
  const LabelKeys& keys_;
  DiscoveredTopology out_;
  // (tier, label value) -> switch index; switch names must be unique across tiers.
  std::map<std::pair<int, std::string>, std::size_t> sw_index_;
  std::unordered_map<std::string, int> name_tier_;
  int max_tier_ = -1;
  std::unordered_map<std::string, bool> seen_nodes_;
  std::vector<std::string> skipped_;
};

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

// Phases: the label keys → the document's Node items → each Node read → the tiers.
Result<DiscoveredTopology> read_k8s_nodes(std::string_view text, const std::string& file,
                                          const std::vector<std::string>& label_map) {
  TOPOSCHED_TRY(keys, label_keys(label_map));
  YamlInput in(file);
  try {
    TOPOSCHED_TRY(root, in.parse(text));
    TOPOSCHED_TRY(items, node_items(in, root));
    NodeListReader reader(in, file, keys);
    for (const auto& item : items) TOPOSCHED_CHECK(reader.read_item(item));
    return reader.finish();
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}

}  // namespace toposched
