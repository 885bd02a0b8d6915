#include "formats/topograph_blocks.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <deque>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <re2/re2.h>

#include "formats/discovery.h"
#include "topology/hostlist.h"

namespace toposched {

namespace {

constexpr std::size_t kMaxBlockSizes = 20;
constexpr long kMaxBlockSize = 65'536;

// ---- Topograph's block tree (block_tree.go), flattened to its base-block slots ----

// One base block: `hosts` fill its first slots; the id names its (sub-)domain, "" for an
// empty placeholder.
struct BaseSlot {
  std::string id;
  std::vector<std::string> hosts;
};
using Slots = std::vector<BaseSlot>;

struct DomainVertex {
  std::string id;
  long actual = 0;     // hosts below
  long max_child = 0;  // largest child's `actual`
  bool leaf = false;   // holds hosts directly
  std::vector<std::string> hosts;                 // leaf: sorted by name
  std::map<std::string, DomainVertex> children;   // interior: by name
};

long slot_capacity(long max_sibling, long base) {
  long capacity = base;
  while (capacity < max_sibling) capacity *= 2;
  return capacity;
}

long ceil_div(long a, long b) { return (a + b - 1) / b; }

Slots pack_hosts(const std::string& id, const std::vector<std::string>& hosts, long base_blocks, long base) {
  Slots slots;
  for (std::size_t start = 0; start < hosts.size(); start += static_cast<std::size_t>(base)) {
    std::size_t end = std::min(hosts.size(), start + static_cast<std::size_t>(base));
    std::string slot_id = slots.empty() ? id : fmt::format("{}#{}", id, slots.size() + 1);
    slots.push_back({slot_id, std::vector<std::string>(hosts.begin() + static_cast<long>(start), hosts.begin() + static_cast<long>(end))});
  }
  while (static_cast<long>(slots.size()) < base_blocks) slots.push_back({});
  return slots;
}

Slots domain_slots(const DomainVertex& v, long max_sibling, const std::vector<long>& sizes);

// recurseChildrenIntoAggregate: children's slots, rounded up to an aggregate boundary when
// they overflow the domain's slot.
Slots children_slots(const DomainVertex& v, long base_blocks, const std::vector<long>& sizes) {
  const long base = sizes.front();
  Slots slots;
  for (const auto& [name, child] : v.children) {
    Slots s = domain_slots(child, v.max_child, sizes);
    slots.insert(slots.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
  }
  long actual = static_cast<long>(slots.size());
  if (actual > base_blocks && sizes.size() >= 2) {
    long actual_nodes = actual * base, align = actual_nodes;
    for (std::size_t k = 1; k < sizes.size(); ++k)
      if (sizes[k] >= actual_nodes) {
        align = sizes[k];
        break;
      }
    long width = slot_capacity(align, base) / base;
    base_blocks = ceil_div(actual, width) * width;
  }
  while (static_cast<long>(slots.size()) < base_blocks) slots.push_back({});
  return slots;
}

// toDomainAggregate.
Slots domain_slots(const DomainVertex& v, long max_sibling, const std::vector<long>& sizes) {
  const long base = sizes.front(), last = sizes.back();
  if (v.leaf) {
    long n = last < max_sibling ? ceil_div(v.actual, base) : slot_capacity(max_sibling, base) / base;
    return pack_hosts(v.id, v.hosts, std::max(n, 1L), base);
  }
  long capacity = slot_capacity(std::min(last, max_sibling), base);
  return children_slots(v, std::max(capacity / base, 1L), sizes);
}

// toSingleLevelDomainAggregate: the rules from before sub-domains existed.
Slots single_level_slots(const DomainVertex& v, long max_sibling, const std::vector<long>& sizes) {
  const long base = sizes.front();
  long n = sizes.size() == 1 ? ceil_div(v.actual, base) : slot_capacity(max_sibling, base) / base;
  return pack_hosts(v.id, v.hosts, std::max(n, 1L), base);
}

// toRootAggregate: every domain's slots, then empty domain slots until the total is a
// multiple of the largest size.
Slots root_slots(const DomainVertex& root, const std::vector<long>& sizes) {
  const long base = sizes.front(), root_size = sizes.back();
  bool single_level = !root.children.empty() &&
                      std::all_of(root.children.begin(), root.children.end(), [](const auto& c) { return c.second.leaf; });
  Slots slots;
  long node_count = 0, child_capacity = 0;
  for (const auto& [name, domain] : root.children) {
    Slots s = single_level ? single_level_slots(domain, root.max_child, sizes) : domain_slots(domain, root.max_child, sizes);
    long capacity = static_cast<long>(s.size()) * base;
    node_count += capacity;
    child_capacity = child_capacity == 0 ? capacity : std::gcd(child_capacity, capacity);
    slots.insert(slots.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
  }
  if (node_count > 0 && child_capacity > 0 && node_count % root_size != 0) {
    long step = child_capacity / std::gcd(child_capacity, root_size) * root_size;
    long target = ceil_div(node_count, step) * step;
    for (; node_count < target; node_count += child_capacity)
      for (long i = 0; i < child_capacity / base; ++i) slots.push_back({});
  }
  return slots;
}

// Strips what Topograph appends to a slot id ("#2" for a domain's second block).
std::string slot_domain(const std::string& id) {
  std::size_t cut = id.find_first_of("/#+");
  return cut == std::string::npos ? id : id.substr(0, cut);
}

// ---- Go's Regexp.Expand ----

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Go's Regexp.Expand of `f` for the first match of `re` in `text`.
std::optional<std::string> expand_with(const RE2& re, const std::string& f, const std::string& text) {
  int groups = re.NumberOfCapturingGroups();
  std::vector<re2::StringPiece> match(static_cast<std::size_t>(groups + 1));
  if (!re.Match(text, 0, text.size(), RE2::UNANCHORED, match.data(), groups + 1)) return std::nullopt;
  const auto& named = re.NamedCapturingGroups();
  auto group = [&](const std::string& name) -> std::string {
    int index = -1;
    if (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      index = name.size() <= 9 ? std::stoi(name) : -1;
    } else if (auto it = named.find(name); it != named.end()) {
      index = it->second;
    }
    if (index < 0 || index > groups || match[static_cast<std::size_t>(index)].data() == nullptr) return "";
    return std::string(match[static_cast<std::size_t>(index)]);
  };
  std::string out;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '$' || i + 1 == f.size()) {
      out += f[i];
      continue;
    }
    if (f[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    std::size_t start = i + 1, end = start;
    bool braced = f[start] == '{';
    if (braced) ++start, ++end;
    while (end < f.size() && is_name_char(f[end])) ++end;
    bool ok = end > start && (!braced || (end < f.size() && f[end] == '}'));
    if (!ok) {  // malformed: Go keeps the '$' as text
      out += '$';
      continue;
    }
    out += group(f.substr(start, end - start));
    i = braced ? end : end - 1;
  }
  return out;
}

// ---- complementBlocks' input: the blocks' domains, restricted to the blocks' nodes ----

struct DomainHosts {
  std::string domain;
  std::vector<std::pair<std::string, std::string>> hosts;  // name, sub-domain
};

struct DomainTree {
  DomainVertex root;
  bool has_sub = false;
  std::vector<long> inferred_sizes;  // InferTwoLevelBlockSizes; empty without sub-domains
};

// DomainMap.GetDomainTree and InferTwoLevelBlockSizes.
DomainTree domain_tree(const std::vector<DomainHosts>& domains) {
  DomainTree t;
  long max_domain = 0, max_sub = 0;
  for (const auto& d : domains) {
    DomainVertex& dv = t.root.children[d.domain];
    dv.id = d.domain;
    std::map<std::string, std::vector<std::string>> subs;
    for (const auto& [host, sub] : d.hosts) subs[sub].push_back(host);
    dv.actual = static_cast<long>(d.hosts.size());
    max_domain = std::max(max_domain, dv.actual);
    bool two_level = subs.size() > 1 || !subs.contains("");
    t.has_sub = t.has_sub || two_level;
    if (!two_level) {
      dv.leaf = true;
      dv.hosts = subs[""];
      std::sort(dv.hosts.begin(), dv.hosts.end());
    } else {
      for (auto& [sub, hosts] : subs) {
        std::string id = sub.empty() ? d.domain : sub;  // Topograph's fallback sub-domain
        DomainVertex& sv = dv.children[id];
        sv.id = id;
        sv.leaf = true;
        sv.hosts.insert(sv.hosts.end(), hosts.begin(), hosts.end());
        std::sort(sv.hosts.begin(), sv.hosts.end());
        sv.actual = static_cast<long>(sv.hosts.size());
        if (!sub.empty()) max_sub = std::max(max_sub, static_cast<long>(hosts.size()));
      }
      for (const auto& [id, sv] : dv.children) dv.max_child = std::max(dv.max_child, sv.actual);
    }
    t.root.max_child = std::max(t.root.max_child, dv.actual);
  }
  if (t.has_sub) {
    long aggregate = max_sub;
    while (aggregate < max_domain) aggregate *= 2;
    t.inferred_sizes = aggregate == max_sub ? std::vector<long>{max_sub} : std::vector<long>{max_sub, aggregate};
  }
  return t;
}

// formatBlockNames: every block with nodes renamed by `rule`.
Result<void> apply_block_names(std::vector<SlurmBlock>& blocks, const BlockNameRule& rule) {
  TOPOSCHED_CHECK(validate_block_name_rule(rule));
  RE2::Options options;
  options.set_log_errors(false);
  RE2 re(rule.node_name_regexp, options);
  auto bad = [](std::string why) { return make_error(ErrorCode::kInvalidArgument, std::move(why)); };
  std::map<std::string, std::string> seen;
  for (auto& b : blocks) {
    if (b.nodes.empty()) continue;
    std::string description = fmt::format("block \"{}\"", b.name);
    if (!b.domain.empty()) description += fmt::format(" (domain \"{}\")", b.domain);
    std::string name;
    for (const auto& n : b.nodes) {
      auto expanded = expand_with(re, rule.format, n);
      if (!expanded)
        return bad(fmt::format("node \"{}\" in {} does not match nodeNameRegexp \"{}\"", n, description, rule.node_name_regexp));
      if (expanded->empty())
        return bad(fmt::format("blockName format \"{}\" produces an empty name for node \"{}\" in {}", rule.format, n, description));
      if (name.empty()) name = *expanded;
      if (*expanded != name)
        return bad(fmt::format("nodes in {} produce different block names \"{}\" and \"{}\"", description, name, *expanded));
    }
    if (auto [it, fresh] = seen.emplace(name, b.name); !fresh)
      return bad(fmt::format("blocks \"{}\" and \"{}\" produce duplicate block name \"{}\"", it->second, b.name, name));
    b.name = name;
  }
  return {};
}

}  // namespace

Result<void> validate_block_sizes(const std::vector<long>& sizes) {
  auto bad = [](std::string why) { return make_error(ErrorCode::kInvalidArgument, std::move(why)); };
  if (sizes.empty()) return {};
  if (sizes.size() > kMaxBlockSizes)
    return bad(fmt::format("blockSizes has too many entries ({}); max allowed is {}", sizes.size(), kMaxBlockSizes));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    long cur = sizes[i];
    if (cur <= 0) return bad(fmt::format("blockSizes[{}]={} must be positive", i, cur));
    if (cur > kMaxBlockSize) return bad(fmt::format("blockSizes[{}]={} exceeds maximum allowed value {}", i, cur, kMaxBlockSize));
    if (i == 0) continue;
    long prev = sizes[i - 1];
    if (cur <= prev) return bad(fmt::format("blockSizes[{}]={} must be greater than blockSizes[{}]={}", i, cur, i - 1, prev));
    if (cur % prev != 0) return bad(fmt::format("blockSizes[{}]={} must be a multiple of blockSizes[{}]={}", i, cur, i - 1, prev));
    long ratio = cur / prev;
    if ((ratio & (ratio - 1)) != 0)
      return bad(fmt::format("blockSizes[{}]={} must be a power-of-two multiple of blockSizes[{}]={}", i, cur, i - 1, prev));
  }
  return {};
}

Result<void> validate_block_name_rule(const BlockNameRule& rule) {
  if (rule.node_name_regexp.empty()) return make_error(ErrorCode::kInvalidArgument, "blockName.nodeNameRegexp must not be empty");
  if (rule.format.empty()) return make_error(ErrorCode::kInvalidArgument, "blockName.format must not be empty");
  RE2::Options options;
  options.set_log_errors(false);
  RE2 re(rule.node_name_regexp, options);
  if (!re.ok())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("invalid blockName.nodeNameRegexp \"{}\": {}", rule.node_name_regexp, re.error()));
  return {};
}

std::optional<std::string> expand_block_name(const BlockNameRule& rule, const std::string& text) {
  RE2::Options options;
  options.set_log_errors(false);
  RE2 re(rule.node_name_regexp, options);
  return expand_with(re, rule.format, text);
}

TopographBlockLayout::TopographBlockLayout(const Cluster& c) {
  // Topograph's DomainMap: domain -> hosts (with sub-domains).
  if (c.domain_count() > 0) {
    from_domains_ = true;
    for (std::uint32_t d = 0; d < c.domain_count(); ++d)
      for (NodeId n : c.domain_nodes(DomainId(d)))
        domains_[c.domain(DomainId(d)).name][c.node_name(n)] = {c.node_name(n), c.node_sub_domain(n)};
  } else {
    for (std::uint32_t s = 0; s < c.switch_count(); ++s) {
      SwitchId sw(s);
      if (c.switch_tier(sw) != 0) continue;
      for (NodeId n : c.switch_subtree_nodes(sw)) domains_[c.switch_name(sw)][c.node_name(n)] = {c.node_name(n), ""};
    }
  }
  // toBlockInfos: one block per domain, by domain name, hosts sorted.
  std::vector<Block> by_name;
  std::map<std::string, std::size_t, std::less<>> by_name_of_node;
  for (const auto& [domain, hosts] : domains_) {
    Block b{domain, {}, by_name.size() + 1};
    for (const auto& [host, info] : hosts) {
      b.nodes.push_back(host);
      by_name_of_node[host] = by_name.size();
    }
    by_name.push_back(std::move(b));
  }
  // Topograph orders blocks by the tree only when the provider gave one (graph.Tiers): the
  // `no-topology` leaf that discovery adds for nodes without fabric data is not one.
  bool tree = false;
  for (std::uint32_t s = 0; s < c.switch_count() && !tree; ++s) tree = c.switch_name(SwitchId(s)) != kNoTopologySwitch;
  if (!tree) {
    blocks_ = std::move(by_name);
  } else {
    // initBlocks: in the order a breadth-first walk of the fabric meets the blocks' nodes.
    struct Vertex {
      std::string key;
      SwitchId sw;  // invalid: a node
    };
    auto children = [&](SwitchId s) {
      std::vector<Vertex> v;
      for (SwitchId k : c.switch_children(s)) v.push_back({c.switch_name(k), k});
      for (NodeId n : c.switch_nodes(s)) v.push_back({c.node_name(n), SwitchId()});
      std::sort(v.begin(), v.end(), [](const Vertex& a, const Vertex& b) { return a.key < b.key; });
      return v;
    };
    std::vector<Vertex> roots;
    for (SwitchId r : c.root_switches()) roots.push_back({c.switch_name(r), r});
    std::sort(roots.begin(), roots.end(), [](const Vertex& a, const Vertex& b) { return a.key < b.key; });
    std::deque<Vertex> queue(roots.begin(), roots.end());
    std::vector<char> emitted(by_name.size(), 0);
    while (!queue.empty()) {
      Vertex v = std::move(queue.front());
      queue.pop_front();
      if (v.sw.valid()) {
        for (auto& k : children(v.sw)) queue.push_back(std::move(k));
        continue;
      }
      auto it = by_name_of_node.find(v.key);
      if (it == by_name_of_node.end() || emitted[it->second]) continue;
      emitted[it->second] = 1;
      blocks_.push_back(by_name[it->second]);
    }
    std::vector<std::string> dropped;
    for (std::size_t i = 0; i < by_name.size(); ++i)
      if (!emitted[i]) dropped.push_back(by_name[i].domain);
    if (!dropped.empty())
      warnings_.push_back(fmt::format("{} accelerator domain(s) have no node under a switch and are left out of the blocks, "
                                      "as Topograph leaves them out: {}", dropped.size(), fmt::join(dropped, ", ")));
  }
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    for (const auto& n : blocks_[i].nodes) block_of_node_[n] = i;
}

Result<SlurmBlocks> TopographBlockLayout::cluster_blocks(const std::vector<long>& sizes,
                                                         const std::optional<BlockNameRule>& rule) const {
  return finish(blocks_, sizes, rule, true);
}

Result<SlurmBlocks> TopographBlockLayout::partition_blocks(const std::vector<std::string>& nodes,
                                                           const std::vector<long>& sizes,
                                                           const std::optional<BlockNameRule>& rule) const {
  std::map<std::size_t, Block> picked;
  for (const auto& n : nodes) {
    auto it = block_of_node_.find(n);
    if (it == block_of_node_.end()) continue;
    Block& b = picked[it->second];
    b.domain = blocks_[it->second].domain;
    b.nodes.push_back(n);
  }
  std::vector<Block> blocks;
  for (auto& [index, b] : picked) {
    std::sort(b.nodes.begin(), b.nodes.end());
    b.nodes.erase(std::unique(b.nodes.begin(), b.nodes.end()), b.nodes.end());
    blocks.push_back(std::move(b));
  }
  if (blocks.empty()) return SlurmBlocks{};
  return finish(std::move(blocks), sizes, rule, false);
}

Result<SlurmBlocks> TopographBlockLayout::finish(std::vector<Block> blocks, const std::vector<long>& requested,
                                                 const std::optional<BlockNameRule>& rule, bool padded_ids) const {
  TOPOSCHED_CHECK(validate_block_sizes(requested));
  // complementBlocks: the domains of these blocks, restricted to their nodes.
  std::vector<DomainHosts> picked;
  for (const auto& b : blocks) {
    auto d = domains_.find(b.domain);
    if (d == domains_.end()) continue;
    DomainHosts dh{b.domain, {}};
    for (const auto& n : b.nodes)
      if (auto h = d->second.find(n); h != d->second.end()) dh.hosts.emplace_back(n, h->second.sub_domain);
    if (!dh.hosts.empty()) picked.push_back(std::move(dh));
  }
  DomainTree tree = domain_tree(picked);
  std::vector<long> sizes = requested.empty() ? tree.inferred_sizes : requested;
  std::vector<SlurmBlock> named;
  if (!tree.root.children.empty() && !sizes.empty()) {
    for (auto& slot : root_slots(tree.root, sizes)) named.push_back({"", slot.id.empty() ? "" : slot_domain(slot.id), std::move(slot.hosts)});
    for (std::size_t i = 0; i < named.size(); ++i)
      named[i].name = padded_ids ? fmt::format("block{:03}", i + 1) : fmt::format("block{}", i + 1);
  } else {
    // Not complemented: topology.conf keeps the numbers given in domain-name order (so a
    // breadth-first order may list block002 first); topology.yaml numbers by position.
    for (std::size_t i = 0; i < blocks.size(); ++i)
      named.push_back({padded_ids ? fmt::format("block{:03}", blocks[i].number) : fmt::format("block{}", i + 1),
                       blocks[i].domain, std::move(blocks[i].nodes)});
  }
  if (named.empty()) return make_error(ErrorCode::kValidation, "cannot determine blockSizes: topology contains no blocks");
  if (rule) TOPOSCHED_CHECK(apply_block_names(named, *rule));
  if (sizes.empty()) {  // getBlockSizes
    long smallest = static_cast<long>(named.front().nodes.size());
    for (const auto& b : named) smallest = std::min(smallest, static_cast<long>(b.nodes.size()));
    int levels = static_cast<int>(std::bit_width(named.size())) - 1;
    for (int i = 0; i <= levels; ++i) sizes.push_back(smallest << i);
  }
  SlurmBlocks out;
  out.warnings = warnings_;
  out.blocks = std::move(named);
  out.sizes = std::move(sizes);
  return out;
}

}  // namespace toposched
