#include "formats/slurm_yaml.h"

#include <algorithm>
#include <deque>
#include <set>

#include <fmt/format.h>

#include "topology/hostlist.h"

namespace toposched {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::size_t kMaxPartitionNodes = 1'000'000;

Result<std::vector<std::string>> partition_nodes(const TopologyPartition& p) {
  std::vector<std::string> names;
  for (const auto& expr : p.nodes) {
    auto expanded = expand_hostlist(expr);
    if (!expanded)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("topology \"{}\": nodes '{}': {}", p.name, expr, expanded.error().message));
    if (names.size() + expanded->size() > kMaxPartitionNodes)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("topology \"{}\": the node list exceeds {} nodes", p.name, kMaxPartitionNodes));
    names.insert(names.end(), expanded->begin(), expanded->end());
  }
  return names;
}

// Topograph's getTreeTopologyUnit: the switches above the partition's nodes, breadth-first
// from the roots with children by name. A switch with both child switches and nodes, which
// Slurm refuses, hands its nodes to a new child "<name>-nodes" (as slurm-tree does).
Json partition_tree(const Cluster& c, const std::vector<std::string>& names, bool skeleton, std::vector<std::string>& warnings) {
  std::vector<char> picked(c.node_count(), 0), needed(c.switch_count(), 0);
  for (const auto& n : names)
    if (auto id = c.find_node(n); id && c.node_switch(*id).valid()) {
      picked[id->index()] = 1;
      for (SwitchId s = c.node_switch(*id); s.valid() && !needed[s.index()]; s = c.switch_parent(s)) needed[s.index()] = 1;
    }
  NameMap slurm_names(NameMap::Target::kSlurm);
  for (std::uint32_t s = 0; s < c.switch_count(); ++s) slurm_names(c.switch_name(SwitchId(s)));
  auto by_name = [&](SwitchId a, SwitchId b) { return c.switch_name(a) < c.switch_name(b); };
  std::deque<SwitchId> queue;
  for (SwitchId r : c.root_switches())
    if (needed[r.index()]) queue.push_back(r);
  std::sort(queue.begin(), queue.end(), by_name);
  Json switches = Json::array();
  std::vector<Json> split_leaves;
  while (!queue.empty()) {
    SwitchId s = queue.front();
    queue.pop_front();
    std::vector<SwitchId> kids;
    for (SwitchId k : c.switch_children(s))
      if (needed[k.index()]) kids.push_back(k);
    std::sort(kids.begin(), kids.end(), by_name);
    std::vector<std::string> kid_names, nodes;
    for (SwitchId k : kids) kid_names.push_back(slurm_names(c.switch_name(k)));
    for (NodeId n : c.switch_nodes(s))
      if (picked[n.index()]) nodes.push_back(c.node_name(n));
    std::sort(nodes.begin(), nodes.end());
    const std::string name = slurm_names(c.switch_name(s));
    if (!kid_names.empty() && !nodes.empty()) {
      std::string leaf = slurm_names.fresh(name + "-nodes");
      warnings.push_back(fmt::format("switch '{}' has both nodes and child switches, which Slurm refuses; its {} nodes are "
                                     "written under a new leaf switch '{}'", c.switch_name(s), nodes.size(), leaf));
      kid_names.push_back(leaf);
      Json j = {{"switch", leaf}};
      if (!skeleton) j["nodes"] = compress_hostlist(nodes);
      split_leaves.push_back(j);
      nodes.clear();
    }
    Json j = {{"switch", name}};
    if (!kid_names.empty()) j["children"] = compress_hostlist(kid_names);
    if (!nodes.empty() && !skeleton) j["nodes"] = compress_hostlist(nodes);
    switches.push_back(j);
    for (SwitchId k : kids) queue.push_back(k);
  }
  for (auto& j : split_leaves) switches.push_back(std::move(j));
  return switches;
}

Result<Json> topology_unit(const Cluster& c, const TopographBlockLayout& layout, const TopologyPartition& p, bool skeleton,
                           std::vector<std::string>& warnings) {
  Json unit = {{"topology", p.name}, {"cluster_default", p.cluster_default}};
  auto flat = [&] {
    unit["flat"] = true;
    return unit;
  };
  if (p.plugin == "topology/flat") return flat();
  TOPOSCHED_TRY(names, partition_nodes(p));
  if (p.plugin == "topology/tree") {
    Json switches = partition_tree(c, names, skeleton, warnings);
    if (switches.empty()) return flat();
    unit["tree"] = {{"switches", switches}};
    return unit;
  }
  auto blocks = layout.partition_blocks(names, p.block_sizes, p.block_name);
  if (!blocks) {
    Error e = blocks.error();
    e.message = fmt::format("topology \"{}\": {}", p.name, e.message);
    return tl::unexpected(e);
  }
  if (blocks->blocks.empty()) return flat();
  Json list = Json::array();
  for (const auto& b : blocks->blocks) {
    Json j = {{"block", b.name}};
    if (!b.nodes.empty() && !skeleton) j["nodes"] = compress_hostlist(b.nodes);
    list.push_back(j);
  }
  unit["block"] = {{"block_sizes", blocks->sizes}, {"blocks", list}};
  return unit;
}

// Topograph's Config.Validate for `topologies`.
Result<void> validate_partition(const Cluster& c, const TopographBlockLayout& layout, const TopologyPartition& p) {
  auto bad = [&](std::string why) { return make_error(ErrorCode::kInvalidArgument, std::move(why)); };
  if (p.name.empty()) return bad("a topology needs a name");
  if (p.block_name && p.plugin != "topology/block")
    return bad(fmt::format("topology \"{}\": blockName is only supported with plugin \"topology/block\"", p.name));
  if (p.block_name) {
    auto ok = validate_block_name_rule(*p.block_name);
    if (!ok) return bad(fmt::format("topology \"{}\": {}", p.name, ok.error().message));
  }
  if (auto ok = validate_block_sizes(p.block_sizes); !ok) return bad(fmt::format("topology \"{}\": {}", p.name, ok.error().message));
  if (p.plugin == "topology/tree") {
    if (c.switch_count() == 0) return bad(fmt::format("missing tree topology for topology \"{}\"", p.name));
  } else if (p.plugin == "topology/block") {
    if (layout.empty()) return bad(fmt::format("block topology for topology \"{}\" contains no accelerator domains", p.name));
  } else if (p.plugin != "topology/flat") {
    return bad(fmt::format("unsupported topology plugin \"{}\" for topology \"{}\"", p.plugin, p.name));
  }
  if (p.nodes.empty() && p.plugin != "topology/flat") return bad(fmt::format("topology \"{}\" specifies no nodes", p.name));
  return {};
}

// toposched's own default: the whole cluster as a tree (cluster default) and as blocks.
std::vector<TopologyPartition> default_topologies(const Cluster& c, const TopographBlockLayout& layout,
                                                  const ExportOptions& options) {
  std::vector<std::string> all;
  for (std::uint32_t n = 0; n < c.node_count(); ++n) all.push_back(c.node_name(NodeId(n)));
  const std::string everything = compress_hostlist(all);
  NameMap names(NameMap::Target::kSlurm);
  std::vector<TopologyPartition> out;
  if (c.switch_count() > 0) out.push_back({names(c.name() + "-tree"), "topology/tree", {everything}, {}, {}, true});
  if (!layout.empty())
    out.push_back({names(c.name() + "-block"), "topology/block", {everything}, options.block_sizes, options.block_name, out.empty()});
  if (out.empty()) out.push_back({names(c.name() + "-flat"), "topology/flat", {}, {}, {}, true});
  return out;
}

}  // namespace

Result<ExportOutput> write_slurm_yaml(const Cluster& c, const ExportOptions& options) {
  TopographBlockLayout layout(c);
  std::vector<TopologyPartition> topologies = options.topologies;
  if (topologies.empty()) {
    topologies = default_topologies(c, layout, options);
  } else {
    std::sort(topologies.begin(), topologies.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    for (std::size_t i = 1; i < topologies.size(); ++i)
      if (topologies[i].name == topologies[i - 1].name)
        return make_error(ErrorCode::kInvalidArgument, fmt::format("topology \"{}\" is given twice", topologies[i].name));
  }
  ExportOutput out;
  Json doc = Json::array();
  for (const auto& p : topologies) {
    TOPOSCHED_CHECK(validate_partition(c, layout, p));
    TOPOSCHED_TRY(unit, topology_unit(c, layout, p, options.skeleton_only, out.warnings));
    doc.push_back(std::move(unit));
  }
  out.text = "# topology.yaml for Slurm 25.05+ (replaces topology.conf; partitions pick one with Topology=NAME).\n";
  out.text += "# " + generated_by(c) + "\n";
  if (options.skeleton_only) out.text += "# Skeleton only (Topograph's skeletonOnly): no node lists.\n";
  for (const auto& w : out.warnings) out.text += "# note: " + w + "\n";
  out.text += json_to_yaml(doc);
  return out;
}

}  // namespace toposched
