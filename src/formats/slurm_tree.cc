#include "formats/slurm_tree.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "topology/hostlist.h"

namespace toposched {

SlurmTree slurm_tree(const Cluster& c) {
  SlurmTree tree;
  NameMap names(NameMap::Target::kSlurm);
  // Reserve every model switch's name first so that synthetic names never take one.
  for (std::uint32_t s = 0; s < c.switch_count(); ++s) names(c.switch_name(SwitchId(s)));
  std::vector<int> index(c.switch_count(), -1);
  std::vector<SlurmSwitch> by_id;
  // Model switches in tier order, then id order.
  std::vector<SwitchId> order;
  for (std::uint32_t s = 0; s < c.switch_count(); ++s) order.push_back(SwitchId(s));
  std::stable_sort(order.begin(), order.end(), [&](SwitchId a, SwitchId b) { return c.switch_tier(a) < c.switch_tier(b); });
  std::vector<std::string> empty;
  for (SwitchId s : order) {
    if (c.switch_subtree_nodes(s).empty()) {
      empty.push_back(c.switch_name(s));
      continue;
    }
    SlurmSwitch sw;
    sw.model_name = c.switch_name(s);
    sw.name = names(sw.model_name);
    sw.link_GBps = c.tiers()[static_cast<std::size_t>(c.switch_tier(s))].bandwidth_GBps_per_node;
    for (NodeId n : c.switch_nodes(s)) sw.nodes.push_back(c.node_name(n));
    bool has_children = false;
    for (SwitchId k : c.switch_children(s)) has_children = has_children || !c.switch_subtree_nodes(k).empty();
    if (has_children && !sw.nodes.empty()) {
      // Slurm: "switch X has both child switches and nodes". Hang the nodes one level down.
      SlurmSwitch leaf;
      leaf.name = names.fresh(sw.model_name + "-nodes");
      leaf.nodes = std::move(sw.nodes);
      leaf.link_GBps = sw.link_GBps;
      sw.nodes.clear();
      sw.switches.push_back(leaf.name);
      tree.warnings.push_back(fmt::format("switch '{}' has both nodes and child switches, which Slurm refuses; its {} nodes "
                                          "are written under a new leaf switch '{}'", sw.model_name, leaf.nodes.size(), leaf.name));
      by_id.push_back(std::move(leaf));
    }
    index[s.index()] = static_cast<int>(by_id.size());
    by_id.push_back(std::move(sw));
  }
  for (SwitchId s : order) {
    if (index[s.index()] < 0) continue;
    for (SwitchId k : c.switch_children(s))
      if (index[k.index()] >= 0) by_id[static_cast<std::size_t>(index[s.index()])].switches.push_back(by_id[static_cast<std::size_t>(index[k.index()])].name);
  }
  // Levels as Slurm computes them: leaves 0, each parent one above its highest child.
  std::map<std::string, std::size_t, std::less<>> pos;
  for (std::size_t i = 0; i < by_id.size(); ++i) pos[by_id[i].name] = i;
  for (std::size_t i = 0; i < by_id.size(); ++i) {
    // by_id is ordered children before parents (tier order, synthetic leaves before owners).
    int level = 0;
    for (const auto& k : by_id[i].switches) level = std::max(level, by_id[pos[k]].level + 1);
    by_id[i].level = level;
  }
  std::stable_sort(by_id.begin(), by_id.end(), [](const SlurmSwitch& a, const SlurmSwitch& b) { return a.level < b.level; });
  tree.switches = std::move(by_id);
  if (!empty.empty())
    tree.warnings.push_back(fmt::format("{} switch(es) with no node below them are left out (Slurm refuses them): {}",
                                        empty.size(), compress_hostlist(empty)));
  std::vector<std::string> unattached;
  for (std::uint32_t n = 0; n < c.node_count(); ++n)
    if (!c.node_switch(NodeId(n)).valid()) unattached.push_back(c.node_name(NodeId(n)));
  if (!unattached.empty())
    tree.warnings.push_back(fmt::format("{} node(s) hang under no switch; Slurm will log that its switches lack access to them: {}",
                                        unattached.size(), compress_hostlist(unattached)));
  for (const auto& rename : names.renamed()) {
    // Named members, not a structured binding: clang 14 (the fuzz build) cannot capture those.
    const auto& from = rename.first;
    const auto& to = rename.second;
    if (from != to && std::any_of(tree.switches.begin(), tree.switches.end(), [&](const SlurmSwitch& s) { return s.name == to && s.model_name == from; }))
      tree.renamed.emplace_back(from, to);
  }
  return tree;
}

std::map<std::string, std::string> short_switch_names(const Cluster& c) {
  // Topograph's ClusterTopology.Normalize: nodes sorted by their switch chain compared
  // from its top entry down (closest-first lists aligned at index), then by name; each
  // level's switches numbered in the order the sorted nodes first meet them.
  struct Chain {
    std::vector<std::string> up;  // closest first
    std::string node;
  };
  std::vector<Chain> chains;
  for (std::uint32_t n = 0; n < c.node_count(); ++n) {
    Chain ch{{}, c.node_name(NodeId(n))};
    for (SwitchId s = c.node_switch(NodeId(n)); s.valid(); s = c.switch_parent(s)) ch.up.push_back(c.switch_name(s));
    chains.push_back(std::move(ch));
  }
  std::stable_sort(chains.begin(), chains.end(), [](const Chain& a, const Chain& b) {
    for (std::size_t level = std::max(a.up.size(), b.up.size()); level-- > 0;) {
      const std::string empty;
      const std::string& x = level < a.up.size() ? a.up[level] : empty;
      const std::string& y = level < b.up.size() ? b.up[level] : empty;
      if (x != y) return x < y;
    }
    return a.node < b.node;
  });
  std::map<std::string, std::string> names;
  std::map<std::size_t, int> counts;
  for (const auto& ch : chains)
    for (std::size_t level = 0; level < ch.up.size(); ++level)
      if (!names.contains(ch.up[level])) names[ch.up[level]] = fmt::format("switch.{}.{}", level + 1, ++counts[level]);
  return names;
}

Result<ExportOutput> write_slurm_tree(const Cluster& c, const ExportOptions& options) {
  SlurmTree tree = slurm_tree(c);
  if (tree.switches.empty())
    return make_error(ErrorCode::kValidation,
                      fmt::format("cluster '{}' has no switch with nodes below it, and topology/tree needs one "
                                  "(without a fabric, Slurm's default topology/flat needs no topology.conf)", c.name()));
  ExportOutput out;
  out.warnings = tree.warnings;
  std::string& t = out.text;
  t += "# topology.conf for Slurm's topology/tree plugin (slurm.conf: TopologyPlugin=topology/tree).\n";
  t += "# " + generated_by(c) + "\n";
  std::string tiers;
  for (const auto& tier : c.tiers()) tiers += (tiers.empty() ? "" : ", ") + tier.name;
  t += fmt::format("# Fabric tiers, closest first: {}. Level 0 is the leaf switches.\n", tiers.empty() ? "none" : tiers);
  if (options.skeleton_only)
    t += "# Skeleton only (Topograph's skeletonOnly): no Nodes=, so leaf switches are named only as children.\n";
  std::map<std::string, std::string> shortened;  // Slurm name -> short name
  if (options.name_shortener) {
    auto names = short_switch_names(c);
    for (const auto& sw : tree.switches)
      if (auto it = names.find(sw.model_name); it != names.end()) shortened[sw.name] = it->second;
  } else {
    for (const auto& [from, to] : tree.renamed) t += fmt::format("# switch '{}' is written as {} (Slurm switch names: [A-Za-z0-9_.-], at most 64)\n", from, to);
  }
  for (const auto& w : tree.warnings) t += "# note: " + w + "\n";
  auto name_of = [&](const std::string& n) {
    auto it = shortened.find(n);
    return it == shortened.end() ? n : it->second;
  };
  for (const auto& sw : tree.switches) {
    bool has_nodes = !sw.nodes.empty() && !options.skeleton_only;
    if (sw.switches.empty() && !has_nodes) continue;
    if (auto it = shortened.find(sw.name); it != shortened.end()) t += fmt::format("# {}={}\n", it->second, sw.model_name);
    t += "SwitchName=" + name_of(sw.name);
    if (!sw.switches.empty()) {
      std::vector<std::string> kids;
      for (const auto& k : sw.switches) kids.push_back(name_of(k));
      if (!shortened.empty()) std::sort(kids.begin(), kids.end());
      t += " Switches=" + compress_hostlist(kids);
    }
    if (has_nodes) t += " Nodes=" + compress_hostlist(sw.nodes);
    if (sw.link_GBps > 0) t += fmt::format(" LinkSpeed={}", static_cast<long>(std::lround(sw.link_GBps)));
    t += "\n";
  }
  return out;
}

}  // namespace toposched
