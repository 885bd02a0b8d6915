#include "topology/cluster.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "topology/hardware.h"
#include "topology/hostlist.h"

namespace toposched {

namespace {
constexpr std::array<std::string_view, 7> kClassTokens = {"X",   "NV",   "PIX", "PXB",
                                                          "PHB", "NODE", "SYS"};
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

std::string_view link_class_token(LinkClass c) {
  return kClassTokens[static_cast<std::size_t>(c)];
}

std::optional<LinkClass> parse_pcie_class(std::string_view token) {
  for (std::size_t i = 0; i < kClassTokens.size(); ++i)
    if (i != static_cast<std::size_t>(LinkClass::kNVLink) && token == kClassTokens[i])
      return static_cast<LinkClass>(i);
  return std::nullopt;
}

std::optional<GpuLink> parse_link_cell(std::string_view token) {
  if (token.size() > 2 && token.substr(0, 2) == "NV") {
    unsigned count = 0;
    auto digits = token.substr(2);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || count == 0 || count > 255)
      return std::nullopt;
    return GpuLink{LinkClass::kNVLink, static_cast<std::uint8_t>(count)};
  }
  auto cls = parse_pcie_class(token);
  if (!cls) return std::nullopt;
  return GpuLink{*cls, 0};
}

std::string link_cell_token(GpuLink link) {
  if (link.cls == LinkClass::kNVLink) return fmt::format("NV{}", link.nvlinks);
  return std::string(link_class_token(link.cls));
}

std::vector<GpuLink> NodeType::full_nvlink_mesh(int gpus, int links) {
  std::vector<GpuLink> m(static_cast<std::size_t>(gpus * gpus),
                         GpuLink{LinkClass::kNVLink, static_cast<std::uint8_t>(links)});
  for (int i = 0; i < gpus; ++i) m[static_cast<std::size_t>(i * gpus + i)] = {LinkClass::kSelf, 0};
  return m;
}

// ---------------------------------------------------------------- Cluster queries

const std::string& Cluster::node_sub_domain(NodeId n) const {
  return sub_domain_names_[node_sub_domain_[n.index()]];
}

std::optional<NodeId> Cluster::find_node(std::string_view name) const {
  auto it = node_index_.find(std::string(name));
  if (it == node_index_.end()) return std::nullopt;
  return it->second;
}

std::optional<SwitchId> Cluster::find_switch(std::string_view name) const {
  auto it = switch_index_.find(std::string(name));
  if (it == switch_index_.end()) return std::nullopt;
  return it->second;
}

std::optional<DomainId> Cluster::find_domain(std::string_view name) const {
  auto it = domain_index_.find(std::string(name));
  if (it == domain_index_.end()) return std::nullopt;
  return it->second;
}

std::vector<SwitchId> Cluster::root_switches() const {
  std::vector<SwitchId> roots;
  for (std::uint32_t s = 0; s < switch_parent_.size(); ++s)
    if (!switch_parent_[s].valid()) roots.push_back(SwitchId(s));
  return roots;
}

double Cluster::gpu_network_GBps(GpuId g) const {
  NodeId n = gpu_node_[g.index()];
  return type_gpu_net_[node_type_[n.index()].index()][gpu_local_[g.index()]];
}

SwitchId Cluster::common_switch(SwitchId a, SwitchId b) const {
  while (a != b) {
    if (!a.valid() || !b.valid()) return SwitchId();
    if (switch_tier_[a.index()] <= switch_tier_[b.index()])
      a = switch_parent_[a.index()];
    else
      b = switch_parent_[b.index()];
  }
  return a;
}

Path Cluster::network_path(GpuId a, GpuId b, NodeId na, NodeId nb) const {
  const double net_a = type_gpu_net_[node_type_[na.index()].index()][gpu_local_[a.index()]];
  const double net_b = type_gpu_net_[node_type_[nb.index()].index()][gpu_local_[b.index()]];
  DomainId da = node_domain_[na.index()];
  if (da.valid() && da == node_domain_[nb.index()]) {
    const DomainSpec& d = domains_[da.index()];
    return Path{PathLevel::kAccelDomain, 0, d.bandwidth_GBps, d.latency_us};
  }
  SwitchId join = common_switch(node_switch_[na.index()], node_switch_[nb.index()]);
  if (!join.valid()) {
    double bw = cross_root_bandwidth_GBps_ > 0 ? cross_root_bandwidth_GBps_
                                               : std::min(net_a, net_b) /
                                                     (tiers_.empty() ? 1.0
                                                                     : tier_oversub_below_.back() *
                                                                           tiers_.back().oversubscription);
    double lat = cross_root_latency_us_ > 0 ? cross_root_latency_us_
                 : tiers_.empty()           ? kNicLatencyUs + kDefaultHopLatencyUs
                                  : kNicLatencyUs + tier_latency_.back() +
                                        2 * tiers_.back().hop_latency_us;
    if (!tiers_.empty()) {
      bw *= tiers_.back().path_bandwidth_factor;
      lat *= tiers_.back().path_latency_factor;
    }
    return Path{PathLevel::kCrossRoot, 0, bw, lat};
  }
  const int k = switch_tier_[join.index()];
  const auto ku = static_cast<std::size_t>(k);
  double cap = tier_bandwidth_cap_[ku];
  double bw = std::min({net_a, net_b, cap / node_types_[node_type_[na.index()].index()].gpu_count,
                        cap / node_types_[node_type_[nb.index()].index()].gpu_count}) /
              tier_oversub_below_[ku];
  const Tier& t = tiers_[ku];
  return Path{PathLevel::kTier, static_cast<std::uint8_t>(k), bw * t.path_bandwidth_factor,
              (kNicLatencyUs + tier_latency_[ku]) * t.path_latency_factor};
}

Path Cluster::path(GpuId a, GpuId b) const {
  if (a == b) return Path{PathLevel::kSameGpu, 0, kInf, 0.0};
  NodeId na = gpu_node_[a.index()];
  NodeId nb = gpu_node_[b.index()];
  if (na == nb) {
    const NodeTypeId t = node_type_[na.index()];
    const int n = node_types_[t.index()].gpu_count;
    const PairInfo& p =
        type_pairs_[t.index()][static_cast<std::size_t>(gpu_local_[a.index()] * n + gpu_local_[b.index()])];
    return Path{p.level, 0, p.bandwidth_GBps, p.latency_us};
  }
  return network_path(a, b, na, nb);
}

Path Cluster::node_path(NodeId a, NodeId b) const {
  if (a == b) {
    GpuId g = node_gpu(a, 0);
    return path(g, g);
  }
  return network_path(node_gpu(a, 0), node_gpu(b, 0), a, b);
}

std::string Cluster::level_name(const Path& p) const {
  switch (p.level) {
    case PathLevel::kSameGpu: return "same-gpu";
    case PathLevel::kNVLink: return "nvlink";
    case PathLevel::kPciePix: return "pcie-pix";
    case PathLevel::kPciePxb: return "pcie-pxb";
    case PathLevel::kPciePhb: return "pcie-phb";
    case PathLevel::kPcieNode: return "pcie-node";
    case PathLevel::kPcieSys: return "pcie-sys";
    case PathLevel::kAccelDomain: return "accel-domain";
    case PathLevel::kTier: return "tier:" + tiers_[p.tier].name;
    case PathLevel::kCrossRoot: return "cross-root";
  }
  return "unknown";
}

std::string Cluster::hostlist() const { return compress_hostlist(node_names_); }

// ---------------------------------------------------------------- ClusterBuilder

ClusterBuilder::ClusterBuilder(std::string name) {
  cluster_.name_ = std::move(name);
  cluster_.sub_domain_names_.push_back("");
}

NodeTypeId ClusterBuilder::add_node_type(NodeType type) {
  NodeTypeId id(static_cast<std::uint32_t>(cluster_.node_types_.size()));
  type_index_.emplace(type.name, id);
  cluster_.node_types_.push_back(std::move(type));
  return id;
}

NodeId ClusterBuilder::add_node(std::string name, NodeTypeId type) {
  NodeId id(static_cast<std::uint32_t>(cluster_.node_names_.size()));
  cluster_.node_index_.emplace(name, id);
  cluster_.node_names_.push_back(std::move(name));
  cluster_.node_type_.push_back(type);
  node_attach_.push_back({kNoneYet, kNoneYet});
  node_domains_.push_back({kNoneYet, kNoneYet});
  return id;
}

void ClusterBuilder::reserve_nodes(std::size_t nodes) {
  cluster_.node_index_.reserve(nodes);
  cluster_.node_names_.reserve(nodes);
  cluster_.node_type_.reserve(nodes);
  node_attach_.reserve(nodes);
  node_domains_.reserve(nodes);
}

int ClusterBuilder::add_tier(Tier tier) {
  cluster_.tiers_.push_back(std::move(tier));
  return static_cast<int>(cluster_.tiers_.size() - 1);
}

SwitchId ClusterBuilder::add_switch(std::string name, int tier) {
  SwitchId id(static_cast<std::uint32_t>(cluster_.switch_names_.size()));
  cluster_.switch_index_.emplace(name, id);
  cluster_.switch_names_.push_back(std::move(name));
  cluster_.switch_tier_.push_back(tier);
  switch_parents_.emplace_back();
  return id;
}

void ClusterBuilder::connect(SwitchId child, SwitchId parent) {
  switch_parents_[child.index()].push_back(parent);
}

namespace {
// Records x in the first free slot unless a slot holds it already (the first two distinct).
void note_first_two(std::array<std::uint32_t, 2>& v, std::uint32_t x, std::uint32_t none) {
  if (v[0] == none)
    v[0] = x;
  else if (v[0] != x && v[1] == none)
    v[1] = x;
}
}  // namespace

void ClusterBuilder::attach(NodeId node, SwitchId sw) { note_first_two(node_attach_[node.index()], sw.value, kNoneYet); }

DomainId ClusterBuilder::add_domain(DomainSpec domain) {
  DomainId id(static_cast<std::uint32_t>(cluster_.domains_.size()));
  cluster_.domain_index_.emplace(domain.name, id);
  cluster_.domains_.push_back(std::move(domain));
  cluster_.domain_nodes_.emplace_back();
  return id;
}

void ClusterBuilder::add_to_domain(NodeId node, DomainId domain, std::string sub_domain) {
  note_first_two(node_domains_[node.index()], domain.value, kNoneYet);
  if (!sub_domain.empty()) node_sub_domain_[node.index()] = std::move(sub_domain);
}

void ClusterBuilder::set_cross_root(double bandwidth_GBps, double latency_us) {
  cluster_.cross_root_bandwidth_GBps_ = bandwidth_GBps;
  cluster_.cross_root_latency_us_ = latency_us;
}

std::optional<NodeId> ClusterBuilder::find_node(std::string_view name) const {
  return cluster_.find_node(name);
}
std::optional<SwitchId> ClusterBuilder::find_switch(std::string_view name) const {
  return cluster_.find_switch(name);
}
std::optional<DomainId> ClusterBuilder::find_domain(std::string_view name) const {
  return cluster_.find_domain(name);
}
std::optional<NodeTypeId> ClusterBuilder::find_node_type(std::string_view name) const {
  auto it = type_index_.find(std::string(name));
  if (it == type_index_.end()) return std::nullopt;
  return it->second;
}

tl::unexpected<Error> ClusterBuilder::fail(std::string subject, std::string message) {
  error_subject_ = std::move(subject);
  return make_error(ErrorCode::kValidation, std::move(message));
}

Result<void> ClusterBuilder::validate_node_type(const NodeType& t) {
  const std::string& s = t.name;
  if (t.name.empty()) return fail(s, "a node type has an empty name");
  if (t.gpu_count < 0 || t.gpu_count > 64)
    return fail(s, fmt::format("node type '{}': GPU count {} is outside 0..64", s, t.gpu_count));
  const auto n = static_cast<std::size_t>(t.gpu_count);
  if (t.gpu_links.size() != n * n)
    return fail(s, fmt::format("node type '{}' has {} GPUs but its link matrix has {} cells "
                               "(expected {} x {})",
                               s, n, t.gpu_links.size(), n, n));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const GpuLink& l = t.gpu_links[i * n + j];
      if ((i == j) != (l.cls == LinkClass::kSelf))
        return fail(s, fmt::format("node type '{}': link matrix cell ({}, {}) is '{}'; 'X' "
                                   "belongs exactly on the diagonal",
                                   s, i, j, link_cell_token(l)));
      if ((l.cls == LinkClass::kNVLink) != (l.nvlinks > 0))
        return fail(s, fmt::format("node type '{}': cell ({}, {}) has an NVLink class without "
                                   "a link count",
                                   s, i, j));
      if (l != t.gpu_links[j * n + i])
        return fail(s, fmt::format("node type '{}': link matrix is not symmetric: ({}, {}) is "
                                   "'{}' but ({}, {}) is '{}'",
                                   s, i, j, link_cell_token(l), j, i,
                                   link_cell_token(t.gpu_links[j * n + i])));
    }
  bool any_nvlink = std::any_of(t.gpu_links.begin(), t.gpu_links.end(),
                                [](const GpuLink& l) { return l.cls == LinkClass::kNVLink; });
  if (any_nvlink && !(t.nvlink_GBps_per_link > 0))
    return fail(s, fmt::format("node type '{}' has NVLinks but no per-link bandwidth", s));
  if (n > 1 && !(t.pcie_GBps > 0))
    return fail(s, fmt::format("node type '{}' needs a positive PCIe bandwidth", s));
  if (!t.gpu_numa.empty() && t.gpu_numa.size() != n)
    return fail(s, fmt::format("node type '{}': {} NUMA entries for {} GPUs", s,
                               t.gpu_numa.size(), n));
  if (!t.gpu_cpu_affinity.empty() && t.gpu_cpu_affinity.size() != n)
    return fail(s, fmt::format("node type '{}': {} CPU affinity entries for {} GPUs", s,
                               t.gpu_cpu_affinity.size(), n));
  for (const Nic& nic : t.nics) {
    if (nic.name.empty()) return fail(s, fmt::format("node type '{}': a NIC has no name", s));
    if (!(nic.gbit > 0))
      return fail(s, fmt::format("node type '{}': NIC '{}' needs a positive speed", s, nic.name));
    if (nic.gpu_affinity.size() != n)
      return fail(s, fmt::format("node type '{}': NIC '{}' lists {} GPU affinities for {} GPUs",
                                 s, nic.name, nic.gpu_affinity.size(), n));
    for (LinkClass c : nic.gpu_affinity)
      if (c == LinkClass::kSelf || c == LinkClass::kNVLink)
        return fail(s, fmt::format("node type '{}': NIC '{}' affinity must be a PCIe class "
                                   "(PIX, PXB, PHB, NODE, SYS)",
                                   s, nic.name));
  }
  return {};
}

namespace {

PathLevel pcie_level(LinkClass c) {
  switch (c) {
    case LinkClass::kPix: return PathLevel::kPciePix;
    case LinkClass::kPxb: return PathLevel::kPciePxb;
    case LinkClass::kPhb: return PathLevel::kPciePhb;
    case LinkClass::kNode: return PathLevel::kPcieNode;
    default: return PathLevel::kPcieSys;
  }
}

std::size_t pcie_index(LinkClass c) {
  return static_cast<std::size_t>(c) - static_cast<std::size_t>(LinkClass::kPix);
}

}  // namespace

// Every node, switch, domain and node type named once, and no empty node or switch name.
Result<void> ClusterBuilder::check_names() {
  Cluster& c = cluster_;
  if (c.node_index_.size() != c.node_names_.size()) {
    std::unordered_map<std::string, int> seen;
    for (const auto& n : c.node_names_)
      if (++seen[n] == 2) return fail(n, fmt::format("node '{}' is declared twice", n));
  }
  if (c.switch_index_.size() != c.switch_names_.size()) {
    std::unordered_map<std::string, int> seen;
    for (const auto& n : c.switch_names_)
      if (++seen[n] == 2) return fail(n, fmt::format("switch '{}' is declared twice", n));
  }
  if (c.domain_index_.size() != c.domains_.size()) {
    std::unordered_map<std::string, int> seen;
    for (const auto& d : c.domains_)
      if (++seen[d.name] == 2)
        return fail(d.name, fmt::format("accelerator domain '{}' is declared twice", d.name));
  }
  if (type_index_.size() != c.node_types_.size()) {
    std::unordered_map<std::string, int> seen;
    for (const auto& t : c.node_types_)
      if (++seen[t.name] == 2) return fail(t.name, fmt::format("node type '{}' is declared twice", t.name));
  }
  for (const auto& n : c.node_names_)
    if (n.empty()) return fail(n, "a node has an empty name");
  for (const auto& n : c.switch_names_)
    if (n.empty()) return fail(n, "a switch has an empty name");
  return {};
}

// Tier names unique and non-empty, oversubscription >= 1, bandwidth, latency and path
// factors in range; at most 200 tiers.
Result<void> ClusterBuilder::check_tiers() {
  const Cluster& c = cluster_;
  std::unordered_map<std::string, int> seen;
  for (const auto& t : c.tiers_) {
    if (t.name.empty()) return fail(t.name, "a fabric tier has an empty name");
    if (++seen[t.name] == 2) return fail(t.name, fmt::format("tier '{}' is declared twice", t.name));
    if (!(t.oversubscription >= 1.0))
      return fail(t.name, fmt::format("tier '{}': oversubscription {} must be >= 1", t.name,
                                      t.oversubscription));
    if (t.bandwidth_GBps_per_node < 0 || t.hop_latency_us < 0)
      return fail(t.name, fmt::format("tier '{}': bandwidth and latency must not be negative", t.name));
    if (!(t.path_bandwidth_factor > 0 && t.path_latency_factor > 0) || std::isinf(t.path_bandwidth_factor) ||
        std::isinf(t.path_latency_factor))
      return fail(t.name, fmt::format("tier '{}': path bandwidth and latency factors must be finite and > 0", t.name));
  }
  if (c.tiers_.size() > 200) return fail("", "more than 200 fabric tiers");
  return {};
}

// Every node type valid, every node of a known type.
Result<void> ClusterBuilder::check_node_types() {
  Cluster& c = cluster_;
  for (const auto& t : c.node_types_)
    if (auto ok = validate_node_type(t); !ok) return tl::unexpected(ok.error());
  for (std::size_t i = 0; i < c.node_type_.size(); ++i)
    if (!c.node_type_[i].valid() || c.node_type_[i].index() >= c.node_types_.size())
      return fail(c.node_names_[i], fmt::format("node '{}' has an unknown node type", c.node_names_[i]));
  return {};
}

// Switches: tier in range, one parent, no cycle, the parent in a higher tier; then the
// parent and child tables.
Result<void> ClusterBuilder::link_switches() {
  Cluster& c = cluster_;
  const std::size_t ns = c.switch_names_.size();
  c.switch_parent_.assign(ns, SwitchId());
  for (std::size_t s = 0; s < ns; ++s) {
    int tier = c.switch_tier_[s];
    if (tier < 0 || static_cast<std::size_t>(tier) >= c.tiers_.size())
      return fail(c.switch_names_[s], fmt::format("switch '{}' is in tier {}, but the fabric has {} tiers",
                                                  c.switch_names_[s], tier, c.tiers_.size()));
    auto& parents = switch_parents_[s];
    std::sort(parents.begin(), parents.end());
    parents.erase(std::unique(parents.begin(), parents.end()), parents.end());
    if (parents.size() > 1)
      return fail(c.switch_names_[s],
                  fmt::format("switch '{}' has two parents ('{}' and '{}'); the fabric must be a tree",
                              c.switch_names_[s], c.switch_names_[parents[0].index()],
                              c.switch_names_[parents[1].index()]));
    if (parents.size() == 1) c.switch_parent_[s] = parents[0];
  }
  for (std::size_t s = 0; s < ns; ++s) {
    // Walk up at most ns steps; coming back to s is a cycle.
    SwitchId cur = c.switch_parent_[s];
    for (std::size_t steps = 0; cur.valid() && steps <= ns; ++steps) {
      if (cur.index() == s) {
        std::string chain = c.switch_names_[s];
        SwitchId w = c.switch_parent_[s];
        for (std::size_t k = 0; k <= ns && w.valid(); ++k) {
          chain += " -> " + c.switch_names_[w.index()];
          if (w.index() == s) break;
          w = c.switch_parent_[w.index()];
        }
        return fail(c.switch_names_[s], fmt::format("switch cycle: {}", chain));
      }
      cur = c.switch_parent_[cur.index()];
    }
  }
  for (std::size_t s = 0; s < ns; ++s) {
    SwitchId p = c.switch_parent_[s];
    if (p.valid() && c.switch_tier_[p.index()] <= c.switch_tier_[s])
      return fail(c.switch_names_[s],
                  fmt::format("switch '{}' (tier '{}') has parent '{}' in tier '{}'; a parent must "
                              "be in a higher tier",
                              c.switch_names_[s], c.tiers_[static_cast<std::size_t>(c.switch_tier_[s])].name,
                              c.switch_names_[p.index()],
                              c.tiers_[static_cast<std::size_t>(c.switch_tier_[p.index()])].name));
  }
  c.switch_children_.assign(ns, {});
  for (std::size_t s = 0; s < ns; ++s)
    if (c.switch_parent_[s].valid())
      c.switch_children_[c.switch_parent_[s].index()].push_back(SwitchId(static_cast<std::uint32_t>(s)));
  return {};
}

// Nodes: under at most one switch and in at most one domain (a sub-domain only with a
// domain); the switch, subtree, domain and GPU-id tables.
Result<void> ClusterBuilder::place_nodes() {
  Cluster& c = cluster_;
  const std::size_t ns = c.switch_names_.size();
  const std::size_t nn = c.node_names_.size();
  c.node_switch_.assign(nn, SwitchId());
  c.node_domain_.assign(nn, DomainId());
  c.node_sub_domain_.assign(nn, 0);
  c.switch_nodes_.assign(ns, {});
  c.switch_subtree_nodes_.assign(ns, {});
  c.node_first_gpu_.resize(nn);
  std::unordered_map<std::string, std::uint32_t> sub_index;
  std::size_t total_gpus = 0;
  for (std::size_t i = 0; i < nn; ++i) total_gpus += static_cast<std::size_t>(c.node_types_[c.node_type_[i].index()].gpu_count);
  if (total_gpus >= std::numeric_limits<std::uint32_t>::max() / 2) return fail("", "too many GPUs");
  c.gpu_node_.clear();
  c.gpu_node_.reserve(total_gpus);
  c.gpu_local_.reserve(total_gpus);
  for (std::size_t i = 0; i < nn; ++i) {
    const std::string& name = c.node_names_[i];
    NodeId id(static_cast<std::uint32_t>(i));
    const auto& att = node_attach_[i];
    if (att[1] != kNoneYet)
      return fail(name, fmt::format("node '{}' is under two switches ('{}' and '{}')", name,
                                    c.switch_names_[att[0]], c.switch_names_[att[1]]));
    if (att[0] != kNoneYet) {
      c.node_switch_[i] = SwitchId(att[0]);
      c.switch_nodes_[att[0]].push_back(id);
      for (SwitchId s(att[0]); s.valid(); s = c.switch_parent_[s.index()])
        c.switch_subtree_nodes_[s.index()].push_back(id);
    }
    const auto& doms = node_domains_[i];
    if (doms[1] != kNoneYet)
      return fail(name, fmt::format("node '{}' is in two accelerator domains ('{}' and '{}')", name,
                                    c.domains_[doms[0]].name, c.domains_[doms[1]].name));
    const auto sub = node_sub_domain_.find(static_cast<std::uint32_t>(i));
    const bool has_sub = sub != node_sub_domain_.end();  // only non-empty names are kept
    if (doms[0] != kNoneYet) {
      c.node_domain_[i] = DomainId(doms[0]);
      c.domain_nodes_[doms[0]].push_back(id);
      if (has_sub) {
        auto [it, inserted] = sub_index.emplace(sub->second, c.sub_domain_names_.size());
        if (inserted) c.sub_domain_names_.push_back(sub->second);
        c.node_sub_domain_[i] = it->second;
      }
    } else if (has_sub) {
      return fail(name, fmt::format("node '{}' has a sub-domain but no domain", name));
    }
    c.node_first_gpu_[i] = static_cast<std::uint32_t>(c.gpu_node_.size());
    const int g = c.node_types_[c.node_type_[i].index()].gpu_count;
    for (int k = 0; k < g; ++k) {
      c.gpu_node_.push_back(id);
      c.gpu_local_.push_back(static_cast<std::uint16_t>(k));
    }
  }
  return {};
}

// Per node type: every GPU pair's level, bandwidth and latency; each GPU's network share
// (the best-affinity compute NIC, shared by the GPUs that also pick it; bounded by the PCIe
// path between GPU and NIC; no NICs: the GPU's PCIe link); the widest NVLink.
void ClusterBuilder::build_node_type_tables() {
  Cluster& c = cluster_;
  c.type_pairs_.clear();
  c.type_gpu_net_.clear();
  c.type_nvlink_GBps_.clear();
  for (const NodeType& t : c.node_types_) {
    const int n = t.gpu_count;
    std::vector<Cluster::PairInfo> pairs(static_cast<std::size_t>(n * n));
    int max_links = 0;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        const GpuLink& l = t.link(a, b);
        Cluster::PairInfo& p = pairs[static_cast<std::size_t>(a * n + b)];
        if (l.cls == LinkClass::kSelf) {
          p = {PathLevel::kSameGpu, static_cast<float>(kInf), 0.0f};
        } else if (l.cls == LinkClass::kNVLink) {
          p = {PathLevel::kNVLink, static_cast<float>(l.nvlinks * t.nvlink_GBps_per_link),
               static_cast<float>(kNvlinkLatencyUs)};
          max_links = std::max(max_links, static_cast<int>(l.nvlinks));
        } else {
          std::size_t k = pcie_index(l.cls);
          p = {pcie_level(l.cls), static_cast<float>(t.pcie_GBps * kPcieBandwidthFactor[k]),
               static_cast<float>(kPcieLatencyUs[k])};
        }
      }
    c.type_pairs_.push_back(std::move(pairs));
    // A GPU's network share: the best-affinity compute NIC, shared by the GPUs that also pick
    // it; bounded by the PCIe path between GPU and NIC. No NICs: the GPU's PCIe link.
    std::vector<double> net(static_cast<std::size_t>(n), t.pcie_GBps > 0 ? t.pcie_GBps : 0);
    std::vector<int> chosen(static_cast<std::size_t>(n), -1);
    std::vector<int> users(t.nics.size(), 0);
    for (int g = 0; g < n; ++g) {
      int best = -1;
      for (std::size_t k = 0; k < t.nics.size(); ++k) {
        if (!t.nics[k].compute) continue;
        if (best < 0 || t.nics[k].gpu_affinity[static_cast<std::size_t>(g)] <
                            t.nics[static_cast<std::size_t>(best)].gpu_affinity[static_cast<std::size_t>(g)])
          best = static_cast<int>(k);
      }
      chosen[static_cast<std::size_t>(g)] = best;
      if (best >= 0) ++users[static_cast<std::size_t>(best)];
    }
    for (int g = 0; g < n; ++g) {
      int k = chosen[static_cast<std::size_t>(g)];
      if (k < 0) continue;
      const Nic& nic = t.nics[static_cast<std::size_t>(k)];
      double share = nic.gbit / 8.0 / users[static_cast<std::size_t>(k)];
      double pcie = t.pcie_GBps > 0
                        ? t.pcie_GBps * kPcieBandwidthFactor[pcie_index(nic.gpu_affinity[static_cast<std::size_t>(g)])]
                        : share;
      net[static_cast<std::size_t>(g)] = std::min(share, pcie);
    }
    for (double& v : net)
      if (!(v > 0)) v = 1.0;  // a GPU-less or link-less type: keep paths finite and positive
    c.type_gpu_net_.push_back(std::move(net));
    c.type_nvlink_GBps_.push_back(max_links * t.nvlink_GBps_per_link);
  }
}

// Domains: no negative figures, at least one node; default bandwidth from the members'
// NVLinks, default latency.
Result<void> ClusterBuilder::finish_domains() {
  Cluster& c = cluster_;
  for (std::size_t d = 0; d < c.domains_.size(); ++d) {
    DomainSpec& spec = c.domains_[d];
    if (spec.bandwidth_GBps < 0 || spec.latency_us < 0)
      return fail(spec.name, fmt::format("domain '{}': bandwidth and latency must not be negative", spec.name));
    if (c.domain_nodes_[d].empty())
      return fail(spec.name, fmt::format("accelerator domain '{}' has no nodes", spec.name));
    if (spec.bandwidth_GBps == 0) {
      double bw = kInf;
      for (NodeId n : c.domain_nodes_[d])
        bw = std::min(bw, c.type_nvlink_GBps_[c.node_type_[n.index()].index()]);
      if (!(bw > 0) || bw == kInf)
        return fail(spec.name, fmt::format("accelerator domain '{}' has a node without NVLink; give "
                                           "its bandwidth explicitly",
                                           spec.name));
      spec.bandwidth_GBps = bw;
    }
    if (spec.latency_us == 0) spec.latency_us = kDefaultDomainLatencyUs;
  }
  return {};
}

// Per tier: the bandwidth cap (the narrowest tier at or below it), the oversubscription of
// the tiers below it and the latency of a path that joins at it.
void ClusterBuilder::build_tier_tables() {
  Cluster& c = cluster_;
  const std::size_t nt = c.tiers_.size();
  c.tier_bandwidth_cap_.assign(nt, kInf);
  c.tier_oversub_below_.assign(nt, 1.0);
  c.tier_latency_.assign(nt, 0.0);
  double cap = kInf, over = 1.0, up_latency = 0.0;
  for (std::size_t k = 0; k < nt; ++k) {
    const Tier& t = c.tiers_[k];
    if (t.bandwidth_GBps_per_node > 0) cap = std::min(cap, t.bandwidth_GBps_per_node);
    c.tier_bandwidth_cap_[k] = cap;
    c.tier_oversub_below_[k] = over;
    // Up through tiers < k on both sides, across the joining switch once.
    c.tier_latency_[k] = 2 * up_latency + t.hop_latency_us;
    up_latency += t.hop_latency_us;
    over *= t.oversubscription;
  }
}

Result<Cluster> ClusterBuilder::build() && {
  if (auto ok = check_names(); !ok) return tl::unexpected(ok.error());
  if (auto ok = check_tiers(); !ok) return tl::unexpected(ok.error());
  if (auto ok = check_node_types(); !ok) return tl::unexpected(ok.error());
  if (auto ok = link_switches(); !ok) return tl::unexpected(ok.error());
  if (auto ok = place_nodes(); !ok) return tl::unexpected(ok.error());
  build_node_type_tables();
  if (auto ok = finish_domains(); !ok) return tl::unexpected(ok.error());
  build_tier_tables();
  if (cluster_.cross_root_bandwidth_GBps_ < 0 || cluster_.cross_root_latency_us_ < 0)
    return fail("", "cross-root bandwidth and latency must not be negative");
  error_subject_.clear();
  return std::move(cluster_);
}

}  // namespace toposched
