#include "topology/presets.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "topology/hardware.h"
#include "topology/registry.h"

namespace toposched {
namespace {

using Params = std::map<std::string, std::string, std::less<>>;

// Reads integer parameters, checking the range; the first failure is kept.
class ParamReader {
 public:
  ParamReader(const PresetInfo& info, const Params& given) : info_(info), given_(given) {}

  long get(std::string_view key, long lo, long hi) {
    std::string value;
    if (auto it = given_.find(key); it != given_.end()) {
      value = it->second;
    } else {
      for (const auto& p : info_.params)
        if (p.name == key) value = p.default_value;
    }
    long v = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || ptr != value.data() + value.size()) {
      note(fmt::format("preset '{}': parameter '{}' must be an integer, found '{}'", info_.name, key, value));
      return lo;
    }
    if (v < lo || v > hi) {
      note(fmt::format("preset '{}': parameter '{}' must be in {}..{}, found {}", info_.name, key, lo, hi, v));
      return lo;
    }
    return v;
  }

  std::vector<long> get_list(std::string_view key, long lo, long hi) {
    std::string value;
    if (auto it = given_.find(key); it != given_.end()) value = it->second;
    else
      for (const auto& p : info_.params)
        if (p.name == key) value = p.default_value;
    std::vector<long> out;
    std::size_t start = 0;
    while (start <= value.size()) {
      std::size_t comma = value.find(',', start);
      if (comma == std::string::npos) comma = value.size();
      std::string_view part(value.data() + start, comma - start);
      long v = 0;
      auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
      if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || v < lo || v > hi) {
        note(fmt::format("preset '{}': parameter '{}' must be a comma-separated list of integers in "
                         "{}..{}, found '{}'",
                         info_.name, key, lo, hi, value));
        return {lo};
      }
      out.push_back(v);
      start = comma + 1;
      if (comma == value.size()) break;
    }
    return out;
  }

  Result<void> status() const {
    if (error_.empty()) return {};
    return make_error(ErrorCode::kInvalidArgument, error_);
  }

 private:
  void note(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
  }
  const PresetInfo& info_;
  const Params& given_;
  std::string error_;
};

std::string numbered(std::string_view prefix, long i, long count) {
  int width = std::max(3, static_cast<int>(std::to_string(count).size()));
  return fmt::format("{}{:0{}}", prefix, i, width);
}

// An 8-way NVSwitch baseboard (DGX / HGX): every GPU pair NV<links>, GPUs 0-3 on socket 0,
// 4-7 on socket 1, NIC k next to GPU k (PIX), to its pair partner PXB, same socket NODE,
// other socket SYS; as in the H100 fixture's `nvidia-smi topo -m`.
NodeType hgx_node_type(std::string name, std::string_view gpu_name, int nics, int nic_gbit) {
  auto product = find_gpu_product(gpu_name);
  NodeType t;
  t.name = std::move(name);
  t.gpu_model = std::string(product->canonical);
  t.gpu_memory_gb = product->memory_gb;
  t.gpu_count = 8;
  t.gpu_links = NodeType::full_nvlink_mesh(8, product->nvlinks_per_gpu);
  t.nvlink_GBps_per_link = product->nvlink_GBps_per_link;
  t.nvswitch = true;
  t.pcie_GBps = pcie_GBps(product->pcie_gen, 16);
  for (int g = 0; g < 8; ++g) t.gpu_numa.push_back(g / 4);
  for (int k = 0; k < nics; ++k) {
    Nic nic;
    nic.name = fmt::format("mlx5_{}", k);
    nic.gbit = nic_gbit;
    int home = k * 8 / nics;  // the GPU this NIC sits next to
    nic.numa_node = home / 4;
    for (int g = 0; g < 8; ++g) {
      LinkClass c = g == home               ? LinkClass::kPix
                    : g / 2 == home / 2     ? LinkClass::kPxb
                    : g / 4 == home / 4     ? LinkClass::kNode
                                            : LinkClass::kSys;
      nic.gpu_affinity.push_back(c);
    }
    t.nics.push_back(std::move(nic));
  }
  return t;
}

struct TierLevel {
  Tier tier;
  std::string switch_prefix;
  long fanout;  // children (nodes for tier 0, switches above) per switch; 0 = all
};

// Builds a regular tree over `nodes` in order. Stops adding tiers once one switch holds
// everything (so a small cluster has no empty upper tiers), unless keep_all is set.
void add_tree(ClusterBuilder& b, const std::vector<NodeId>& nodes, const std::vector<TierLevel>& levels) {
  std::vector<SwitchId> below;
  for (std::size_t k = 0; k < levels.size(); ++k) {
    const TierLevel& lv = levels[k];
    std::size_t children = k == 0 ? nodes.size() : below.size();
    if (k > 0 && children <= 1) break;
    std::size_t fan = lv.fanout > 0 ? static_cast<std::size_t>(lv.fanout) : children;
    std::size_t count = (children + fan - 1) / fan;
    int tier = b.add_tier(lv.tier);
    std::vector<SwitchId> here;
    for (std::size_t s = 0; s < count; ++s) {
      SwitchId sw = b.add_switch(count == 1 && lv.fanout == 0 ? lv.switch_prefix
                                                              : numbered(lv.switch_prefix, static_cast<long>(s + 1), static_cast<long>(count)),
                                 tier);
      for (std::size_t c = s * fan; c < std::min(children, (s + 1) * fan); ++c) {
        if (k == 0) b.attach(nodes[c], sw);
        else b.connect(below[c], sw);
      }
      here.push_back(sw);
    }
    below = std::move(here);
  }
}

std::vector<NodeId> add_nodes(ClusterBuilder& b, NodeTypeId type, std::string_view prefix, long count) {
  std::vector<NodeId> ids;
  ids.reserve(static_cast<std::size_t>(count));
  for (long i = 1; i <= count; ++i) ids.push_back(b.add_node(numbered(prefix, i, count), type));
  return ids;
}

Tier ib_tier(std::string name, double oversubscription = 1.0) {
  return Tier{std::move(name), 0, 0.5, oversubscription};
}

// DGX SuperPOD-style cluster: scalable units on rail-optimised leaves (merged into one
// leaf group per SU, as Topograph reports them), spine groups, core.
Result<Cluster> superpod(std::string_view preset, std::string_view gpu, ParamReader& p,
                         long sus_per_spine, double host_memory_gb) {
  long nodes = p.get("nodes", 1, 200000);
  long su = p.get("su_size", 1, 4096);
  long nics = p.get("nics", 1, 8);
  long gbit = p.get("nic_gbit", 1, 3200);
  if (auto s = p.status(); !s) return tl::unexpected(s.error());
  ClusterBuilder b(fmt::format("{}-{}n", preset, nodes));
  NodeType type = hgx_node_type(std::string(preset), gpu, static_cast<int>(nics), static_cast<int>(gbit));
  type.host_memory_gb = host_memory_gb;
  NodeTypeId t = b.add_node_type(std::move(type));
  auto ids = add_nodes(b, t, fmt::format("{}-", preset), nodes);
  add_tree(b, ids, {{ib_tier("leaf"), "leaf-su", su}, {ib_tier("spine"), "spine-", sus_per_spine}, {ib_tier("core"), "core", 0}});
  return std::move(b).build();
}

// System memory per node from NVIDIA's datasheets: DGX A100 640GB and DGX H100 2 TB; an HGX
// H200 server as the DGX H200, 2 TB.
Result<Cluster> build_dgx_a100(ParamReader& p) { return superpod("dgx-a100", "A100-SXM4", p, 8, 2048); }
Result<Cluster> build_dgx_h100(ParamReader& p) { return superpod("dgx-h100", "H100 SXM5", p, 4, 2048); }
Result<Cluster> build_hgx_h200(ParamReader& p) { return superpod("hgx-h200", "H200", p, 4, 2048); }

Result<Cluster> build_gb200(ParamReader& p) {
  long racks = p.get("racks", 1, 10000);
  long trays = p.get("trays", 1, 18);
  long racks_per_su = p.get("racks_per_su", 1, 1000);
  long gbit = p.get("nic_gbit", 1, 3200);
  if (auto s = p.status(); !s) return tl::unexpected(s.error());
  auto product = find_gpu_product("GB200");
  NodeType t;
  t.name = "gb200-tray";
  t.gpu_model = std::string(product->canonical);
  t.gpu_memory_gb = product->memory_gb;
  t.gpu_count = 4;
  t.gpu_links = NodeType::full_nvlink_mesh(4, product->nvlinks_per_gpu);
  t.nvlink_GBps_per_link = product->nvlink_GBps_per_link;
  t.nvswitch = true;
  t.pcie_GBps = pcie_GBps(product->pcie_gen, 16);
  t.gpu_numa = {0, 0, 1, 1};  // two Grace CPUs per tray, two GPUs each
  t.host_memory_gb = 960;     // two Grace CPUs of 480 GB LPDDR5X (NVIDIA GB200 NVL72 datasheet: 17 TB a rack)
  for (int k = 0; k < 4; ++k) {
    Nic nic{fmt::format("mlx5_{}", k), static_cast<double>(gbit), {}, k / 2, true};
    for (int g = 0; g < 4; ++g) nic.gpu_affinity.push_back(g == k ? LinkClass::kPix : g / 2 == k / 2 ? LinkClass::kNode : LinkClass::kSys);
    t.nics.push_back(std::move(nic));
  }
  ClusterBuilder b(fmt::format("gb200-nvl72-{}r", racks));
  NodeTypeId type = b.add_node_type(std::move(t));
  std::vector<NodeId> all;
  int rack_width = std::max(2, static_cast<int>(std::to_string(racks).size()));
  for (long r = 1; r <= racks; ++r) {
    DomainId d = b.add_domain(DomainSpec{fmt::format("nvl72-r{:0{}}", r, rack_width), 0, 0});
    for (long n = 1; n <= trays; ++n) {
      NodeId id = b.add_node(fmt::format("gb200-r{:0{}}-n{:02}", r, rack_width, n), type);
      b.add_to_domain(id, d);
      all.push_back(id);
    }
  }
  add_tree(b, all, {{ib_tier("leaf"), "leaf-su", racks_per_su * trays}, {ib_tier("spine"), "spine", 0}});
  return std::move(b).build();
}

Result<Cluster> build_pcie_l40s(ParamReader& p) {
  long nodes = p.get("nodes", 1, 100000);
  long per_leaf = p.get("nodes_per_leaf", 1, 4096);
  long nics = p.get("nics", 1, 2);
  long gbit = p.get("nic_gbit", 1, 3200);
  if (auto s = p.status(); !s) return tl::unexpected(s.error());
  auto product = find_gpu_product("L40S");
  NodeType t;
  t.name = "l40s-2s";
  t.gpu_model = std::string(product->canonical);
  t.gpu_memory_gb = product->memory_gb;
  t.gpu_count = 8;
  t.pcie_GBps = pcie_GBps(product->pcie_gen, 16);
  // Two sockets, each with two PCIe switches of two GPUs.
  t.gpu_links.resize(64);
  for (int a = 0; a < 8; ++a)
    for (int b2 = 0; b2 < 8; ++b2)
      t.gpu_links[static_cast<std::size_t>(a * 8 + b2)] = {a == b2 ? LinkClass::kSelf
                                                         : a / 2 == b2 / 2 ? LinkClass::kPix
                                                         : a / 4 == b2 / 4 ? LinkClass::kNode
                                                                           : LinkClass::kSys, 0};
  for (int g = 0; g < 8; ++g) t.gpu_numa.push_back(g / 4);
  for (int k = 0; k < nics; ++k) {
    int home = k * 8 / static_cast<int>(nics);
    Nic nic{fmt::format("eth{}", k), static_cast<double>(gbit), {}, home / 4, true};
    for (int g = 0; g < 8; ++g)
      nic.gpu_affinity.push_back(g / 2 == home / 2 ? LinkClass::kPix : g / 4 == home / 4 ? LinkClass::kNode : LinkClass::kSys);
    t.nics.push_back(std::move(nic));
  }
  ClusterBuilder b(fmt::format("pcie-l40s-{}n", nodes));
  NodeTypeId type = b.add_node_type(std::move(t));
  auto ids = add_nodes(b, type, "l40s-", nodes);
  add_tree(b, ids, {{Tier{"tor", 0, 0.6, 1.0}, "tor-", per_leaf}, {Tier{"spine", 0, 0.6, 1.0}, "spine", 0}});
  return std::move(b).build();
}

// Llama 3 training cluster (The Llama 3 Herd of Models, sec. 3.3.1; Meta's RoCE fabric,
// SIGCOMM'24): 8 H100 per server, 2 servers per rack switch, 192 racks per pod (3,072 GPUs,
// full bisection), pods joined by an aggregation layer oversubscribed 1:7.
Result<Cluster> build_llama3(ParamReader& p) {
  long pods = p.get("pods", 1, 64);
  long racks = p.get("racks", 1, 1024);
  long servers = p.get("servers_per_rack", 1, 16);
  long over = p.get("oversubscription", 1, 64);
  if (auto s = p.status(); !s) return tl::unexpected(s.error());
  ClusterBuilder b(fmt::format("llama3-{}p", pods));
  NodeType t = hgx_node_type("grand-teton-h100", "H100 SXM5", 8, 400);
  t.gpu_memory_gb = 80;
  NodeTypeId type = b.add_node_type(std::move(t));
  int tr = b.add_tier(Tier{"rack", 0, 0.6, 1.0});
  int tp = b.add_tier(Tier{"pod", 0, 0.6, static_cast<double>(over)});
  int ta = pods > 1 ? b.add_tier(Tier{"aggregation", 0, 0.6, 1.0}) : -1;
  SwitchId agg = ta >= 0 ? b.add_switch("atsw", ta) : SwitchId();
  for (long pod = 1; pod <= pods; ++pod) {
    SwitchId ctsw = b.add_switch(fmt::format("ctsw-p{}", pod), tp);
    if (agg.valid()) b.connect(ctsw, agg);
    for (long r = 1; r <= racks; ++r) {
      SwitchId rtsw = b.add_switch(fmt::format("rtsw-p{}-r{:03}", pod, r), tr);
      b.connect(rtsw, ctsw);
      for (long s = 1; s <= servers; ++s) {
        NodeId n = b.add_node(fmt::format("p{}-r{:03}-s{}", pod, r, s), type);
        b.attach(n, rtsw);
      }
    }
  }
  return std::move(b).build();
}

Result<Cluster> build_synthetic(ParamReader& p) {
  long nodes = p.get("nodes", 1, 1000000);
  long gpus = p.get("gpus_per_node", 1, 64);
  long links = p.get("nvlinks", 0, 18);
  long gbit = p.get("nic_gbit", 1, 3200);
  std::vector<long> fanout = p.get_list("fanout", 1, 1000000);
  if (auto s = p.status(); !s) return tl::unexpected(s.error());
  NodeType t;
  t.name = "synthetic";
  t.gpu_model = "H100-SXM5";
  t.gpu_memory_gb = 80;
  t.gpu_count = static_cast<int>(gpus);
  if (links > 0) {
    t.gpu_links = NodeType::full_nvlink_mesh(t.gpu_count, static_cast<int>(links));
    t.nvlink_GBps_per_link = 25;
    t.nvswitch = true;
  } else {
    t.gpu_links.assign(static_cast<std::size_t>(gpus * gpus), {LinkClass::kPxb, 0});
    for (int g = 0; g < t.gpu_count; ++g) t.gpu_links[static_cast<std::size_t>(g * gpus + g)] = {LinkClass::kSelf, 0};
  }
  t.pcie_GBps = pcie_GBps(5, 16);
  for (int k = 0; k < t.gpu_count; ++k) {
    Nic nic{fmt::format("mlx5_{}", k), static_cast<double>(gbit), {}, -1, true};
    for (int g = 0; g < t.gpu_count; ++g) nic.gpu_affinity.push_back(g == k ? LinkClass::kPix : LinkClass::kNode);
    t.nics.push_back(std::move(nic));
  }
  ClusterBuilder b(fmt::format("synthetic-{}n", nodes));
  NodeTypeId type = b.add_node_type(std::move(t));
  auto ids = add_nodes(b, type, "node", nodes);
  static const char* kNames[] = {"leaf", "spine", "core", "super"};
  std::vector<TierLevel> levels;
  for (std::size_t k = 0; k < fanout.size(); ++k)
    levels.push_back({ib_tier(k < 4 ? kNames[k] : fmt::format("tier{}", k)), fmt::format("{}-", k < 4 ? kNames[k] : fmt::format("t{}", k)), fanout[k]});
  std::size_t top = fanout.size();
  levels.push_back({ib_tier(top < 4 ? kNames[top] : fmt::format("tier{}", top)), top < 4 ? kNames[top] : fmt::format("t{}", top), 0});
  add_tree(b, ids, levels);
  return std::move(b).build();
}

struct PresetEntry {
  PresetInfo info;
  std::function<Result<Cluster>(ParamReader&)> build;
};

std::vector<PresetEntry> preset_entries() {
  return {
      {{"dgx-a100",
        "NVIDIA DGX SuperPOD (A100): 8x A100-SXM4 on NVSwitch (12 NVLinks/GPU), 8x 200G HDR rails, SUs of 20 nodes",
        {{"nodes", "140", "number of DGX A100 nodes"},
         {"su_size", "20", "nodes per scalable unit (one leaf group)"},
         {"nics", "8", "compute NICs per node"},
         {"nic_gbit", "200", "speed of each compute NIC, Gbit/s"}}},
       build_dgx_a100},
      {{"dgx-h100",
        "NVIDIA DGX SuperPOD (H100): 8x H100-SXM5 on NVSwitch (18 NVLinks/GPU), 8x 400G NDR rails, SUs of 32 nodes",
        {{"nodes", "128", "number of DGX H100 nodes"},
         {"su_size", "32", "nodes per scalable unit (one leaf group)"},
         {"nics", "8", "compute NICs per node"},
         {"nic_gbit", "400", "speed of each compute NIC, Gbit/s"}}},
       build_dgx_h100},
      {{"hgx-h200",
        "HGX H200 servers: 8x H200 141GB on NVSwitch (18 NVLinks/GPU), 8x 400G NDR rails, SUs of 32 nodes",
        {{"nodes", "128", "number of servers"},
         {"su_size", "32", "nodes per scalable unit (one leaf group)"},
         {"nics", "8", "compute NICs per node"},
         {"nic_gbit", "400", "speed of each compute NIC, Gbit/s"}}},
       build_hgx_h200},
      {{"gb200-nvl72",
        "GB200 NVL72 racks: 18 trays x 4 GPUs in one multi-node NVLink domain per rack, 4x 400G InfiniBand per tray",
        {{"racks", "8", "number of NVL72 racks"},
         {"trays", "18", "compute trays per rack"},
         {"racks_per_su", "8", "racks per scalable unit (one leaf group)"},
         {"nic_gbit", "400", "speed of each compute NIC, Gbit/s"}}},
       build_gb200},
      {{"pcie-l40s",
        "PCIe-only servers: 8x L40S on two sockets (no NVLink), Ethernet top-of-rack and spine",
        {{"nodes", "16", "number of servers"},
         {"nodes_per_leaf", "8", "servers per top-of-rack switch"},
         {"nics", "2", "NICs per server"},
         {"nic_gbit", "200", "speed of each NIC, Gbit/s"}}},
       build_pcie_l40s},
      {{"llama3-24k",
        "Meta's Llama 3 training cluster: 8x H100 per server, 2 servers per rack, 192 racks per pod, 8 pods, 1:7 above the pod",
        {{"pods", "8", "number of pods (3,072 GPUs each at the defaults)"},
         {"racks", "192", "racks per pod"},
         {"servers_per_rack", "2", "servers per rack switch"},
         {"oversubscription", "7", "oversubscription between pods and the aggregation layer"}}},
       build_llama3},
      {{"synthetic",
        "Regular synthetic cluster for scale tests: N nodes of G NVLinked GPUs under a tree with given fan-outs",
        {{"nodes", "1024", "number of nodes"},
         {"gpus_per_node", "8", "GPUs per node"},
         {"nvlinks", "18", "NVLinks per GPU pair (0 = PCIe only)"},
         {"nic_gbit", "400", "one NIC per GPU at this speed, Gbit/s"},
         {"fanout", "32,16", "children per switch for each tier, closest first; a root tier joins the rest"}}},
       build_synthetic},
  };
}

const Registry<PresetEntry>& registry() {
  static const Registry<PresetEntry> presets = [] {
    std::vector<Registry<PresetEntry>::Row> rows;
    for (auto& e : preset_entries()) rows.push_back({e.info.name, e.info.description, e});
    return Registry<PresetEntry>("preset", std::move(rows));
  }();
  return presets;
}

}  // namespace

const std::vector<PresetInfo>& preset_catalog() {
  static const std::vector<PresetInfo> infos = [] {
    std::vector<PresetInfo> v;
    for (const auto& row : registry().rows()) v.push_back(row.value.info);
    return v;
  }();
  return infos;
}

Result<Cluster> build_preset(std::string_view spec) {
  std::string_view name = spec.substr(0, spec.find('?'));
  const auto* row = registry().row(name);
  if (!row) {
    // kNotFound, not the registry's kInvalidArgument: an unknown preset exits 1 and is an
    // HTTP 404, as a missing spec file is.
    Error e = registry().unknown(name);
    e.code = ErrorCode::kNotFound;
    return tl::unexpected(std::move(e));
  }
  const PresetEntry* entry = &row->value;
  Params given;
  if (auto q = spec.find('?'); q != std::string_view::npos) {
    std::string_view query = spec.substr(q + 1);
    std::size_t start = 0;
    while (start <= query.size()) {
      std::size_t amp = query.find('&', start);
      if (amp == std::string_view::npos) amp = query.size();
      std::string_view kv = query.substr(start, amp - start);
      std::size_t eq = kv.find('=');
      if (kv.empty() || eq == std::string_view::npos || eq == 0)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("preset '{}': expected key=value in the parameters, found '{}'", name, kv));
      std::string key(kv.substr(0, eq));
      bool known = std::any_of(entry->info.params.begin(), entry->info.params.end(),
                               [&](const PresetParam& p) { return p.name == key; });
      if (!known) {
        std::string keys;
        for (const auto& p : entry->info.params) keys += (keys.empty() ? "" : ", ") + p.name;
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("preset '{}' has no parameter '{}'; its parameters: {}", name, key, keys));
      }
      given[key] = std::string(kv.substr(eq + 1));
      start = amp + 1;
      if (amp == query.size()) break;
    }
  }
  ParamReader reader(entry->info, given);
  return entry->build(reader);
}

}  // namespace toposched
