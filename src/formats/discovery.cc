#include "formats/discovery.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "topology/hardware.h"
#include "topology/hostlist.h"

namespace toposched {

std::string tier_name_for_level(int level) {
  switch (level) {
    case 0:
      return "leaf";
    case 1:
      return "spine";
    case 2:
      return "core";
    default:
      return fmt::format("tier{}", level);
  }
}

void warn_about_names(std::vector<std::string>& warnings, const std::vector<std::string>& names,
                      std::string_view what) {
  if (!names.empty()) warnings.push_back(fmt::format("{} {}: {}", names.size(), what, compress_hostlist(names)));
}

Result<NodeType> generic_node_type(const std::string& gpu_model, int gpu_count, double nic_gbit) {
  if (gpu_count < 1 || gpu_count > 64)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("expected a GPU count in 1..64, found {}", gpu_count));
  if (!(nic_gbit > 0)) return make_error(ErrorCode::kInvalidArgument, "expected a positive NIC speed");
  auto product = find_gpu_product(gpu_model);
  if (!product)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("unknown GPU model '{}'; expected a product such as H100, H200, B200, GB200, "
                                  "A100, V100 or L40S",
                                  gpu_model));
  NodeType t;
  t.gpu_model = std::string(product->canonical);
  t.gpu_memory_gb = product->memory_gb;
  t.gpu_count = gpu_count;
  t.pcie_GBps = pcie_GBps(product->pcie_gen, 16);
  t.nvlink_GBps_per_link = product->nvlink_GBps_per_link;
  if (product->nvlinks_per_gpu > 0 && gpu_count > 1) {
    t.gpu_links = NodeType::full_nvlink_mesh(gpu_count, product->nvlinks_per_gpu);
    t.nvswitch = true;
  } else {
    t.gpu_links = NodeType::full_nvlink_mesh(gpu_count, 0);
    for (int a = 0; a < gpu_count; ++a)
      for (int b = 0; b < gpu_count; ++b)
        t.gpu_links[static_cast<std::size_t>(a * gpu_count + b)] = {a == b ? LinkClass::kSelf : LinkClass::kSys, 0};
  }
  for (int g = 0; g < gpu_count; ++g) {
    Nic nic;
    nic.name = fmt::format("nic{}", g);
    nic.gbit = nic_gbit;
    nic.gpu_affinity.assign(static_cast<std::size_t>(gpu_count), LinkClass::kSys);
    nic.gpu_affinity[static_cast<std::size_t>(g)] = LinkClass::kPix;
    t.nics.push_back(std::move(nic));
  }
  return t;
}

void apply_pcie_layout(const GpuPcieLayout& layout, NodeType& type) {
  const auto n = static_cast<std::size_t>(type.gpu_count);
  if (layout.pcie_root.size() != n || layout.numa.size() != n) return;
  auto distance = [&](std::size_t a, std::size_t b) {
    if (a == b) return LinkClass::kSelf;
    if (!layout.pcie_root[a].empty() && layout.pcie_root[a] == layout.pcie_root[b]) return LinkClass::kPhb;
    if (layout.numa[a] >= 0 && layout.numa[a] == layout.numa[b]) return LinkClass::kNode;
    return LinkClass::kSys;
  };
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) {
      GpuLink& link = type.gpu_links[a * n + b];
      if (link.cls != LinkClass::kNVLink) link.cls = distance(a, b);
    }
  // The generic type's NIC g sits beside GPU g (PIX).
  for (std::size_t g = 0; g < type.nics.size() && g < n; ++g)
    for (std::size_t b = 0; b < n; ++b) type.nics[g].gpu_affinity[b] = b == g ? LinkClass::kPix : distance(g, b);
  if (std::all_of(layout.numa.begin(), layout.numa.end(), [](int x) { return x >= 0; }))
    type.gpu_numa = layout.numa;
}

bool natural_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      std::size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      // Compare the numbers without converting (they may be long): skip leading zeros.
      std::size_t si = i, sj = j;
      while (si + 1 < ei && a[si] == '0') ++si;
      while (sj + 1 < ej && b[sj] == '0') ++sj;
      if (ei - si != ej - sj) return ei - si < ej - sj;
      int c = a.compare(si, ei - si, b, sj, ej - sj);
      if (c != 0) return c < 0;
      if (ei - i != ej - j) return ei - i < ej - j;  // "n01" before "n001"
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

namespace {

const std::string kNoSource;

// A node as merged, with the source of each of its facts. The sources are names in the
// DiscoveredTopology vector merge_discovered owns for the whole merge (pointers, not copies:
// a million-node input would otherwise hold three copies of its file name per node).
struct MergedNode {
  DiscoveredNode node;
  const std::string* switch_source = &kNoSource;
  const std::string* domain_source = &kNoSource;
  const std::string* hardware_source = &kNoSource;
};

struct MergedSwitch {
  DiscoveredSwitch sw;
  const std::string* source = &kNoSource;
};

// Whether two nodes' hardware is one node type: everything but the name and the host
// memory, which decides no placement (a GB more or less of MemTotal between identical servers
// must not split their type, nor their Kueue ResourceFlavor).
bool same_hardware(NodeType a, NodeType b) {
  a.name.clear();
  b.name.clear();
  a.host_memory_gb = b.host_memory_gb = 0;
  return a == b;
}

// A type's host memory is the smallest its nodes report (unknown ones left out): a share of
// it (`route --host-cache-gb P%`) fits on every node of the type.
void fold_host_memory(NodeType& type, double node_gb) {
  if (node_gb > 0 && (type.host_memory_gb == 0 || node_gb < type.host_memory_gb)) type.host_memory_gb = node_gb;
}

std::string names_of(const std::vector<std::string>& names) {
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end(), natural_less);
  return compress_hostlist(sorted);
}

// The sources merged into one list of switches and one of nodes, with what disagreed.
struct Merged {
  std::vector<std::string> warnings;
  std::vector<std::string> tiers;  // the deepest source names them
  std::vector<MergedSwitch> switches;
  std::unordered_map<std::string, std::size_t> switch_index;
  std::vector<MergedNode> nodes;  // sorted by name (natural order)
  std::vector<std::string> unplaced;  // nodes missing from the switch tree
  std::vector<std::string> no_data;   // nodes with neither a switch nor a domain
};

void take_source_warnings(const std::vector<DiscoveredTopology>& sources, Merged& m) {
  for (const auto& s : sources)
    for (const auto& w : s.warnings) m.warnings.push_back(s.source.empty() ? w : s.source + ": " + w);
  for (const auto& s : sources)
    if (s.tiers.size() > m.tiers.size()) m.tiers = s.tiers;
}

// Switches: the union, first source wins. Each source's switches are moved from.
void merge_switches(std::vector<DiscoveredTopology>& sources, Merged& m) {
  for (auto& s : sources)
    for (auto& sw : s.switches) {
      auto it = m.switch_index.find(sw.name);
      if (it == m.switch_index.end()) {
        m.switch_index.emplace(sw.name, m.switches.size());
        m.switches.push_back({std::move(sw), &s.source});
        continue;
      }
      const MergedSwitch& prev = m.switches[it->second];
      if (prev.sw.tier != sw.tier || prev.sw.parent != sw.parent)
        m.warnings.push_back(
            fmt::format("{}: switch '{}' is in tier {} under '{}' here but in tier {} under '{}' in {}; "
                        "keeping the latter",
                        s.source, sw.name, sw.tier, sw.parent, prev.sw.tier, prev.sw.parent, *prev.source));
    }
}

// One source's view of a node into the merged node: the first source to say a thing wins.
void merge_node(const std::string& source, const DiscoveredNode& n, MergedNode& m, std::vector<std::string>& warnings) {
  if (!n.switch_name.empty()) {
    if (m.node.switch_name.empty()) {
      m.node.switch_name = n.switch_name;
      m.switch_source = &source;
    } else if (m.node.switch_name != n.switch_name) {
      warnings.push_back(fmt::format("{}: node '{}' is under switch '{}' here but under '{}' in {}; keeping '{}'",
                                     source, n.name, n.switch_name, m.node.switch_name, *m.switch_source,
                                     m.node.switch_name));
    }
  }
  if (!n.domain.empty()) {
    if (m.node.domain.empty()) {
      m.node.domain = n.domain;
      m.node.sub_domain = n.sub_domain;
      m.domain_source = &source;
    } else if (m.node.domain != n.domain) {
      warnings.push_back(
          fmt::format("{}: node '{}' is in accelerator domain '{}' here but in '{}' in {}; "
                      "keeping '{}'",
                      source, n.name, n.domain, m.node.domain, *m.domain_source, m.node.domain));
    } else if (m.node.sub_domain.empty()) {
      m.node.sub_domain = n.sub_domain;
    }
  }
  if (n.hardware) {
    if (!m.node.hardware) {
      m.node.hardware = n.hardware;
      m.hardware_source = &source;
    } else if (!same_hardware(*m.node.hardware, *n.hardware)) {
      warnings.push_back(fmt::format("{}: node '{}' has different hardware here than in {}; keeping the latter",
                                     source, n.name, *m.hardware_source));
    }
  }
  if (m.node.nic_gbit == 0) m.node.nic_gbit = n.nic_gbit;
  if (m.node.host_memory_gb == 0) m.node.host_memory_gb = n.host_memory_gb;
  if (m.node.gpu_count == 0) m.node.gpu_count = n.gpu_count;
  if (!m.node.pcie) m.node.pcie = n.pcie;
  if (m.node.gpu_model.empty()) m.node.gpu_model = n.gpu_model, m.node.gpu_model_at = n.gpu_model_at;
}

// The first source's view of a node, moved: what merge_node would make of it on an
// empty node, without copying its strings.
MergedNode first_view(const std::string& source, DiscoveredNode&& n) {
  MergedNode m;
  if (!n.switch_name.empty()) m.switch_source = &source;
  if (!n.domain.empty())
    m.domain_source = &source;
  else
    n.sub_domain.clear();
  if (n.hardware) m.hardware_source = &source;
  m.node = std::move(n);
  return m;
}

// Nodes: merged by name, then sorted. Each source's nodes are moved from.
Result<void> merge_nodes(std::vector<DiscoveredTopology>& sources, Merged& m) {
  std::unordered_map<std::string_view, std::size_t> node_index;  // views of the names in m.nodes
  std::size_t total = 0;
  for (const auto& s : sources) total += s.nodes.size();
  m.nodes.reserve(total);  // no reallocation: node_index views the names in place
  node_index.reserve(total);
  for (auto& s : sources)
    for (auto& n : s.nodes) {
      auto it = node_index.find(n.name);
      if (it == node_index.end()) {
        m.nodes.push_back(first_view(s.source, std::move(n)));
        node_index.emplace(m.nodes.back().node.name, m.nodes.size() - 1);
        continue;
      }
      merge_node(s.source, n, m.nodes[it->second], m.warnings);
    }
  if (m.nodes.empty())
    return make_error(ErrorCode::kValidation,
                      "no node found in the inputs; give per-node `topo -m` files or a fabric source that names nodes");
  std::sort(m.nodes.begin(), m.nodes.end(),
            [](const MergedNode& a, const MergedNode& b) { return natural_less(a.node.name, b.node.name); });
  return {};
}

// Node switches that name no switch are dropped; nodes without fabric data are named.
void check_node_fabric(Merged& m) {
  for (auto& n : m.nodes)
    if (!n.node.switch_name.empty() && !m.switch_index.contains(n.node.switch_name)) {
      m.warnings.push_back(fmt::format("{}: node '{}' names switch '{}', which no source declares; ignoring it",
                                       *n.switch_source, n.node.name, n.node.switch_name));
      n.node.switch_name.clear();
    }
  std::vector<std::string> no_hardware;
  for (const auto& n : m.nodes) {
    if (n.node.switch_name.empty()) {
      if (!m.switches.empty())
        m.unplaced.push_back(n.node.name);
      else if (n.node.domain.empty())
        m.no_data.push_back(n.node.name);
    }
    if (!n.node.hardware) no_hardware.push_back(n.node.name);
  }
  if (!m.unplaced.empty())
    m.warnings.push_back(fmt::format("{} node(s) are missing from the switch tree and go under '{}': {}",
                                     m.unplaced.size(), kNoTopologySwitch, names_of(m.unplaced)));
  if (!m.no_data.empty())
    m.warnings.push_back(
        fmt::format("{} node(s) have no fabric data (no switch, no accelerator domain) and go under "
                    "'{}': {}",
                    m.no_data.size(), kNoTopologySwitch, names_of(m.no_data)));
  if (!no_hardware.empty() && no_hardware.size() < m.nodes.size())
    m.warnings.push_back(fmt::format("{} node(s) have no `topo -m` file and get a generic node type: {}",
                                     no_hardware.size(), names_of(no_hardware)));
}

Result<void> refuse_warnings_if_strict(const Merged& m, const DiscoveryOptions& options) {
  if (!options.strict || m.warnings.empty()) return {};
  std::string all;
  for (const auto& w : m.warnings) all += "\n  " + w;
  return make_error(ErrorCode::kValidation,
                    fmt::format("--strict: {} warning(s) count as errors:{}", m.warnings.size(), all));
}

// A node's hardware: its `topo -m` type (NIC speed from the fabric where asked), else a
// generic type for its GPU model; either with the host memory a source gave.
Result<NodeType> node_hardware(const MergedNode& m, const DiscoveryOptions& options) {
  if (m.node.hardware) {
    NodeType hw = *m.node.hardware;
    if (options.nic_gbit_from_fabric && m.node.nic_gbit > 0)
      for (Nic& nic : hw.nics)
        if (nic.compute) nic.gbit = m.node.nic_gbit;
    hw.host_memory_gb = m.node.host_memory_gb;
    return hw;
  }
  const std::string model = m.node.gpu_model.empty() ? options.default_gpu_model : m.node.gpu_model;
  // A GB200/GB300 compute tray has 4 GPUs; other products default to the option.
  auto product = find_gpu_product(model);
  const bool tray = product && product->canonical.starts_with("GB");
  const int count = m.node.gpu_count > 0 ? m.node.gpu_count : tray ? 4 : options.default_gpu_count;
  const double nic_gbit =
      options.nic_gbit_from_fabric && m.node.nic_gbit > 0 ? m.node.nic_gbit : options.default_nic_gbit;
  auto generic = generic_node_type(model, count, nic_gbit);
  if (generic && m.node.pcie) apply_pcie_layout(*m.node.pcie, *generic);
  if (generic) generic->host_memory_gb = m.node.host_memory_gb;
  if (generic) return generic;
  Error e = generic.error();
  e.message = fmt::format("node '{}': {}", m.node.name, e.message);
  // A model named by an input file is bad input (exit 1, at its position); only the
  // command line's default model is a usage error.
  if (!m.node.gpu_model.empty()) e.code = ErrorCode::kValidation, e.where = m.node.gpu_model_at;
  return tl::unexpected(e);
}

// The name of the first type of this hardware: "<model>x<count>", "-generic" for a type
// not from `topo -m`; later distinct types of the same name get "-2", "-3", ...
std::string type_base_name(const NodeType& hw, bool generic) {
  std::string base = fmt::format("{}x{}", hw.gpu_model.empty() ? "gpu" : hw.gpu_model, hw.gpu_count);
  if (generic) base += "-generic";
  return base;
}

// Node types: identical hardware shares one type (host memory aside: the type takes its
// nodes' smallest). The types go to the builder once every node is seen. Returns each node's type.
Result<std::vector<NodeTypeId>> add_node_types(const Merged& m, const DiscoveryOptions& options,
                                               ClusterBuilder& builder) {
  std::vector<NodeType> types;
  std::vector<NodeTypeId> node_type(m.nodes.size());
  std::unordered_map<std::string, int> type_names;
  // A node without `topo -m` hardware or a PCIe layout gets the generic type of its hints
  // (GPU model, GPU count, NIC speed) alone, so the type found for the last such node is
  // the type of the next one with the same hints: no type is built and compared per node
  // (a topology.conf or NodeList of millions of nodes, docs/performance.md "Large inputs").
  struct Hints {
    const std::string* model = nullptr;
    int count = 0;
    double nic_gbit = 0;
  } last;
  NodeTypeId last_type;
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const DiscoveredNode& node = m.nodes[i].node;
    const bool generic = !node.hardware && !node.pcie;
    if (generic && last.model && *last.model == node.gpu_model && last.count == node.gpu_count &&
        last.nic_gbit == node.nic_gbit) {
      node_type[i] = last_type;
      fold_host_memory(types[last_type.index()], node.host_memory_gb);
      continue;
    }
    TOPOSCHED_TRY(hw, node_hardware(m.nodes[i], options));
    std::size_t k = 0;
    for (; k < types.size(); ++k)
      if (same_hardware(types[k], hw)) break;
    if (k == types.size()) {
      const std::string base = type_base_name(hw, !m.nodes[i].node.hardware);
      int& seen = type_names[base];
      hw.name = ++seen == 1 ? base : fmt::format("{}-{}", base, seen);
      types.push_back(hw);
    } else {
      fold_host_memory(types[k], hw.host_memory_gb);
    }
    node_type[i] = NodeTypeId(static_cast<std::uint32_t>(k));
    if (generic) last = {&node.gpu_model, node.gpu_count, node.nic_gbit}, last_type = node_type[i];
  }
  for (const NodeType& t : types) builder.add_node_type(t);
  return node_type;
}

// Tiers and switches; returns the switch for nodes without fabric data when one is needed.
Result<SwitchId> add_fabric(Merged& m, ClusterBuilder& builder) {
  const bool need_no_topology = !m.unplaced.empty() || !m.no_data.empty();
  if (m.tiers.empty() && need_no_topology) m.tiers.push_back(tier_name_for_level(0));
  for (const auto& t : m.tiers) builder.add_tier(Tier{t});
  for (const auto& s : m.switches) builder.add_switch(s.sw.name, s.sw.tier);
  for (const auto& s : m.switches)
    if (!s.sw.parent.empty()) {
      auto p = builder.find_switch(s.sw.parent);
      if (!p) {
        m.warnings.push_back(fmt::format("{}: switch '{}' names parent '{}', which no source declares; ignoring it",
                                         *s.source, s.sw.name, s.sw.parent));
        continue;
      }
      builder.connect(*builder.find_switch(s.sw.name), *p);
    }
  if (!need_no_topology) return SwitchId();
  if (builder.find_switch(kNoTopologySwitch))
    return make_error(ErrorCode::kValidation,
                      fmt::format("a source declares a switch named '{}', the name reserved for nodes without "
                                  "fabric data",
                                  kNoTopologySwitch));
  return builder.add_switch(kNoTopologySwitch, 0);
}

void add_nodes(const Merged& m, const std::vector<NodeTypeId>& node_type, SwitchId no_topology,
               ClusterBuilder& builder) {
  std::map<std::string, DomainId> domains;
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const DiscoveredNode& n = m.nodes[i].node;
    NodeId id = builder.add_node(n.name, node_type[i]);
    if (!n.switch_name.empty())
      builder.attach(id, *builder.find_switch(n.switch_name));
    else if (no_topology.valid() && (n.domain.empty() || !m.switches.empty()))
      builder.attach(id, no_topology);
    if (!n.domain.empty()) {
      auto it = domains.find(n.domain);
      if (it == domains.end()) it = domains.emplace(n.domain, builder.add_domain(DomainSpec{n.domain})).first;
      builder.add_to_domain(id, it->second, n.sub_domain);
    }
  }
}

}  // namespace

Result<NodeType> hintless_node_type(const DiscoveryOptions& options) {
  const MergedNode none;
  TOPOSCHED_TRY(hw, node_hardware(none, options));
  hw.name = type_base_name(hw, true);
  return hw;
}

Result<DiscoveryResult> merge_discovered(std::vector<DiscoveredTopology> sources,
                                         const DiscoveryOptions& options) {
  Merged m;
  take_source_warnings(sources, m);
  merge_switches(sources, m);
  TOPOSCHED_CHECK(merge_nodes(sources, m));
  check_node_fabric(m);
  TOPOSCHED_CHECK(refuse_warnings_if_strict(m, options));

  ClusterBuilder builder(options.cluster_name);
  TOPOSCHED_TRY(node_type, add_node_types(m, options, builder));
  TOPOSCHED_TRY(no_topology, add_fabric(m, builder));
  add_nodes(m, node_type, no_topology, builder);
  auto cluster = std::move(builder).build();
  if (!cluster) {
    Error e = cluster.error();
    e.message = "the merged sources do not form a valid cluster: " + e.message;
    return tl::unexpected(e);
  }
  return DiscoveryResult{std::move(*cluster), std::move(m.warnings)};
}

}  // namespace toposched
