#include "formats/topograph_model.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "topology/hostlist.h"
#include "topology/yaml_input.h"

namespace toposched {
namespace {


// Keys naming a node's accelerator domain and sub-domain, in a block's or a switch's
// `annotations` (Topograph's models since #430) or `labels` (earlier models). The first
// present key wins.
constexpr const char* kDomainKeys[] = {"accelerator.topology.test/domain", "accelerator.topograph.run/domain",
                                       "network.topology.nvidia.com/accelerator",
                                       "accelerated.topology.nvidia.com/level-0"};
constexpr const char* kSubDomainKeys[] = {"accelerator.topology.test/sub-domain", "accelerator.topograph.run/sub-domain"};

struct Placement {
  std::string domain;
  std::string sub_domain;
};

struct Sw {
  std::string name;
  YAML::Node at;
  Placement placement;  // from the switch's annotations/labels; inherited by nodes below
  std::vector<std::string> children;
  std::vector<YAML::Node> child_at;
  int parent = -1;
  int height = 0;
};

class ModelReader {
 public:
  explicit ModelReader(const std::string& file) : in_(file) { out_.source = file; }

  Result<DiscoveredTopology> read(std::string_view text) {
    TOPOSCHED_TRY(root, in_.parse(text));
    return read(root);
  }

  Result<DiscoveredTopology> read(const YAML::Node& root) {
    TOPOSCHED_CHECK(in_.expect_map(root, "a Topograph model", {"switches", "blocks", "capacity_blocks"}));
    if (const YAML::Node sw = root["switches"]) {
      if (sw.IsMap()) {
        for (auto it = sw.begin(); it != sw.end(); ++it) {
          TOPOSCHED_TRY(name, in_.string(it->first, "switch name"));
          TOPOSCHED_CHECK(add_switch(name, it->first, it->second, false));
        }
      } else if (sw.IsSequence()) {
        for (const auto& s : sw) {
          TOPOSCHED_CHECK(in_.expect_map(s, "a switch", {"name", "switches", "capacity_blocks", "metadata", "labels", "annotations"}));
          TOPOSCHED_TRY(name, in_.req_string(s, "name"));
          TOPOSCHED_CHECK(add_switch(name, s["name"], s, true));
        }
      } else if (!sw.IsNull()) {
        return in_.error_at(
            sw, fmt::format("expected 'switches' to be a mapping of switch names, found {}", YamlInput::describe(sw)));
      }
    }
    add_implicit_switches();
    if (const YAML::Node blocks = root["blocks"]) TOPOSCHED_CHECK(read_blocks(blocks));
    if (const YAML::Node cbs = root["capacity_blocks"]) TOPOSCHED_CHECK(read_capacity_blocks(cbs));
    TOPOSCHED_CHECK(resolve_tree());
    inherit_switch_placements();
    return std::move(out_);
  }

 private:
  Result<void> add_switch(const std::string& name, const YAML::Node& name_node, const YAML::Node& body,
                          bool old_layout) {
    if (name.empty()) return in_.error_at(name_node, "expected a switch name, found an empty one");
    if (switch_index_.contains(name)) return in_.error_at(name_node, fmt::format("switch '{}' is defined twice", name));
    switch_index_.emplace(name, static_cast<int>(switches_.size()));
    Sw s;
    s.name = name;
    s.at = name_node;
    if (!body.IsNull()) {
      if (!old_layout) {
        TOPOSCHED_CHECK(in_.expect_map(body, fmt::format("switch '{}'", name),
                                       {"name", "switches", "labels", "annotations", "metadata"}));
        TOPOSCHED_TRY(own_name, in_.opt_string(body, "name"));
        if (own_name && !own_name->empty() && *own_name != name)
          return in_.error_at(body["name"], fmt::format("switch key '{}' does not match switch name '{}'", name, *own_name));
      }
      TOPOSCHED_TRY(placement, read_placement(body));
      s.placement = std::move(placement);
      if (const YAML::Node ch = body["switches"]) {
        TOPOSCHED_TRY(names, in_.words(ch, "switches"));
        for (auto& n : names) {
          s.children.push_back(std::move(n));
          s.child_at.push_back(ch);
        }
      }
      if (old_layout)
        if (const YAML::Node cbs = body["capacity_blocks"]) {
          TOPOSCHED_TRY(names, in_.words(cbs, "capacity_blocks"));
          for (auto& cb : names)
            if (!cb_switch_.emplace(cb, name).second)
              return in_.error_at(cbs, fmt::format("capacity block '{}' is under two switches", cb));
        }
    }
    switches_.push_back(std::move(s));
    return {};
  }

  // The domain and sub-domain named by `body`'s annotations (first) or labels.
  Result<Placement> read_placement(const YAML::Node& body) {
    Placement p;
    for (const char* section : {"annotations", "labels"}) {
      const YAML::Node m = body[section];
      if (!m || m.IsNull()) continue;
      if (!m.IsMap())
        return in_.error_at(m, fmt::format("expected '{}' to be a mapping, found {}", section, YamlInput::describe(m)));
      for (const char* key : kDomainKeys)
        if (m[key] && p.domain.empty()) {
          TOPOSCHED_TRY(d, in_.string(m[key], key));
          p.domain = d;
        }
      for (const char* key : kSubDomainKeys)
        if (m[key] && p.sub_domain.empty()) {
          TOPOSCHED_TRY(d, in_.string(m[key], key));
          p.sub_domain = d;
        }
    }
    return p;
  }

  // Topograph (#409): a leaf switch has nothing of its own to say, so a model may name it
  // only as another switch's child. Such switches exist as if defined empty.
  void add_implicit_switches() {
    for (std::size_t s = 0; s < switches_.size(); ++s)
      for (std::size_t c = 0; c < switches_[s].children.size(); ++c) {
        const std::string child = switches_[s].children[c];
        if (switch_index_.contains(child)) continue;
        switch_index_.emplace(child, static_cast<int>(switches_.size()));
        Sw implicit;
        implicit.name = child;
        implicit.at = switches_[s].child_at[c];
        switches_.push_back(std::move(implicit));
      }
  }

  // Topograph merges a switch's annotations into every node below it (the block's own
  // win, then the closest switch's): a domain may be given on a switch.
  void inherit_switch_placements() {
    for (auto& node : out_.nodes) {
      if (node.switch_name.empty()) continue;
      auto it = switch_index_.find(node.switch_name);
      std::string domain = node.domain, sub = node.sub_domain;
      for (int s = it == switch_index_.end() ? -1 : it->second; s >= 0;
           s = switches_[static_cast<std::size_t>(s)].parent) {
        const Placement& p = switches_[static_cast<std::size_t>(s)].placement;
        if (domain.empty()) domain = p.domain;
        if (sub.empty()) sub = p.sub_domain;
      }
      node.domain = domain;
      node.sub_domain = domain.empty() ? std::string() : sub;
    }
  }

  Result<std::vector<std::string>> node_names(const YAML::Node& nodes) {
    TOPOSCHED_TRY(exprs, in_.words(nodes, "nodes"));
    std::vector<std::string> names;
    for (const auto& e : exprs) {
      auto expanded = expand_hostlist(e);
      if (!expanded) return in_.error_at(nodes, fmt::format("in hostlist '{}': {}", e, expanded.error().message));
      if (names.size() + expanded->size() > kMaxHostlistNames) return in_.error_at(nodes, "too many nodes");
      names.insert(names.end(), expanded->begin(), expanded->end());
    }
    return names;
  }

  Result<void> add_nodes(const YAML::Node& nodes, const std::string& sw, const YAML::Node& sw_at,
                         const std::string& domain, const std::string& sub, const std::string& type) {
    TOPOSCHED_TRY(names, node_names(nodes));
    if (!sw.empty() && !switch_index_.contains(sw))
      return in_.error_at(sw_at, fmt::format("block names switch '{}', which is neither defined under 'switches' nor named as a switch's child", sw));
    for (auto& n : names) {
      if (!node_index_.emplace(n, out_.nodes.size()).second)
        return in_.error_at(nodes, fmt::format("node '{}' is in two blocks", n));
      DiscoveredNode dn;
      dn.name = std::move(n);
      dn.switch_name = sw;
      dn.domain = domain;
      dn.sub_domain = domain.empty() ? std::string() : sub;
      dn.gpu_model = type;
      out_.nodes.push_back(std::move(dn));
    }
    return {};
  }

  Result<void> read_blocks(const YAML::Node& blocks) {
    TOPOSCHED_CHECK(in_.expect_sequence(blocks, "'blocks'"));
    for (const auto& b : blocks) {
      TOPOSCHED_CHECK(in_.expect_map(b, "a block", {"name", "switch", "nodes", "labels", "annotations", "metadata"}));
      TOPOSCHED_TRY(sw, in_.opt_string(b, "switch"));
      TOPOSCHED_TRY(placement, read_placement(b));
      if (!b["nodes"]) return in_.error_at(b, "missing required key 'nodes' (hostlists)");
      TOPOSCHED_CHECK(add_nodes(b["nodes"], sw ? *sw : "", b["switch"], placement.domain, placement.sub_domain, ""));
    }
    return {};
  }

  Result<void> read_capacity_blocks(const YAML::Node& cbs) {
    TOPOSCHED_CHECK(in_.expect_sequence(cbs, "'capacity_blocks'"));
    for (const auto& b : cbs) {
      TOPOSCHED_CHECK(in_.expect_map(b, "a capacity block", {"name", "type", "nvlink", "nodes"}));
      TOPOSCHED_TRY(name, in_.req_string(b, "name"));
      TOPOSCHED_TRY(type, in_.opt_string(b, "type"));
      TOPOSCHED_TRY(nvlink, in_.opt_string(b, "nvlink"));
      if (!b["nodes"]) return in_.error_at(b, "missing required key 'nodes'");
      auto sw = cb_switch_.find(name);
      TOPOSCHED_CHECK(add_nodes(b["nodes"], sw == cb_switch_.end() ? "" : sw->second, b["name"], nvlink ? *nvlink : "", "",
                      type ? *type : ""));
    }
    return {};
  }

  Result<void> resolve_tree() {
    for (std::size_t s = 0; s < switches_.size(); ++s)
      for (std::size_t c = 0; c < switches_[s].children.size(); ++c) {
        auto it = switch_index_.find(switches_[s].children[c]);
        if (it == switch_index_.end())
          return in_.error_at(switches_[s].child_at[c],
                              fmt::format("switch '{}' lists switch '{}', which is not defined", switches_[s].name,
                                          switches_[s].children[c]));
        Sw& ch = switches_[static_cast<std::size_t>(it->second)];
        if (ch.parent >= 0 && ch.parent != static_cast<int>(s))
          return in_.error_at(switches_[s].child_at[c],
                              fmt::format("switch '{}' has two parent switches '{}' and '{}'", ch.name,
                                          switches_[static_cast<std::size_t>(ch.parent)].name, switches_[s].name));
        ch.parent = static_cast<int>(s);
      }
    std::vector<int> pending(switches_.size(), 0), queue;
    for (const auto& s : switches_)
      if (s.parent >= 0) ++pending[static_cast<std::size_t>(s.parent)];
    for (std::size_t s = 0; s < switches_.size(); ++s)
      if (pending[s] == 0) queue.push_back(static_cast<int>(s));
    int max_height = 0;
    for (std::size_t done = 0; done < queue.size(); ++done) {
      const Sw& s = switches_[static_cast<std::size_t>(queue[done])];
      max_height = std::max(max_height, s.height);
      if (s.parent < 0) continue;
      Sw& p = switches_[static_cast<std::size_t>(s.parent)];
      p.height = std::max(p.height, s.height + 1);
      if (--pending[static_cast<std::size_t>(s.parent)] == 0) queue.push_back(s.parent);
    }
    if (queue.size() < switches_.size())
      for (std::size_t s = 0; s < switches_.size(); ++s)
        if (pending[s] > 0)
          return in_.error_at(switches_[s].at, fmt::format("switch '{}' is part of a cycle", switches_[s].name));
    if (switches_.empty()) return {};
    for (int t = 0; t <= max_height; ++t) out_.tiers.push_back(tier_name_for_level(t));
    for (const auto& s : switches_)
      out_.switches.push_back(
          {s.name, s.height, s.parent >= 0 ? switches_[static_cast<std::size_t>(s.parent)].name : ""});
    return {};
  }

  YamlInput in_;
  DiscoveredTopology out_;
  std::vector<Sw> switches_;
  std::unordered_map<std::string, int> switch_index_;
  std::unordered_map<std::string, std::string> cb_switch_;
  std::unordered_map<std::string, std::size_t> node_index_;
};


}  // namespace

bool looks_like_topograph_model(const YAML::Node& root) {
  if (!root.IsMap() || root["node_types"] || root["nodes"]) return false;
  return root["blocks"] || root["capacity_blocks"] || root["switches"];
}

bool looks_like_topograph_model(std::string_view text) {
  try {
    return looks_like_topograph_model(YAML::Load(std::string(text)));
  } catch (const std::exception&) {
    return false;
  }
}

namespace {
template <class Input>
Result<DiscoveredTopology> read_model(const Input& input, const std::string& file) {
  try {
    ModelReader reader(file);
    return reader.read(input);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}
}  // namespace

Result<DiscoveredTopology> read_topograph_model(std::string_view text, const std::string& file) {
  return read_model(text, file);
}

Result<DiscoveredTopology> read_topograph_model(const YAML::Node& root, const std::string& file) {
  return read_model(root, file);
}

}  // namespace toposched
