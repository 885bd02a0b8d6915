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

namespace {

// Phase 1: the dump's node records and port lines, as entities and switch links.
struct ParsedDump {
  std::vector<Entity> ents;
  std::vector<std::pair<int, int>> links;  // (switch, peer)
};

class DumpParser {
 public:
  explicit DumpParser(const std::string& file) : file_(file) {}

  Result<ParsedDump> parse(std::string_view text) {
    for (const auto& l : split_lines(text)) {
      std::string_view s = l.text;
      std::size_t pos = 0;
      skip_space(s, pos);
      if (pos >= s.size() || s[pos] == '#') continue;
      std::string_view rest = s.substr(pos);
      if (rest.find('=') != std::string_view::npos && rest[0] != '[' && rest[0] != '"' &&
          rest.find('"') == std::string_view::npos)
        continue;  // vendid=, devid=, sysimgguid=, switchguid=, caguid=
      const Line line{s, rest, pos, l.number};
      Result<void> read;
      if (rest.starts_with("Switch") || rest.starts_with("Ca") || rest.starts_with("Rt"))
        read = node_line(line);
      else if (rest[0] == '[')
        read = port_line(line);
      else
        return bad(line, "an ibnetdiscover line (a 'Switch'/'Ca' node line, a '[port]' line, 'key=value' or a "
                         "comment)");
      if (!read) return tl::unexpected(read.error());
    }
    return std::move(dump_);
  }

 private:
  struct Line {
    std::string_view s;     // the whole line
    std::string_view rest;  // from its first non-blank character
    std::size_t pos;        // where rest starts
    int number;
  };

  tl::unexpected<Error> bad(const Line& l, std::string_view what) const {
    return make_error(ErrorCode::kParse, fmt::format("expected {}, found '{}'", what, printable(l.rest)),
                      at(file_, l.number, static_cast<int>(l.pos) + 1));
  }

  int entity(std::string_view id, Kind kind_guess) {
    auto [it, inserted] = index_.try_emplace(std::string(id), static_cast<int>(dump_.ents.size()));
    if (inserted) {
      Entity e;
      e.id = std::string(id);
      e.kind = kind_guess;
      dump_.ents.push_back(std::move(e));
    }
    return it->second;
  }

  // "Switch 65 \"S-<guid>\" # \"<description>\"" (or Ca / Rt): starts a record.
  Result<void> node_line(const Line& l) {
    const bool sw = l.rest.starts_with("Switch");
    std::size_t p = l.pos + (sw ? 6 : 2);
    skip_space(l.s, p);
    std::size_t digits = p;
    while (p < l.s.size() && l.s[p] >= '0' && l.s[p] <= '9') ++p;
    if (p == digits) return bad(l, "a node line such as 'Switch 65 \"S-<guid>\" # \"<description>\"'");
    skip_space(l.s, p);
    auto id = quoted(l.s, p);
    if (!id || id->empty()) return bad(l, "a quoted node id after the port count");
    current_ = entity(*id, sw ? Kind::kSwitch : Kind::kCa);
    Entity& e = dump_.ents[static_cast<std::size_t>(current_)];
    e.kind = sw ? Kind::kSwitch : Kind::kCa;
    e.has_record = true;
    std::string_view d = comment_desc(l.s, p);
    if (!d.empty()) e.desc = std::string(d);
    return {};
  }

  // "[1] \"S-<guid>\"[5] # \"<description>\" ... 4xNDR": a link of the current record.
  Result<void> port_line(const Line& l) {
    constexpr std::string_view kPortLine = "a port line such as '[1] \"S-<guid>\"[5] # \"<description>\"'";
    if (current_ < 0) return bad(l, "a 'Switch' or 'Ca' line before its port lines");
    std::size_t p = l.pos;
    if (!port_ref(l.s, p)) return bad(l, kPortLine);
    skip_space(l.s, p);
    auto peer = quoted(l.s, p);
    if (!peer || peer->empty() || !port_ref(l.s, p)) return bad(l, kPortLine);
    const Kind guess = peer->starts_with("S-") ? Kind::kSwitch : Kind::kCa;
    int peer_id = entity(*peer, guess);
    Entity& pe = dump_.ents[static_cast<std::size_t>(peer_id)];
    std::string_view d = comment_desc(l.s, p);
    if (!pe.has_record && pe.desc.empty() && !d.empty()) pe.desc = std::string(d);
    Entity& ce = dump_.ents[static_cast<std::size_t>(current_)];
    const double gbit = link_gbit(l.s.substr(p));
    if (ce.kind == Kind::kSwitch) {
      dump_.links.emplace_back(current_, peer_id);
      if (pe.kind == Kind::kCa && gbit > 0) pe.gbit = gbit;
    } else if (pe.kind == Kind::kSwitch) {
      dump_.links.emplace_back(peer_id, current_);
      if (gbit > 0) ce.gbit = gbit;
    }
    return {};
  }

  const std::string& file_;
  ParsedDump dump_;
  std::unordered_map<std::string, int> index_;
  int current_ = -1;  // entity of the record being read
};

// Each switch learns its peers; a CA peer is listed on the switch only.
void link_peers(ParsedDump& dump) {
  for (auto [a, b] : dump.links) {
    dump.ents[static_cast<std::size_t>(a)].peers.push_back(b);
    if (dump.ents[static_cast<std::size_t>(b)].kind == Kind::kSwitch)
      dump.ents[static_cast<std::size_t>(b)].peers.push_back(a);
  }
}

// Phase 2: which CAs are compute HCAs, and the nodes they name.
enum class CaRole { kNone, kHca, kUnnamed, kAggregation, kFiltered };

struct HostNodes {
  std::vector<CaRole> role;          // per entity
  std::vector<int> ca_node;          // per entity: its node, -1 unless an HCA
  std::vector<std::string> names;    // per node, in order of first appearance
  std::vector<double> gbit;          // per node: link rate of its kept HCAs
  std::vector<std::string> warnings;
};

// Counts one CA into `nodes`: kept, skipped as unnamed or aggregation, or filtered out.
void classify_ca(const Entity& e, std::size_t i, const std::optional<NameFilter>& hca_re, HostNodes& nodes,
                 std::unordered_map<std::string, int>& node_index, std::vector<std::string>& unnamed_examples,
                 IbnetStats& st) {
  ++st.cas;
  if (e.desc.find("Aggregation Node") != std::string::npos) {
    nodes.role[i] = CaRole::kAggregation;
    ++st.aggregation_nodes;
    return;
  }
  auto words = tokenize(e.desc);
  if (words.size() != 2) {
    nodes.role[i] = CaRole::kUnnamed;
    ++st.skipped_unnamed;
    if (unnamed_examples.size() < 3) unnamed_examples.push_back(fmt::format("{} \"{}\"", e.id, printable(e.desc)));
    return;
  }
  if (hca_re && !hca_re->matches(words[1].text)) {
    nodes.role[i] = CaRole::kFiltered;
    ++st.filtered_hcas;
    return;
  }
  nodes.role[i] = CaRole::kHca;
  ++st.kept_hcas;
  auto [it, inserted] = node_index.try_emplace(std::string(words[0].text), static_cast<int>(nodes.names.size()));
  if (inserted) {
    nodes.names.emplace_back(words[0].text);
    nodes.gbit.push_back(e.gbit);
  } else if (e.gbit > 0) {
    // The slowest HCA of the node bounds what its NICs deliver.
    double& g = nodes.gbit[static_cast<std::size_t>(it->second)];
    g = g > 0 ? std::min(g, e.gbit) : e.gbit;
  }
  nodes.ca_node[i] = it->second;
}

HostNodes classify_cas(const std::vector<Entity>& ents, const std::optional<NameFilter>& hca_re, IbnetStats& st) {
  HostNodes nodes;
  nodes.role.assign(ents.size(), CaRole::kNone);
  nodes.ca_node.assign(ents.size(), -1);
  std::unordered_map<std::string, int> node_index;
  std::vector<std::string> unnamed_examples;
  for (std::size_t i = 0; i < ents.size(); ++i) {
    if (ents[i].kind == Kind::kSwitch) {
      ++st.switches;
      continue;
    }
    classify_ca(ents[i], i, hca_re, nodes, node_index, unnamed_examples, st);
  }
  if (st.skipped_unnamed > 0)
    nodes.warnings.push_back(fmt::format(
        "skipped {} CA(s) whose description is not '<host> <device>' (set a node name map or run rdma-ndd): {}{}",
        st.skipped_unnamed, fmt::join(unnamed_examples, ", "), st.skipped_unnamed > 3 ? ", ..." : ""));
  if (st.aggregation_nodes > 0)
    nodes.warnings.push_back(
        fmt::format("skipped {} SHARP aggregation node(s) (switch-internal, not hosts)", st.aggregation_nodes));
  return nodes;
}

// Phase 3: the leaf switches (those holding a kept HCA) and every switch's display name.
struct Leaves {
  std::vector<int> switches;               // leaf switch entity ids
  std::vector<std::vector<int>> nodes;     // sorted node ids per leaf
  std::vector<char> edge;                  // per entity: holds a host CA, never an upper-tier switch
  std::vector<std::string> display;        // per entity: the switch's name
};

Leaves find_leaves(std::vector<Entity>& ents, const HostNodes& hosts) {
  Leaves out;
  out.edge.assign(ents.size(), 0);
  out.display.resize(ents.size());
  std::unordered_set<std::string> taken_display;
  for (std::size_t i = 0; i < ents.size(); ++i) {
    Entity& e = ents[i];
    if (e.kind != Kind::kSwitch) continue;
    std::sort(e.peers.begin(), e.peers.end());
    e.peers.erase(std::unique(e.peers.begin(), e.peers.end()), e.peers.end());
    out.display[i] = switch_display_name(e);
    if (!taken_display.insert(out.display[i]).second) out.display[i] = out.display[i] + "-" + e.id;
    std::vector<int> nodes;
    for (int p : e.peers) {
      CaRole r = hosts.role[static_cast<std::size_t>(p)];
      if (r == CaRole::kHca || r == CaRole::kUnnamed || r == CaRole::kFiltered) out.edge[i] = 1;
      if (r == CaRole::kHca) nodes.push_back(hosts.ca_node[static_cast<std::size_t>(p)]);
    }
    if (nodes.empty()) continue;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    out.switches.push_back(static_cast<int>(i));
    out.nodes.push_back(std::move(nodes));
  }
  return out;
}

// Phase 4: leaves sharing most of their nodes (Jaccard > 1/2) form one leaf group, and each
// node goes under the smallest group it reaches.
struct LeafGroups {
  std::vector<std::vector<std::size_t>> leaves;  // leaf indices per group
  std::vector<int> node_group;                   // per node, -1 when no leaf holds it
  std::vector<char> kept;                        // per group: some node is assigned to it
  std::vector<std::string> multi;                // nodes reaching several groups
  std::vector<std::string> dropped;              // display names of the leaves of unkept groups
};

std::vector<std::vector<int>> leaves_of_nodes(const Leaves& leaves, std::size_t node_count) {
  std::vector<std::vector<int>> node_leaves(node_count);
  for (std::size_t k = 0; k < leaves.switches.size(); ++k)
    for (int n : leaves.nodes[k]) node_leaves[static_cast<std::size_t>(n)].push_back(static_cast<int>(k));
  return node_leaves;
}

// Unites every two leaves that share a node and most of their nodes.
void unite_overlapping_leaves(const Leaves& leaves, const std::vector<std::vector<int>>& node_leaves, UnionFind& uf) {
  std::unordered_set<std::uint64_t> tried;
  for (const auto& ls : node_leaves)
    for (std::size_t x = 0; x < ls.size(); ++x)
      for (std::size_t y = x + 1; y < ls.size(); ++y) {
        const auto a = static_cast<std::size_t>(ls[x]), b = static_cast<std::size_t>(ls[y]);
        if (!tried.insert((static_cast<std::uint64_t>(a) << 32) | b).second) continue;
        std::vector<int> common;
        std::set_intersection(leaves.nodes[a].begin(), leaves.nodes[a].end(), leaves.nodes[b].begin(),
                              leaves.nodes[b].end(), std::back_inserter(common));
        const std::size_t uni = leaves.nodes[a].size() + leaves.nodes[b].size() - common.size();
        if (2 * common.size() > uni) uf.unite(a, b);
      }
}

std::vector<std::size_t> distinct_nodes_per_group(const Leaves& leaves, const LeafGroups& groups) {
  std::vector<std::size_t> size(groups.leaves.size(), 0);
  for (std::size_t g = 0; g < groups.leaves.size(); ++g) {
    std::vector<int> all;
    for (std::size_t k : groups.leaves[g]) all.insert(all.end(), leaves.nodes[k].begin(), leaves.nodes[k].end());
    std::sort(all.begin(), all.end());
    size[g] = static_cast<std::size_t>(std::unique(all.begin(), all.end()) - all.begin());
  }
  return size;
}

LeafGroups group_leaves(const Leaves& leaves, const std::vector<std::string>& node_names) {
  const std::size_t nl = leaves.switches.size();
  const auto node_leaves = leaves_of_nodes(leaves, node_names.size());
  UnionFind uf(nl);
  unite_overlapping_leaves(leaves, node_leaves, uf);
  LeafGroups out;
  std::vector<int> group_of_leaf(nl, -1);
  for (std::size_t k = 0; k < nl; ++k) {
    const std::size_t r = uf.find(k);
    if (group_of_leaf[r] < 0) {
      group_of_leaf[r] = static_cast<int>(out.leaves.size());
      out.leaves.emplace_back();
    }
    group_of_leaf[k] = group_of_leaf[r];
    out.leaves[static_cast<std::size_t>(group_of_leaf[k])].push_back(k);
  }
  const auto group_size = distinct_nodes_per_group(leaves, out);
  out.node_group.assign(node_names.size(), -1);
  std::vector<std::size_t> assigned(out.leaves.size(), 0);
  for (std::size_t n = 0; n < node_names.size(); ++n) {
    std::vector<int> gs;
    for (int k : node_leaves[n]) gs.push_back(group_of_leaf[static_cast<std::size_t>(k)]);
    std::sort(gs.begin(), gs.end());
    gs.erase(std::unique(gs.begin(), gs.end()), gs.end());
    if (gs.empty()) continue;
    int best = gs[0];
    for (int g : gs)
      if (group_size[static_cast<std::size_t>(g)] < group_size[static_cast<std::size_t>(best)]) best = g;
    if (gs.size() > 1) out.multi.push_back(node_names[n]);
    out.node_group[n] = best;
    ++assigned[static_cast<std::size_t>(best)];
  }
  out.kept.assign(out.leaves.size(), 0);
  for (std::size_t g = 0; g < out.leaves.size(); ++g) {
    out.kept[g] = assigned[g] > 0;
    if (!out.kept[g])
      for (std::size_t k : out.leaves[g]) out.dropped.push_back(leaves.display[static_cast<std::size_t>(leaves.switches[k])]);
  }
  return out;
}

std::string several_groups_warning(LeafGroups& groups) {
  std::sort(groups.multi.begin(), groups.multi.end(), natural_less);
  return fmt::format(
      "{} node(s) reach several leaf groups (a second fabric such as storage, or miscabling): {}; each is placed "
      "under the smallest group it reaches{}. Pass --hca REGEX to keep only the compute HCAs",
      groups.multi.size(), compress_hostlist(groups.multi),
      groups.dropped.empty()
          ? std::string()
          : fmt::format("; leaf switch(es) {} keep no node and are left out", fmt::join(groups.dropped, ", ")));
}

// Phase 5: the switch tree, tier 0 from the kept leaf groups, then upward.
struct Group {
  std::vector<int> switches;  // entity ids
  int tier = 0;
  int parent = -1;  // index into the tree's groups
  std::string name;
};

struct SwitchTree {
  std::vector<Group> groups;
  std::vector<int> leaf_group;  // per leaf group: its index in groups, -1 when not kept
};

class TreeBuilder {
 public:
  TreeBuilder(const std::vector<Entity>& ents, const Leaves& leaves)
      : ents_(ents), switch_group_(ents.size(), -1), visited_(leaves.edge) {}

  SwitchTree build(const Leaves& leaves, const LeafGroups& lg) {
    std::vector<int> level = add_leaf_groups(leaves, lg);
    for (int tier = 0; !level.empty() && tier < 64; ++tier) level = add_tier_above(level, tier);
    return std::move(tree_);
  }

 private:
  std::vector<int> add_leaf_groups(const Leaves& leaves, const LeafGroups& lg) {
    std::vector<int> level;
    tree_.leaf_group.assign(lg.leaves.size(), -1);
    for (std::size_t g = 0; g < lg.leaves.size(); ++g) {
      if (!lg.kept[g]) continue;
      Group gr;
      for (std::size_t k : lg.leaves[g]) gr.switches.push_back(leaves.switches[k]);
      tree_.leaf_group[g] = static_cast<int>(tree_.groups.size());
      for (int s : gr.switches) switch_group_[static_cast<std::size_t>(s)] = static_cast<int>(tree_.groups.size());
      level.push_back(static_cast<int>(tree_.groups.size()));
      tree_.groups.push_back(std::move(gr));
    }
    return level;
  }

  // The unvisited switches linked to a switch of `level`, sorted, each with its child groups.
  std::vector<int> candidates(const std::vector<int>& level, std::unordered_map<int, std::vector<int>>& children) const {
    std::vector<int> cands;
    for (int g : level)
      for (int s : tree_.groups[static_cast<std::size_t>(g)].switches)
        for (int p : ents_[static_cast<std::size_t>(s)].peers) {
          if (ents_[static_cast<std::size_t>(p)].kind != Kind::kSwitch || visited_[static_cast<std::size_t>(p)] ||
              switch_group_[static_cast<std::size_t>(p)] >= 0)
            continue;
          auto [it, inserted] = children.try_emplace(p);
          if (inserted) cands.push_back(p);
          it->second.push_back(g);
        }
    std::sort(cands.begin(), cands.end());
    return cands;
  }

  // Candidates sharing a child group are one group of tier + 1; returns those groups.
  std::vector<int> add_tier_above(const std::vector<int>& level, int tier) {
    std::unordered_map<int, std::vector<int>> cand_children;  // candidate -> child groups
    const std::vector<int> cands = candidates(level, cand_children);
    if (cands.empty()) return {};
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
      auto [it, inserted] = root_group.try_emplace(cu.find(k), static_cast<int>(tree_.groups.size()));
      if (inserted) {
        Group gr;
        gr.tier = tier + 1;
        next.push_back(static_cast<int>(tree_.groups.size()));
        tree_.groups.push_back(std::move(gr));
      }
      tree_.groups[static_cast<std::size_t>(it->second)].switches.push_back(cands[k]);
      switch_group_[static_cast<std::size_t>(cands[k])] = it->second;
      visited_[static_cast<std::size_t>(cands[k])] = 1;
    }
    for (auto& [child, k] : first_cand_of_child)
      tree_.groups[static_cast<std::size_t>(child)].parent = root_group[cu.find(k)];
    return next;
  }

  const std::vector<Entity>& ents_;
  SwitchTree tree_;
  std::vector<int> switch_group_;
  std::vector<char> visited_;
};

// Phase 6: names for the groups, then the discovered switches and nodes.
int tier_count(const SwitchTree& tree) {
  return 1 + std::accumulate(tree.groups.begin(), tree.groups.end(), 0,
                             [](int m, const Group& g) { return std::max(m, g.tier); });
}

void name_groups(SwitchTree& tree, const std::vector<std::string>& display, int tiers) {
  std::unordered_set<std::string> taken;
  std::vector<int> counter(static_cast<std::size_t>(tiers), 0);
  for (auto& g : tree.groups) {
    std::vector<std::string> members;
    for (int s : g.switches) members.push_back(display[static_cast<std::size_t>(s)]);
    std::sort(members.begin(), members.end(), natural_less);
    g.name = unique_name(group_name(members, tier_name_for_level(g.tier), ++counter[static_cast<std::size_t>(g.tier)]),
                         taken);
  }
}

void emit_fabric(const SwitchTree& tree, const HostNodes& hosts, const LeafGroups& lg, int tiers, IbnetFabric& out) {
  for (int t = 0; t < tiers; ++t) out.topology.tiers.push_back(tier_name_for_level(t));
  for (const auto& g : tree.groups)
    out.topology.switches.push_back(
        {g.name, g.tier, g.parent >= 0 ? tree.groups[static_cast<std::size_t>(g.parent)].name : std::string()});
  out.stats.leaf_groups = static_cast<int>(
      std::count_if(tree.groups.begin(), tree.groups.end(), [](const Group& g) { return g.tier == 0; }));
  for (std::size_t n = 0; n < hosts.names.size(); ++n) {
    if (lg.node_group[n] < 0) continue;
    DiscoveredNode dn;
    dn.name = hosts.names[n];
    dn.nic_gbit = hosts.gbit[n];
    const int group = tree.leaf_group[static_cast<std::size_t>(lg.node_group[n])];
    dn.switch_name = tree.groups[static_cast<std::size_t>(group)].name;
    out.topology.nodes.push_back(std::move(dn));
  }
}

}  // namespace

Result<IbnetFabric> read_ibnetdiscover(std::string_view text, const std::string& file, const IbnetOptions& options) {
  std::optional<NameFilter> hca_re;
  if (options.hca_regex) {
    auto f = NameFilter::compile(*options.hca_regex, "--hca");
    if (!f) return tl::unexpected(f.error());
    hca_re = *f;
  }
  auto dump = DumpParser(file).parse(text);
  if (!dump) return tl::unexpected(dump.error());
  link_peers(*dump);

  IbnetFabric out;
  out.topology.source = file;
  HostNodes hosts = classify_cas(dump->ents, hca_re, out.stats);
  out.topology.warnings = hosts.warnings;
  const Leaves leaves = find_leaves(dump->ents, hosts);
  if (leaves.switches.empty()) return out;  // no switch holds a host: an empty fabric

  LeafGroups lg = group_leaves(leaves, hosts.names);
  out.stats.nodes_in_several_leaf_groups = static_cast<int>(lg.multi.size());
  if (!lg.multi.empty()) out.topology.warnings.push_back(several_groups_warning(lg));

  SwitchTree tree = TreeBuilder(dump->ents, leaves).build(leaves, lg);
  const int tiers = tier_count(tree);
  name_groups(tree, leaves.display, tiers);
  emit_fabric(tree, hosts, lg, tiers, out);
  return out;
}

}  // namespace toposched
