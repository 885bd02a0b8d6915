#include "formats/volcano.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "topology/hostlist.h"

namespace toposched {
namespace {

using Json = nlohmann::ordered_json;

// The leaf switch that holds all of a domain's nodes, or invalid.
SwitchId domain_leaf(const Cluster& c, DomainId d) {
  const auto& nodes = c.domain_nodes(d);
  if (nodes.empty()) return SwitchId();
  SwitchId s = c.node_switch(nodes.front());
  for (NodeId n : nodes)
    if (c.node_switch(n) != s) return SwitchId();
  return s;
}

// True when every accelerator domain with nodes sits under one leaf switch (or there are no
// switches at all), so the domains can be a HyperNode level below the leaves.
bool domains_nest(const Cluster& c) {
  if (c.domain_count() == 0) return false;
  if (c.switch_count() == 0) return true;
  for (std::uint32_t d = 0; d < c.domain_count(); ++d)
    if (!c.domain_nodes(DomainId(d)).empty() && !domain_leaf(c, DomainId(d)).valid()) return false;
  return true;
}

// The domain level's tierName, unless a fabric tier already has that name (tier names are
// unique in a cluster, and Volcano's name -> tier map needs them unique here too).
std::string domain_tier_name(const Cluster& c) {
  std::string name(kVolcanoDomainTierName);
  for (const auto& t : c.tiers())
    if (t.name == name) return name + "-nvlink";
  return name;
}

// The levels a Volcano job's networkTopology can name, for the file's header:
// "# Tiers for networkTopology.highestTierAllowed = highestTierName: 1 = accelerator-domain, 2 = leaf"
std::string tiers_comment(const std::vector<VolcanoTier>& tiers) {
  std::string line = "# Tiers for networkTopology.highestTierAllowed = highestTierName:";
  for (std::size_t i = 0; i < tiers.size(); ++i)
    line += fmt::format("{} {} = {}", i ? "," : "", tiers[i].tier, tiers[i].tier_name);
  return line + "\n";
}

// The warning for nodes no HyperNode holds (under no switch, in no domain HyperNode), or none.
std::optional<std::string> unheld_nodes_warning(const Cluster& c, const std::vector<char>& node_in_domain_object,
                                                const std::vector<std::string>& node_names_k8s) {
  std::vector<std::string> left_out;
  for (std::uint32_t i = 0; i < c.node_count(); ++i)
    if (!c.node_switch(NodeId(i)).valid() && !node_in_domain_object[i]) left_out.push_back(node_names_k8s[i]);
  if (left_out.empty()) return std::nullopt;
  return fmt::format("{} node(s) are under no switch and in no accelerator domain, so no HyperNode holds them "
                     "and Volcano's network-topology-aware scheduling cannot place on them: {}{}",
                     left_out.size(),
                     fmt::join(left_out.begin(), left_out.begin() + std::min<std::size_t>(left_out.size(), 5), ", "),
                     left_out.size() > 5 ? ", ..." : "");
}

}  // namespace

std::vector<VolcanoTier> volcano_tiers(const Cluster& c) {
  std::vector<VolcanoTier> out;
  if (domains_nest(c)) out.push_back({1, domain_tier_name(c), std::nullopt});
  const int first_fabric = static_cast<int>(out.size()) + 1;
  for (std::size_t t = 0; t < c.tiers().size(); ++t)
    out.push_back({first_fabric + static_cast<int>(t), c.tiers()[t].name, static_cast<int>(t)});
  return out;
}

// long: the HyperNode tree in one pass; its member lambdas share the name map and the levels
Result<ExportOutput> write_volcano(const Cluster& c, const ExportOptions& options) {
  ExportOutput out;
  // A HyperNode is named by its parent's exactMatch member too, which Volcano's admission
  // policy checks as a qualified name: at most 63 characters.
  NameMap names(NameMap::Target::kK8sMember);
  std::vector<std::string> node_names_k8s;
  for (std::uint32_t i = 0; i < c.node_count(); ++i) {
    TOPOSCHED_TRY(name, k8s_node_name(c, NodeId(i), options));
    node_names_k8s.push_back(std::move(name));
  }
  std::vector<std::string> long_names;
  const std::vector<VolcanoTier> tiers = volcano_tiers(c);
  const bool with_domains = !tiers.empty() && !tiers.front().fabric_tier;
  if (c.domain_count() > 0 && !with_domains)
    out.warnings.push_back("accelerator domains span several switches, so they are not written as HyperNodes (a HyperNode tree needs nesting)");
  // tiers[] holds the domain level first when there is one, then fabric tier t.
  auto level_of_fabric_tier = [&](int t) -> const VolcanoTier& {
    return tiers[static_cast<std::size_t>(t + (with_domains ? 1 : 0))];
  };

  auto node_members = [&](const std::vector<NodeId>& nodes) {
    Json members = Json::array();
    if (nodes.empty()) return members;
    std::vector<std::string> node_names;
    for (NodeId n : nodes) node_names.push_back(node_names_k8s[n.index()]);
    if (options.member_style == MemberStyle::kRegex) {
      members.push_back({{"type", "Node"}, {"selector", {{"regexMatch", {{"pattern", hostlist_regex(node_names)}}}}}});
      return members;
    }
    for (const auto& n : node_names) {
      // exactMatch names are qualified names (<= 63 characters) for Volcano's admission
      // policy; a longer node name is matched by an anchored regex of itself instead.
      if (n.size() <= 63) {
        members.push_back({{"type", "Node"}, {"selector", {{"exactMatch", {{"name", n}}}}}});
      } else {
        members.push_back({{"type", "Node"}, {"selector", {{"regexMatch", {{"pattern", hostlist_regex({n})}}}}}});
        long_names.push_back(n);
      }
    }
    return members;
  };
  auto hypernode = [&](const std::string& name, int tier, const std::string& tier_name, Json members) {
    return Json{{"apiVersion", "topology.volcano.sh/v1alpha1"},
                {"kind", "HyperNode"},
                {"metadata", {{"name", name}}},
                {"spec", {{"tier", tier}, {"tierName", tier_name}, {"members", std::move(members)}}}};
  };

  std::vector<Json> docs;
  std::vector<std::vector<DomainId>> domains_under(c.switch_count());
  std::vector<char> node_in_domain_object(c.node_count(), 0);
  if (with_domains) {
    for (std::uint32_t d = 0; d < c.domain_count(); ++d) {
      DomainId id(d);
      if (c.domain_nodes(id).empty()) continue;
      docs.push_back(hypernode(names("domain-" + c.domain(id).name), tiers.front().tier, tiers.front().tier_name,
                               node_members(c.domain_nodes(id))));
      if (SwitchId leaf = domain_leaf(c, id); leaf.valid()) domains_under[leaf.index()].push_back(id);
      for (NodeId n : c.domain_nodes(id)) node_in_domain_object[n.index()] = 1;
    }
  }
  std::vector<SwitchId> order;
  for (std::uint32_t s = 0; s < c.switch_count(); ++s)
    if (!c.switch_subtree_nodes(SwitchId(s)).empty()) order.push_back(SwitchId(s));
  std::stable_sort(order.begin(), order.end(), [&](SwitchId a, SwitchId b) { return c.switch_tier(a) < c.switch_tier(b); });
  for (SwitchId s : order) {
    Json members = Json::array();
    for (SwitchId k : c.switch_children(s))
      if (!c.switch_subtree_nodes(k).empty())
        members.push_back({{"type", "HyperNode"}, {"selector", {{"exactMatch", {{"name", names(c.switch_name(k))}}}}}});
    for (DomainId d : domains_under[s.index()])
      members.push_back({{"type", "HyperNode"}, {"selector", {{"exactMatch", {{"name", names("domain-" + c.domain(d).name)}}}}}});
    std::vector<NodeId> direct;
    for (NodeId n : c.switch_nodes(s))
      if (!node_in_domain_object[n.index()]) direct.push_back(n);
    for (auto& m : node_members(direct)) members.push_back(std::move(m));
    const VolcanoTier& level = level_of_fabric_tier(c.switch_tier(s));
    docs.push_back(hypernode(names(c.switch_name(s)), level.tier, level.tier_name, std::move(members)));
  }
  if (!long_names.empty())
    out.warnings.push_back(fmt::format("{} node name(s) are longer than the 63 characters of an exactMatch member ({}...): "
                                       "they are matched by an anchored regexMatch instead", long_names.size(), long_names.front().substr(0, 40)));
  if (auto w = unheld_nodes_warning(c, node_in_domain_object, node_names_k8s)) out.warnings.push_back(*w);
  std::string& t = out.text;
  t += "# Volcano network topology: one HyperNode per switch";
  t += with_domains ? " and per accelerator domain" : "";
  t += " (tier 1 is the finest).\n# " + generated_by(c) + "\n";
  if (!tiers.empty()) t += tiers_comment(tiers);
  for (const auto& [from, to] : names.renamed()) t += fmt::format("# '{}' is HyperNode {}\n", from, to);
  for (const auto& w : out.warnings) t += "# note: " + w + "\n";
  if (docs.empty()) out.warnings.push_back("the cluster has no switches or accelerator domains: no HyperNode to write");
  for (std::size_t i = 0; i < docs.size(); ++i) t += (i ? "---\n" : "") + json_to_yaml(docs[i]);
  return out;
}

}  // namespace toposched
