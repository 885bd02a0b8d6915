// Slurm's topology.yaml (Slurm 25.05+) as a cluster source: see slurm_topology.h.
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "formats/slurm_topology.h"
#include "topology/yaml_input.h"

namespace toposched {

namespace {

// topology.conf statements written from the YAML, each remembering where it came from, so
// the topology.conf reader checks them and its errors point into the YAML.
struct Synthesized {
  std::string text;
  std::vector<SourceLocation> line_at;  // per line (1-based line i at [i - 1])
  void add(std::string statement, SourceLocation at) {
    text += statement + "\n";
    line_at.push_back(std::move(at));
  }
};

Result<DiscoveredTopology> read_synthesized(const Synthesized& s, const std::string& file) {
  auto t = read_slurm_topology(s.text, file);
  if (t) return t;
  Error e = t.error();
  if (e.where.line >= 1 && static_cast<std::size_t>(e.where.line) <= s.line_at.size())
    e.where = s.line_at[static_cast<std::size_t>(e.where.line - 1)];
  return tl::unexpected(e);
}

// A scalar or a list of scalars, joined with commas (a hostlist or sizes).
Result<std::string> joined(const YamlInput& in, const YAML::Node& n, std::string_view key) {
  if (n.IsSequence()) {
    std::string out;
    for (const auto& x : n) {
      TOPOSCHED_TRY(s, in.string(x, key));
      out += (out.empty() ? "" : ",") + s;
    }
    return out;
  }
  return in.string(n, key);
}

Result<Synthesized> tree_statements(const YamlInput& in, const YAML::Node& tree) {
  Synthesized s;
  TOPOSCHED_CHECK(in.expect_map(tree, "'tree'", {"switches"}));
  if (!tree["switches"]) return in.error_at(tree, "expected 'switches' in 'tree'");
  TOPOSCHED_CHECK(in.expect_sequence(tree["switches"], "'switches'"));
  for (const auto& sw : tree["switches"]) {
    TOPOSCHED_CHECK(in.expect_map(sw, "a switch", {"switch", "children", "nodes"}));
    TOPOSCHED_TRY(name, in.req_string(sw, "switch"));
    std::string st = "SwitchName=" + name;
    if (sw["children"]) {
      TOPOSCHED_TRY(children, joined(in, sw["children"], "children"));
      if (!children.empty()) st += " Switches=" + children;
    }
    if (sw["nodes"]) {
      TOPOSCHED_TRY(nodes, joined(in, sw["nodes"], "nodes"));
      if (!nodes.empty()) st += " Nodes=" + nodes;
    }
    s.add(std::move(st), in.where(sw));
  }
  return s;
}

Result<Synthesized> block_statements(const YamlInput& in, const YAML::Node& block) {
  Synthesized s;
  TOPOSCHED_CHECK(in.expect_map(block, "'block'", {"blocks", "block_sizes"}));
  if (!block["blocks"]) return in.error_at(block, "expected 'blocks' in 'block'");
  TOPOSCHED_CHECK(in.expect_sequence(block["blocks"], "'blocks'"));
  for (const auto& b : block["blocks"]) {
    TOPOSCHED_CHECK(in.expect_map(b, "a block", {"block", "nodes"}));
    TOPOSCHED_TRY(name, in.req_string(b, "block"));
    std::string st = "BlockName=" + name;
    if (b["nodes"]) {
      TOPOSCHED_TRY(nodes, joined(in, b["nodes"], "nodes"));
      if (!nodes.empty()) st += " Nodes=" + nodes;
    }
    s.add(std::move(st), in.where(b));
  }
  if (block["block_sizes"]) {
    TOPOSCHED_TRY(sizes, joined(in, block["block_sizes"], "block_sizes"));
    s.add("BlockSizes=" + sizes, in.where(block["block_sizes"]));
  }
  return s;
}

// The topology of each kind that the cluster takes: the cluster default, else the first.
struct Chosen {
  YAML::Node tree, block;  // valid when has_tree / has_block (a default Node is a defined null)
  bool has_tree = false, has_block = false;
  std::string tree_name, block_name;
  bool tree_default = false, block_default = false;
  std::vector<std::string> others;
};

Result<Chosen> choose(const YamlInput& in, const YAML::Node& root) {
  Chosen c;
  for (const auto& t : root) {
    TOPOSCHED_CHECK(in.expect_map(t, "a topology", {"topology", "cluster_default", "tree", "block", "flat"}));
    TOPOSCHED_TRY(name, in.req_string(t, "topology"));
    TOPOSCHED_TRY(is_default, in.opt_boolean(t, "cluster_default"));
    const int kinds = (t["tree"] ? 1 : 0) + (t["block"] ? 1 : 0) + (t["flat"] ? 1 : 0);
    if (kinds != 1) return in.error_at(t, fmt::format("topology '{}': expected exactly one of tree, block, flat", name));
    const bool dflt = is_default.value_or(false);
    auto take = [&](bool& has, YAML::Node& slot, std::string& slot_name, bool& slot_default, const YAML::Node& body) {
      if (!has || (dflt && !slot_default)) {
        if (has) c.others.push_back(slot_name);
        has = true;
        slot.reset(body);
        slot_name = name;
        slot_default = dflt;
      } else {
        c.others.push_back(name);
      }
    };
    if (t["tree"]) take(c.has_tree, c.tree, c.tree_name, c.tree_default, t["tree"]);
    else if (t["block"]) take(c.has_block, c.block, c.block_name, c.block_default, t["block"]);
  }
  return c;
}

}  // namespace

Result<DiscoveredTopology> read_slurm_topology_yaml(std::string_view text, const std::string& file) {
  YamlInput in(file);
  try {
    TOPOSCHED_TRY(root, in.parse(text));
    if (!root.IsSequence())
      return in.error_at(root, fmt::format("expected a topology.yaml list of topologies ('- topology: NAME'), found {}",
                                           YamlInput::describe(root)));
    TOPOSCHED_TRY(chosen, choose(in, root));
    if (!chosen.has_tree && !chosen.has_block)
      return in.error_at(root, "no tree or block topology (only flat ones): no structure to read");
    DiscoveredTopology out;
    std::map<std::string, std::size_t> by_name;
    if (chosen.has_tree) {
      TOPOSCHED_TRY(s, tree_statements(in, chosen.tree));
      TOPOSCHED_TRY(t, read_synthesized(s, file));
      out = std::move(t);
      for (std::size_t i = 0; i < out.nodes.size(); ++i) by_name[out.nodes[i].name] = i;
    }
    if (chosen.has_block) {
      TOPOSCHED_TRY(s, block_statements(in, chosen.block));
      TOPOSCHED_TRY(b, read_synthesized(s, file));
      for (DiscoveredNode& n : b.nodes) {
        auto it = by_name.find(n.name);
        if (it != by_name.end()) {
          out.nodes[it->second].domain = n.domain;
        } else {
          by_name[n.name] = out.nodes.size();
          out.nodes.push_back(std::move(n));
        }
      }
      for (std::string& w : b.warnings) out.warnings.push_back(std::move(w));
    }
    out.source = file;
    if (!chosen.others.empty())
      out.warnings.push_back(fmt::format("read topology '{}'{}; not read: {} (a cluster has one tree and one set of "
                                         "blocks)",
                                         chosen.has_tree ? chosen.tree_name : chosen.block_name,
                                         chosen.has_tree && chosen.has_block ? " and '" + chosen.block_name + "'" : "",
                                         fmt::join(chosen.others, ", ")));
    return out;
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}

}  // namespace toposched
