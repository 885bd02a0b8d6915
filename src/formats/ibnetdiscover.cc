#include "formats/ibnetdiscover.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "formats/discovery.h"
#include "formats/name_filter.h"
#include "formats/text_scan.h"
#include "topology/hostlist.h"

namespace toposched {
namespace {

enum class Kind { kSwitch, kCa };

struct Entity {
  std::string id;    // "S-..." / "H-..."
  std::string desc;  // the quoted description
  Kind kind = Kind::kCa;
  bool has_record = false;
  std::vector<int> peers;  // switches only
  double gbit = 0;         // CAs: the link rate of its port, 0 = unknown
};

// Link rate of a port line's last word, "4xNDR" -> 400 (Gbit/s); 0 when it is not one.
double link_gbit(std::string_view line) {
  // The last word, found without splitting the whole line (this runs once per port line).
  std::size_t end = line.size();
  while (end > 0 && (line[end - 1] == ' ' || line[end - 1] == '\t' || line[end - 1] == '\r')) --end;
  std::size_t start = end;
  while (start > 0 && line[start - 1] != ' ' && line[start - 1] != '\t') --start;
  std::string_view w = line.substr(start, end - start);
  auto x = w.find('x');
  if (x == std::string_view::npos || x == 0 || x > 2) return 0;
  int lanes = 0;
  for (std::size_t i = 0; i < x; ++i) {
    if (w[i] < '0' || w[i] > '9') return 0;
    lanes = lanes * 10 + (w[i] - '0');
  }
  static constexpr std::pair<std::string_view, double> kLane[] = {{"SDR", 2.5},  {"DDR", 5},   {"QDR", 10},
                                                                  {"FDR10", 10}, {"FDR", 14},  {"EDR", 25},
                                                                  {"HDR", 50},   {"NDR", 100}, {"XDR", 200}};
  for (auto [name, rate] : kLane)
    if (w.substr(x + 1) == name) return lanes * rate;
  return 0;
}

class UnionFind {
 public:
  explicit UnionFind(std::size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  std::size_t find(std::size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void unite(std::size_t a, std::size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);  // the earliest element stays the root
  }

 private:
  std::vector<std::size_t> parent_;
};

// Reads `"text"` at s[pos]; returns the text and moves pos past the closing quote.
std::optional<std::string_view> quoted(std::string_view s, std::size_t& pos) {
  if (pos >= s.size() || s[pos] != '"') return std::nullopt;
  auto end = s.find('"', pos + 1);
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view out = s.substr(pos + 1, end - pos - 1);
  pos = end + 1;
  return out;
}

void skip_space(std::string_view s, std::size_t& pos) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
}

// "[12]" optionally followed by "(hexguid)".
bool port_ref(std::string_view s, std::size_t& pos) {
  if (pos >= s.size() || s[pos] != '[') return false;
  auto end = s.find(']', pos);
  if (end == std::string_view::npos || end == pos + 1) return false;
  for (std::size_t k = pos + 1; k < end; ++k)
    if (s[k] < '0' || s[k] > '9') return false;
  pos = end + 1;
  if (pos < s.size() && s[pos] == '(') {
    auto close = s.find(')', pos);
    if (close == std::string_view::npos) return false;
    pos = close + 1;
  }
  return true;
}

// The first quoted string of a "# ..." comment: the description of the peer or the node.
std::string_view comment_desc(std::string_view s, std::size_t pos) {
  auto hash = s.find('#', pos);
  if (hash == std::string_view::npos) return {};
  auto q = s.find('"', hash);
  if (q == std::string_view::npos) return {};
  std::size_t p = q;
  auto d = quoted(s, p);
  return d ? *d : std::string_view();
}

std::string switch_display_name(const Entity& e) {
  // "MF0;SU1-LEAF-R0:MQM9701/U1" -> "SU1-LEAF-R0" (Topograph's rule); a plain word as is.
  const std::string& d = e.desc;
  auto semi = d.find(';');
  if (semi != std::string::npos) {
    auto colon = d.find(':', semi + 1);
    if (colon != std::string::npos && colon > semi + 1 && d.find(';', semi + 1) > colon) {
      std::string n = d.substr(semi + 1, colon - semi - 1);
      if (n.find_first_of(" \t") == std::string::npos) return n;
    }
  }
  if (!d.empty() && d.find_first_of(" \t;:") == std::string::npos) return d;
  return e.id;
}

bool is_separator(char c) { return c == '-' || c == '_' || c == '.' || c == ':' || c == '/'; }

// A merged group's name: the members' common prefix up to a separator ("SU1-LEAF-R0",
// "SU1-LEAF-R1" -> "SU1-LEAF"), else "<tier>-group-<k>".
std::string group_name(const std::vector<std::string>& members, const std::string& tier, int k) {
  if (members.size() == 1) return members[0];
  std::string prefix = members[0];
  for (const auto& m : members) {
    std::size_t n = 0;
    while (n < prefix.size() && n < m.size() && prefix[n] == m[n]) ++n;
    prefix.resize(n);
  }
  std::size_t cut = prefix.size();
  while (cut > 0 && !is_separator(prefix[cut - 1])) --cut;
  while (cut > 0 && is_separator(prefix[cut - 1])) --cut;
  if (cut >= 2) return prefix.substr(0, cut);
  return fmt::format("{}-group-{}", tier, k);
}

std::string unique_name(std::string name, std::unordered_set<std::string>& taken) {
  if (taken.insert(name).second) return name;
  for (int k = 2;; ++k) {
    std::string n = fmt::format("{}-{}", name, k);
    if (taken.insert(n).second) return n;
  }
}

}  // namespace

bool looks_like_ibnetdiscover(std::string_view text) {
  for (const auto& l : split_lines(text.substr(0, 1 << 16))) {
    auto t = tokenize(l.text);
    if (!t.empty() && (t[0].text == "Switch" || t[0].text == "Ca") && t.size() >= 3 && t[2].text.starts_with("\""))
      return true;
  }
  return false;
}

Result<IbnetFabric> read_ibnetdiscover(std::string_view text, const std::string& file, const IbnetOptions& options) {
  std::optional<NameFilter> hca_re;
  if (options.hca_regex) {
    auto f = NameFilter::compile(*options.hca_regex, "--hca");
    if (!f) return tl::unexpected(f.error());
    hca_re = *f;
  }

  std::vector<Entity> ents;
  std::unordered_map<std::string, int> index;
  auto entity = [&](std::string_view id, Kind kind_guess) -> int {
    auto [it, inserted] = index.try_emplace(std::string(id), static_cast<int>(ents.size()));
    if (inserted) {
      Entity e;
      e.id = std::string(id);
      e.kind = kind_guess;
      ents.push_back(std::move(e));
    }
    return it->second;
  };
  std::vector<std::pair<int, int>> links;  // (switch, peer)
  int current = -1;                        // entity of the record being read
  for (const auto& l : split_lines(text)) {
    std::string_view s = l.text;
    std::size_t pos = 0;
    skip_space(s, pos);
    if (pos >= s.size() || s[pos] == '#') continue;
    std::string_view rest = s.substr(pos);
    if (rest.find('=') != std::string_view::npos && rest[0] != '[' && rest[0] != '"' &&
        rest.find('"') == std::string_view::npos)
      continue;  // vendid=, devid=, sysimgguid=, switchguid=, caguid=
    auto bad = [&](std::string_view what) {
      return make_error(ErrorCode::kParse, fmt::format("expected {}, found '{}'", what, printable(rest)),
                        at(file, l.number, static_cast<int>(pos) + 1));
    };
    if (rest.starts_with("Switch") || rest.starts_with("Ca") || rest.starts_with("Rt")) {
      const bool sw = rest.starts_with("Switch");
      std::size_t p = pos + (sw ? 6 : 2);
      skip_space(s, p);
      std::size_t digits = p;
      while (p < s.size() && s[p] >= '0' && s[p] <= '9') ++p;
      if (p == digits) return bad("a node line such as 'Switch 65 \"S-<guid>\" # \"<description>\"'");
      skip_space(s, p);
      auto id = quoted(s, p);
      if (!id || id->empty()) return bad("a quoted node id after the port count");
      current = entity(*id, sw ? Kind::kSwitch : Kind::kCa);
      Entity& e = ents[static_cast<std::size_t>(current)];
      e.kind = sw ? Kind::kSwitch : Kind::kCa;
      e.has_record = true;
      std::string_view d = comment_desc(s, p);
      if (!d.empty()) e.desc = std::string(d);
      continue;
    }
    if (rest[0] == '[') {
      if (current < 0) return bad("a 'Switch' or 'Ca' line before its port lines");
      std::size_t p = pos;
      if (!port_ref(s, p)) return bad("a port line such as '[1] \"S-<guid>\"[5] # \"<description>\"'");
      skip_space(s, p);
      auto peer = quoted(s, p);
      if (!peer || peer->empty() || !port_ref(s, p))
        return bad("a port line such as '[1] \"S-<guid>\"[5] # \"<description>\"'");
      const Kind guess = peer->starts_with("S-") ? Kind::kSwitch : Kind::kCa;
      int peer_id = entity(*peer, guess);
      Entity& pe = ents[static_cast<std::size_t>(peer_id)];
      std::string_view d = comment_desc(s, p);
      if (!pe.has_record && pe.desc.empty() && !d.empty()) pe.desc = std::string(d);
      Entity& ce = ents[static_cast<std::size_t>(current)];
      const double gbit = link_gbit(s.substr(p));
      if (ce.kind == Kind::kSwitch) {
        links.emplace_back(current, peer_id);
        if (pe.kind == Kind::kCa && gbit > 0) pe.gbit = gbit;
      } else if (pe.kind == Kind::kSwitch) {
        links.emplace_back(peer_id, current);
        if (gbit > 0) ce.gbit = gbit;
      }
      continue;
    }
    return bad("an ibnetdiscover line (a 'Switch'/'Ca' node line, a '[port]' line, 'key=value' or a comment)");
  }
  for (auto [a, b] : links) {
    ents[static_cast<std::size_t>(a)].peers.push_back(b);
    if (ents[static_cast<std::size_t>(b)].kind == Kind::kSwitch) ents[static_cast<std::size_t>(b)].peers.push_back(a);
  }

  IbnetFabric out;
  out.topology.source = file;
  IbnetStats& st = out.stats;

  // Classify CAs.
  enum class CaRole { kNone, kHca, kUnnamed, kAggregation, kFiltered };
  std::vector<CaRole> role(ents.size(), CaRole::kNone);
  std::vector<int> ca_node(ents.size(), -1);
  std::vector<std::string> node_names;
  std::vector<double> node_gbit;  // per node: link rate of its kept HCAs
  std::unordered_map<std::string, int> node_index;
  std::vector<std::string> unnamed_examples;
  for (std::size_t i = 0; i < ents.size(); ++i) {
    const Entity& e = ents[i];
    if (e.kind == Kind::kSwitch) {
      ++st.switches;
      continue;
    }
    ++st.cas;
    if (e.desc.find("Aggregation Node") != std::string::npos) {
      role[i] = CaRole::kAggregation;
      ++st.aggregation_nodes;
      continue;
    }
    auto words = tokenize(e.desc);
    if (words.size() != 2) {
      role[i] = CaRole::kUnnamed;
      ++st.skipped_unnamed;
      if (unnamed_examples.size() < 3) unnamed_examples.push_back(fmt::format("{} \"{}\"", e.id, printable(e.desc)));
      continue;
    }
    if (hca_re && !hca_re->matches(words[1].text)) {
      role[i] = CaRole::kFiltered;
      ++st.filtered_hcas;
      continue;
    }
    role[i] = CaRole::kHca;
    ++st.kept_hcas;
    auto [it, inserted] = node_index.try_emplace(std::string(words[0].text), static_cast<int>(node_names.size()));
    if (inserted) {
      node_names.emplace_back(words[0].text);
      node_gbit.push_back(e.gbit);
    } else if (e.gbit > 0) {
      // The slowest HCA of the node bounds what its NICs deliver.
      double& g = node_gbit[static_cast<std::size_t>(it->second)];
      g = g > 0 ? std::min(g, e.gbit) : e.gbit;
    }
    ca_node[i] = it->second;
  }
  if (st.skipped_unnamed > 0)
    out.topology.warnings.push_back(fmt::format(
        "skipped {} CA(s) whose description is not '<host> <device>' (set a node name map or run rdma-ndd): {}{}",
        st.skipped_unnamed, fmt::join(unnamed_examples, ", "), st.skipped_unnamed > 3 ? ", ..." : ""));
  if (st.aggregation_nodes > 0)
    out.topology.warnings.push_back(
        fmt::format("skipped {} SHARP aggregation node(s) (switch-internal, not hosts)", st.aggregation_nodes));

  // Leaves and edge switches.
  std::vector<int> leaves;                   // switch entity ids
  std::vector<std::vector<int>> leaf_nodes;  // sorted node ids per leaf
  std::vector<char> edge(ents.size(), 0);    // holds a host CA: never an upper-tier switch
  std::vector<std::string> display(ents.size());
  std::unordered_set<std::string> taken_display;
  for (std::size_t i = 0; i < ents.size(); ++i) {
    Entity& e = ents[i];
    if (e.kind != Kind::kSwitch) continue;
    std::sort(e.peers.begin(), e.peers.end());
    e.peers.erase(std::unique(e.peers.begin(), e.peers.end()), e.peers.end());
    display[i] = switch_display_name(e);
    if (!taken_display.insert(display[i]).second) display[i] = display[i] + "-" + e.id;
    std::vector<int> nodes;
    for (int p : e.peers) {
      CaRole r = role[static_cast<std::size_t>(p)];
      if (r == CaRole::kHca || r == CaRole::kUnnamed || r == CaRole::kFiltered) edge[i] = 1;
      if (r == CaRole::kHca) nodes.push_back(ca_node[static_cast<std::size_t>(p)]);
    }
    if (nodes.empty()) continue;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    leaves.push_back(static_cast<int>(i));
    leaf_nodes.push_back(std::move(nodes));
  }
  if (leaves.empty()) return out;  // no switch holds a host: an empty fabric

  // Leaf groups: leaves sharing most of their nodes (Jaccard > 1/2) are one group.
  const std::size_t nl = leaves.size();
  std::vector<std::vector<int>> node_leaves(node_names.size());
  for (std::size_t k = 0; k < nl; ++k)
    for (int n : leaf_nodes[k]) node_leaves[static_cast<std::size_t>(n)].push_back(static_cast<int>(k));
  UnionFind uf(nl);
  std::unordered_set<std::uint64_t> tried;
  for (const auto& ls : node_leaves)
    for (std::size_t x = 0; x < ls.size(); ++x)
      for (std::size_t y = x + 1; y < ls.size(); ++y) {
        const auto a = static_cast<std::size_t>(ls[x]), b = static_cast<std::size_t>(ls[y]);
        if (!tried.insert((static_cast<std::uint64_t>(a) << 32) | b).second) continue;
        std::vector<int> common;
        std::set_intersection(leaf_nodes[a].begin(), leaf_nodes[a].end(), leaf_nodes[b].begin(), leaf_nodes[b].end(),
                              std::back_inserter(common));
        const std::size_t uni = leaf_nodes[a].size() + leaf_nodes[b].size() - common.size();
        if (2 * common.size() > uni) uf.unite(a, b);
      }
  std::vector<int> group_of_leaf(nl, -1);
  std::vector<std::vector<std::size_t>> groups;  // leaf indices
  for (std::size_t k = 0; k < nl; ++k) {
    const std::size_t r = uf.find(k);
    if (group_of_leaf[r] < 0) {
      group_of_leaf[r] = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    group_of_leaf[k] = group_of_leaf[r];
    groups[static_cast<std::size_t>(group_of_leaf[k])].push_back(k);
  }
  std::vector<std::size_t> group_size(groups.size(), 0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<int> all;
    for (std::size_t k : groups[g]) all.insert(all.end(), leaf_nodes[k].begin(), leaf_nodes[k].end());
    std::sort(all.begin(), all.end());
    group_size[g] = static_cast<std::size_t>(std::unique(all.begin(), all.end()) - all.begin());
  }
  // Each node goes under the smallest group it reaches.
  std::vector<int> node_group(node_names.size(), -1);
  std::vector<std::size_t> assigned(groups.size(), 0);
  std::vector<std::string> multi;
  for (std::size_t n = 0; n < node_names.size(); ++n) {
    std::vector<int> gs;
    for (int k : node_leaves[n]) gs.push_back(group_of_leaf[static_cast<std::size_t>(k)]);
    std::sort(gs.begin(), gs.end());
    gs.erase(std::unique(gs.begin(), gs.end()), gs.end());
    if (gs.empty()) continue;
    int best = gs[0];
    for (int g : gs)
      if (group_size[static_cast<std::size_t>(g)] < group_size[static_cast<std::size_t>(best)]) best = g;
    if (gs.size() > 1) multi.push_back(node_names[n]);
    node_group[n] = best;
    ++assigned[static_cast<std::size_t>(best)];
  }
  st.nodes_in_several_leaf_groups = static_cast<int>(multi.size());
  std::vector<char> group_kept(groups.size(), 0);
  std::vector<std::string> dropped;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    group_kept[g] = assigned[g] > 0;
    if (!group_kept[g])
      for (std::size_t k : groups[g]) dropped.push_back(display[static_cast<std::size_t>(leaves[k])]);
  }
  if (!multi.empty()) {
    std::sort(multi.begin(), multi.end(), natural_less);
    out.topology.warnings.push_back(fmt::format(
        "{} node(s) reach several leaf groups (a second fabric such as storage, or miscabling): {}; each is placed "
        "under the smallest group it reaches{}. Pass --hca REGEX to keep only the compute HCAs",
        multi.size(), compress_hostlist(multi),
        dropped.empty() ? std::string()
                        : fmt::format("; leaf switch(es) {} keep no node and are left out", fmt::join(dropped, ", "))));
  }

  // Tier 0 groups, then build upward.
  struct Group {
    std::vector<int> switches;  // entity ids
    int tier = 0;
    int parent = -1;  // index into all_groups
    std::string name;
  };
  std::vector<Group> all;
  std::vector<int> switch_group(ents.size(), -1);
  std::vector<char> visited(ents.size(), 0);
  for (std::size_t i = 0; i < ents.size(); ++i)
    if (edge[i]) visited[i] = 1;
  std::vector<int> level;  // group indices of the current tier
  std::vector<int> kept_index(groups.size(), -1);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!group_kept[g]) continue;
    Group gr;
    for (std::size_t k : groups[g]) gr.switches.push_back(leaves[k]);
    kept_index[g] = static_cast<int>(all.size());
    for (int s : gr.switches) switch_group[static_cast<std::size_t>(s)] = static_cast<int>(all.size());
    level.push_back(static_cast<int>(all.size()));
    all.push_back(std::move(gr));
  }
  int tier = 0;
  while (!level.empty() && tier < 64) {
    // Candidates: unvisited switches linked to a switch of this tier.
    std::vector<int> cands;
    std::unordered_map<int, std::vector<int>> cand_children;  // candidate -> child groups
    for (int g : level)
      for (int s : all[static_cast<std::size_t>(g)].switches)
        for (int p : ents[static_cast<std::size_t>(s)].peers) {
          if (ents[static_cast<std::size_t>(p)].kind != Kind::kSwitch || visited[static_cast<std::size_t>(p)] ||
              switch_group[static_cast<std::size_t>(p)] >= 0)
            continue;
          auto [it, inserted] = cand_children.try_emplace(p);
          if (inserted) cands.push_back(p);
          it->second.push_back(g);
        }
    if (cands.empty()) break;
    std::sort(cands.begin(), cands.end());
    std::unordered_map<int, std::size_t> cand_pos;
    for (std::size_t k = 0; k < cands.size(); ++k) cand_pos[cands[k]] = k;
    UnionFind cu(cands.size());
    std::unordered_map<int, std::size_t> first_cand_of_child;
    for (std::size_t k = 0; k < cands.size(); ++k)
      for (int child : cand_children[cands[k]]) {
        auto [it, inserted] = first_cand_of_child.try_emplace(child, k);
        if (!inserted) cu.unite(it->second, k);
      }
    std::unordered_map<std::size_t, int> root_group;
    std::vector<int> next;
    for (std::size_t k = 0; k < cands.size(); ++k) {
      auto [it, inserted] = root_group.try_emplace(cu.find(k), static_cast<int>(all.size()));
      if (inserted) {
        Group gr;
        gr.tier = tier + 1;
        next.push_back(static_cast<int>(all.size()));
        all.push_back(std::move(gr));
      }
      all[static_cast<std::size_t>(it->second)].switches.push_back(cands[k]);
      switch_group[static_cast<std::size_t>(cands[k])] = it->second;
      visited[static_cast<std::size_t>(cands[k])] = 1;
    }
    for (auto& [child, k] : first_cand_of_child) all[static_cast<std::size_t>(child)].parent = root_group[cu.find(k)];
    level = std::move(next);
    ++tier;
  }
  const int tiers =
      1 + std::accumulate(all.begin(), all.end(), 0, [](int m, const Group& g) { return std::max(m, g.tier); });
  for (int t = 0; t < tiers; ++t) out.topology.tiers.push_back(tier_name_for_level(t));
  std::unordered_set<std::string> taken;
  std::vector<int> counter(static_cast<std::size_t>(tiers), 0);
  for (auto& g : all) {
    std::vector<std::string> members;
    for (int s : g.switches) members.push_back(display[static_cast<std::size_t>(s)]);
    std::sort(members.begin(), members.end(), natural_less);
    g.name = unique_name(group_name(members, tier_name_for_level(g.tier), ++counter[static_cast<std::size_t>(g.tier)]),
                         taken);
  }
  for (const auto& g : all)
    out.topology.switches.push_back(
        {g.name, g.tier, g.parent >= 0 ? all[static_cast<std::size_t>(g.parent)].name : std::string()});
  st.leaf_groups = static_cast<int>(std::count_if(all.begin(), all.end(), [](const Group& g) { return g.tier == 0; }));
  for (std::size_t n = 0; n < node_names.size(); ++n) {
    if (node_group[n] < 0) continue;
    DiscoveredNode dn;
    dn.name = node_names[n];
    dn.nic_gbit = node_gbit[n];
    dn.switch_name = all[static_cast<std::size_t>(kept_index[static_cast<std::size_t>(node_group[n])])].name;
    out.topology.nodes.push_back(std::move(dn));
  }
  return out;
}

}  // namespace toposched
