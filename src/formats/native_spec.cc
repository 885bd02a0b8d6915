#include "formats/native_spec.h"

#include <charconv>
#include <cmath>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/json_output.h"
#include "formats/native_spec_fast.h"
#include "formats/yaml_output.h"
#include "topology/hardware.h"
#include "topology/hostlist.h"
#include "topology/yaml_document.h"
#include "topology/yaml_input.h"

namespace toposched {
namespace {

using Json = nlohmann::ordered_json;


class SpecReader {
 public:
  SpecReader(const std::string& file) : in_(file), builder_("cluster") {}

  Result<Cluster> read(std::string_view text) {
    TOPOSCHED_TRY(root, in_.parse(text));
    return read(root);
  }

  Result<Cluster> read(const YAML::Node& root) {
    TOPOSCHED_CHECK(in_.expect_map(root, "the cluster spec",
                         {"version", "name", "node_types", "nodes", "fabric", "accelerator_domains"}));
    TOPOSCHED_TRY(version, in_.opt_integer(root, "version"));
    if (version && *version != 1)
      return in_.error_at(root["version"], fmt::format("unsupported spec version {}; this toposched reads version 1", *version));
    TOPOSCHED_TRY(name, in_.opt_string(root, "name"));
    builder_ = ClusterBuilder(name ? *name : "cluster");
    if (!root["node_types"]) return in_.error_at(root, "missing required key 'node_types'");
    if (!root["nodes"]) return in_.error_at(root, "missing required key 'nodes'");
    TOPOSCHED_CHECK(read_node_types(root["node_types"]));
    TOPOSCHED_CHECK(read_nodes(root["nodes"]));
    if (root["fabric"]) TOPOSCHED_CHECK(read_fabric(root["fabric"]));
    if (root["accelerator_domains"]) TOPOSCHED_CHECK(read_domains(root["accelerator_domains"]));
    auto cluster = std::move(builder_).build();
    if (!cluster) {
      Error e = cluster.error();
      auto it = marks_.find(builder_.error_subject());
      e.code = ErrorCode::kValidation;
      e.where = it != marks_.end() ? it->second : SourceLocation{in_.file(), 0, 0};
      return tl::unexpected(e);
    }
    return cluster;
  }

  // The fast path (formats/native_spec_fast.h): the head through yaml-cpp and the steps of
  // read(), the two lists from their views. nullopt wherever read() would answer otherwise
  // or refuse (this path keeps no positions: the general path names every error).
  std::optional<Cluster> read_fast(const NativeSpecSections& s) {
    auto parsed = load_yaml_document(s.head, in_.file());
    if (!parsed) return std::nullopt;
    const YAML::Node& root = *parsed;
    if (!in_.expect_map(root, "the cluster spec",
                        {"version", "name", "node_types", "nodes", "fabric", "accelerator_domains"}))
      return std::nullopt;
    auto version = in_.opt_integer(root, "version");
    auto name = in_.opt_string(root, "name");
    if (!version || (*version && **version != 1) || !name || !root["node_types"]) return std::nullopt;
    builder_ = ClusterBuilder(*name ? **name : "cluster");
    if (!read_node_types(root["node_types"]) || !fast_nodes(s.groups)) return std::nullopt;
    const YAML::Node fabric = root["fabric"];
    if ((fabric || s.has_switches) && !fast_fabric(fabric, s.switches)) return std::nullopt;
    if (const YAML::Node domains = root["accelerator_domains"]; domains && !read_domains(domains)) return std::nullopt;
    auto cluster = std::move(builder_).build();
    if (!cluster) return std::nullopt;
    return std::move(*cluster);
  }

 private:
  // `hostlist`'s names, a plain name without expanding it (no vector per name).
  template <class Each>
  static bool each_name(std::string_view hostlist, Each each) {
    if (hostlist.find_first_of("[],") == std::string_view::npos) return each(std::string(hostlist));
    auto names = expand_hostlist(hostlist);
    if (!names) return false;
    for (auto& n : *names)
      if (!each(std::move(n))) return false;
    return true;
  }

  // read_nodes over the fast path's groups.
  bool fast_nodes(const std::vector<NativeNodeGroup>& groups) {
    builder_.reserve_nodes(groups.size());  // at least a node per group
    for (const NativeNodeGroup& g : groups) {
      const auto t = builder_.find_node_type(g.type);
      if (!t) return false;
      const bool ok = each_name(g.names, [&](std::string name) {
        if (builder_.find_node(name)) return false;  // declared twice
        builder_.add_node(std::move(name), *t);
        return true;
      });
      if (!ok) return false;
    }
    return true;
  }

  // read_fabric over the head's fabric (tiers, cross_root; may be undefined) and the fast
  // path's switches.
  bool fast_fabric(const YAML::Node& f, const std::vector<NativeSwitch>& switches) {
    std::unordered_map<std::string, int> tier_index;
    if (f && (!in_.expect_map(f, "'fabric'", {"tiers", "switches", "cross_root"}) || !read_tiers(f, tier_index)))
      return false;
    std::vector<SwitchId> ids;
    for (const NativeSwitch& sw : switches) {
      auto ti = tier_index.find(std::string(sw.tier));
      if (ti == tier_index.end() || builder_.find_switch(sw.name)) return false;
      ids.push_back(builder_.add_switch(std::string(sw.name), ti->second));
    }
    constexpr std::uint32_t kNoSwitch = 0xffffffffu;
    std::vector<std::uint32_t> attached(builder_.node_count(), kNoSwitch);  // per node
    for (std::size_t i = 0; i < switches.size(); ++i) {
      const NativeSwitch& sw = switches[i];
      const SwitchId id = ids[i];
      const bool ok = !sw.has_nodes || each_name(sw.nodes, [&](const std::string& n) {
        const auto node = builder_.find_node(n);
        if (!node) return false;
        std::uint32_t& a = attached[node->index()];
        if (a != kNoSwitch && a != id.value) return false;  // under two switches
        a = id.value;
        builder_.attach(*node, id);
        return true;
      });
      if (!ok) return false;
      for (std::string_view c : sw.children) {
        const auto child = builder_.find_switch(c);
        if (!child) return false;
        builder_.connect(*child, id);
      }
      if (sw.has_parent) {
        const auto parent = builder_.find_switch(sw.parent);
        if (!parent) return false;
        builder_.connect(id, *parent);
      }
    }
    return !f || read_cross_root(f).has_value();
  }

  Result<std::vector<LinkClass>> classes(const YAML::Node& node, std::string_view key, std::size_t count) {
    TOPOSCHED_TRY(words, in_.words(node, key));
    if (words.size() != count)
      return in_.error_at(node, fmt::format("expected {} path classes in '{}' (one per GPU), found {}", count, key, words.size()));
    std::vector<LinkClass> out;
    for (const auto& w : words) {
      auto c = parse_pcie_class(w);
      if (!c || *c == LinkClass::kSelf)
        return in_.error_at(node, fmt::format("expected PIX, PXB, PHB, NODE or SYS in '{}', found '{}'", key, w));
      out.push_back(*c);
    }
    return out;
  }

  // `gpu.power: {busy_w, comm_w, idle_w}`, each optional, watts per GPU, >= 0; a state
  // left out keeps the product's default (0).
  Result<GpuPowerSpec> read_gpu_power(const YAML::Node& power) {
    TOPOSCHED_CHECK(in_.expect_map(power, "'gpu.power'", {"busy_w", "comm_w", "idle_w"}));
    GpuPowerSpec p;
    const std::pair<const char*, double*> fields[] = {{"busy_w", &p.busy_w}, {"comm_w", &p.comm_w}, {"idle_w", &p.idle_w}};
    for (auto [key, out] : fields) {
      TOPOSCHED_TRY(w, in_.opt_number(power, key));
      if (!w) continue;
      if (!(*w >= 0 && *w <= 10000)) return in_.error_at(power[key], fmt::format("expected a power in watts, 0..10000, found {}", *w));
      *out = *w;
    }
    return p;
  }

  // gpu: {memory_gb, count, power} (the model is read first, for the product's defaults).
  Result<void> read_gpu(const YAML::Node& gpu, NodeType& t, const std::optional<GpuProduct>& product) {
    TOPOSCHED_TRY(mem, in_.opt_number(gpu, "memory_gb"));
    // 0 is how the model (and so `export --to native`) says "not known".
    if (mem && !(*mem >= 0 && *mem <= 1e6))
      return in_.error_at(gpu["memory_gb"], fmt::format("expected GPU memory in GB, 0 (not known) to 1e6, found {}", *mem));
    t.gpu_memory_gb = mem ? *mem : product ? product->memory_gb : 0;
    if (!gpu["count"]) return in_.error_at(gpu, "missing required key 'count'");
    TOPOSCHED_TRY(count, in_.integer(gpu["count"], "count"));
    if (count < 0 || count > 64) return in_.error_at(gpu["count"], fmt::format("expected a GPU count in 0..64, found {}", count));
    t.gpu_count = static_cast<int>(count);
    if (const YAML::Node power = gpu["power"]) {
      TOPOSCHED_TRY(p, read_gpu_power(power));
      t.power = p;
    }
    return {};
  }

  // nvlink: {links, GBps_per_link, nvswitch}; returns the full-mesh link count (0: none).
  Result<int> read_nvlink(const YAML::Node& n, NodeType& t, const std::optional<GpuProduct>& product) {
    t.nvlink_GBps_per_link = product ? product->nvlink_GBps_per_link : 0;
    const YAML::Node nv = n["nvlink"];
    if (!nv) return 0;
    TOPOSCHED_CHECK(in_.expect_map(nv, "'nvlink'", {"links", "GBps_per_link", "nvswitch"}));
    TOPOSCHED_TRY(links, in_.opt_integer(nv, "links"));
    TOPOSCHED_TRY(per, in_.opt_number(nv, "GBps_per_link"));
    TOPOSCHED_TRY(sw, in_.opt_boolean(nv, "nvswitch"));
    if (links && (*links < 0 || *links > 255)) return in_.error_at(nv["links"], fmt::format("expected 0..255 NVLinks, found {}", *links));
    if (per && !(*per >= 0)) return in_.error_at(nv["GBps_per_link"], "expected a per-link bandwidth >= 0 (GB/s)");
    const int mesh_links = links ? static_cast<int>(*links) : 0;
    if (per) t.nvlink_GBps_per_link = *per;
    t.nvswitch = sw ? *sw : mesh_links > 0 && !n["links"];
    return mesh_links;
  }

  // links: one row of `topo -m` cells per GPU, else a full mesh of mesh_links NVLinks.
  Result<void> read_gpu_links(const YAML::Node& n, int mesh_links, NodeType& t) {
    const auto nu = static_cast<std::size_t>(t.gpu_count);
    if (const YAML::Node rows = n["links"]) {
      TOPOSCHED_CHECK(in_.expect_sequence(rows, "'links' (one row of topo -m cells per GPU)"));
      if (rows.size() != nu)
        return in_.error_at(rows, fmt::format("node type '{}' has {} GPUs but 'links' has {} rows", t.name, nu, rows.size()));
      t.gpu_links.resize(nu * nu);
      for (std::size_t i = 0; i < nu; ++i) {
        TOPOSCHED_TRY(cells, in_.words(rows[i], "links"));
        if (cells.size() != nu)
          return in_.error_at(rows[i], fmt::format("node type '{}' has {} GPUs but row {} of 'links' has {} cells", t.name, nu, i, cells.size()));
        for (std::size_t j = 0; j < nu; ++j) {
          auto cell = parse_link_cell(cells[j]);
          if (!cell)
            return in_.error_at(rows[i], fmt::format("row {}, column {} of 'links': expected X, NV<count>, PIX, PXB, PHB, NODE or SYS, found '{}'", i, j, cells[j]));
          t.gpu_links[i * nu + j] = *cell;
        }
      }
    } else if (mesh_links > 0) {
      t.gpu_links = NodeType::full_nvlink_mesh(t.gpu_count, mesh_links);
    } else {
      if (nu > 1) return in_.error_at(n, fmt::format("node type '{}' needs 'links' (the GPU matrix) or 'nvlink.links'", t.name));
      t.gpu_links = NodeType::full_nvlink_mesh(t.gpu_count, 0);
      for (auto& l : t.gpu_links) l = GpuLink{LinkClass::kSelf, 0};
    }
    return {};
  }

  // pcie: {gen, lanes, GBps}; the product's generation and x16 by default.
  Result<void> read_pcie(const YAML::Node& n, NodeType& t, const std::optional<GpuProduct>& product) {
    t.pcie_GBps = pcie_GBps(product ? product->pcie_gen : 4, 16);
    const YAML::Node p = n["pcie"];
    if (!p) return {};
    TOPOSCHED_CHECK(in_.expect_map(p, "'pcie'", {"gen", "lanes", "GBps"}));
    TOPOSCHED_TRY(gen, in_.opt_integer(p, "gen"));
    TOPOSCHED_TRY(lanes, in_.opt_integer(p, "lanes"));
    TOPOSCHED_TRY(gbps, in_.opt_number(p, "GBps"));
    if (gen && (*gen < 1 || *gen > 6)) return in_.error_at(p["gen"], fmt::format("expected PCIe generation 1..6, found {}", *gen));
    if (lanes && !(*lanes == 1 || *lanes == 2 || *lanes == 4 || *lanes == 8 || *lanes == 16 || *lanes == 32))
      return in_.error_at(p["lanes"], fmt::format("expected 1, 2, 4, 8, 16 or 32 lanes, found {}", *lanes));
    if (gbps) {
      if (!(*gbps > 0)) return in_.error_at(p["GBps"], "expected a positive bandwidth");
      t.pcie_GBps = *gbps;
    } else {
      t.pcie_GBps = pcie_GBps(gen ? static_cast<int>(*gen) : product ? product->pcie_gen : 4, lanes ? static_cast<int>(*lanes) : 16);
    }
    return {};
  }

  // numa: one NUMA id per GPU; cpu_affinity: one CPU list per GPU.
  Result<void> read_gpu_affinity(const YAML::Node& n, NodeType& t) {
    const auto nu = static_cast<std::size_t>(t.gpu_count);
    if (const YAML::Node numa = n["numa"]) {
      TOPOSCHED_TRY(words, in_.words(numa, "numa"));
      if (words.size() != nu) return in_.error_at(numa, fmt::format("expected {} NUMA ids (one per GPU), found {}", nu, words.size()));
      for (const auto& w : words) {
        if (w == "N/A" || w == "-1") { t.gpu_numa.push_back(-1); continue; }
        int v = 0;
        auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
        if (ec != std::errc() || ptr != w.data() + w.size() || v < 0)
          return in_.error_at(numa, fmt::format("expected a NUMA id, found '{}'", w));
        t.gpu_numa.push_back(v);
      }
    }
    if (const YAML::Node cpu = n["cpu_affinity"]) {
      TOPOSCHED_CHECK(in_.expect_sequence(cpu, "'cpu_affinity' (one CPU list per GPU)"));
      if (cpu.size() != nu) return in_.error_at(cpu, fmt::format("expected {} CPU lists (one per GPU), found {}", nu, cpu.size()));
      for (const auto& c : cpu) {
        TOPOSCHED_TRY(s, in_.string(c, "cpu_affinity"));
        t.gpu_cpu_affinity.push_back(s);
      }
    }
    return {};
  }

  // A NIC: {name, gbit, affinity (one path class per GPU), numa, compute}.
  Result<Nic> read_nic(const YAML::Node& nn, std::size_t gpus) {
    TOPOSCHED_CHECK(in_.expect_map(nn, "a NIC", {"name", "gbit", "affinity", "numa", "compute"}));
    Nic nic;
    TOPOSCHED_TRY(nic_name, in_.req_string(nn, "name"));
    nic.name = nic_name;
    if (!nn["gbit"]) return in_.error_at(nn, fmt::format("NIC '{}': missing required key 'gbit'", nic_name));
    TOPOSCHED_TRY(gbit, in_.number(nn["gbit"], "gbit"));
    if (!(gbit > 0)) return in_.error_at(nn["gbit"], fmt::format("NIC '{}': expected a positive speed in Gbit/s", nic_name));
    nic.gbit = gbit;
    if (!nn["affinity"]) return in_.error_at(nn, fmt::format("NIC '{}': missing required key 'affinity' (one path class per GPU)", nic_name));
    TOPOSCHED_TRY(aff, classes(nn["affinity"], "affinity", gpus));
    nic.gpu_affinity = aff;
    TOPOSCHED_TRY(numa, in_.opt_integer(nn, "numa"));
    nic.numa_node = numa ? static_cast<int>(*numa) : -1;
    TOPOSCHED_TRY(compute, in_.opt_boolean(nn, "compute"));
    nic.compute = compute ? *compute : true;
    return nic;
  }

  Result<void> read_node_type(const YAML::Node& n) {
    TOPOSCHED_CHECK(in_.expect_map(n, "a node type", {"name", "gpu", "nvlink", "links", "pcie", "host_memory_gb", "numa", "cpu_affinity", "nics"}));
    NodeType t;
    TOPOSCHED_TRY(name, in_.req_string(n, "name"));
    t.name = name;
    marks_[name] = in_.where(n["name"]);
    if (!n["gpu"]) return in_.error_at(n, fmt::format("node type '{}': missing required key 'gpu'", name));
    TOPOSCHED_CHECK(in_.expect_map(n["gpu"], "'gpu'", {"model", "memory_gb", "count", "power"}));
    TOPOSCHED_TRY(model, in_.req_string(n["gpu"], "model"));
    t.gpu_model = model;
    const std::optional<GpuProduct> product = find_gpu_product(model);
    TOPOSCHED_CHECK(read_gpu(n["gpu"], t, product));
    TOPOSCHED_TRY(mesh_links, read_nvlink(n, t, product));
    TOPOSCHED_CHECK(read_gpu_links(n, mesh_links, t));
    TOPOSCHED_CHECK(read_pcie(n, t, product));
    TOPOSCHED_TRY(host_memory, in_.opt_number(n, "host_memory_gb"));
    if (host_memory && !(*host_memory > 0 && *host_memory <= 1e6))
      return in_.error_at(n["host_memory_gb"], fmt::format("expected the node's system memory in GB, above 0 and at most 1e6, found {}", *host_memory));
    t.host_memory_gb = host_memory.value_or(0);
    TOPOSCHED_CHECK(read_gpu_affinity(n, t));
    if (const YAML::Node nics = n["nics"]) {
      TOPOSCHED_CHECK(in_.expect_sequence(nics, "'nics'"));
      for (const auto& nn : nics) {
        TOPOSCHED_TRY(nic, read_nic(nn, static_cast<std::size_t>(t.gpu_count)));
        t.nics.push_back(std::move(nic));
      }
    }
    if (builder_.find_node_type(name)) return in_.error_at(n["name"], fmt::format("node type '{}' is declared twice", name));
    builder_.add_node_type(std::move(t));
    return {};
  }

  Result<void> read_node_types(const YAML::Node& list) {
    TOPOSCHED_CHECK(in_.expect_sequence(list, "'node_types'"));
    for (const auto& n : list) TOPOSCHED_CHECK(read_node_type(n));
    return {};
  }

  Result<std::vector<std::string>> hostlist(const YAML::Node& node, std::string_view key) {
    TOPOSCHED_TRY(expr, in_.string(node, key));
    auto names = expand_hostlist(expr);
    if (!names) {
      SourceLocation w = in_.where(node);
      int col = names.error().where.column;
      // Point inside the scalar when it is written on one line without quotes.
      if (w.line > 0 && col > 0) w.column += col - (node.Tag() == "!" ? 0 : 1);  // "!": quoted
      return make_error(ErrorCode::kParse, fmt::format("in hostlist '{}': {}", expr, names.error().message), w);
    }
    return names;
  }

  Result<std::vector<NodeId>> node_refs(const YAML::Node& node, std::string_view key) {
    TOPOSCHED_TRY(names, hostlist(node, key));
    std::vector<NodeId> ids;
    for (const auto& n : names) {
      auto id = builder_.find_node(n);
      if (!id) return in_.error_at(node, fmt::format("'{}' names node '{}', which is not declared under 'nodes'", key, n));
      ids.push_back(*id);
    }
    return ids;
  }

  Result<void> read_nodes(const YAML::Node& list) {
    TOPOSCHED_CHECK(in_.expect_sequence(list, "'nodes'"));
    for (const auto& n : list) {
      TOPOSCHED_CHECK(in_.expect_map(n, "a node group", {"names", "type"}));
      if (!n["names"]) return in_.error_at(n, "missing required key 'names' (a hostlist)");
      TOPOSCHED_TRY(type, in_.req_string(n, "type"));
      auto t = builder_.find_node_type(type);
      if (!t) return in_.error_at(n["type"], fmt::format("unknown node type '{}'", type));
      TOPOSCHED_TRY(names, hostlist(n["names"], "names"));
      for (auto& name : names) {
        if (builder_.find_node(name)) return in_.error_at(n["names"], fmt::format("node '{}' is declared twice", name));
        marks_[name] = in_.where(n["names"]);
        builder_.add_node(std::move(name), *t);
      }
    }
    return {};
  }

  Result<void> read_fabric(const YAML::Node& f) {
    TOPOSCHED_CHECK(in_.expect_map(f, "'fabric'", {"tiers", "switches", "cross_root"}));
    std::unordered_map<std::string, int> tier_index;
    TOPOSCHED_CHECK(read_tiers(f, tier_index));
    struct Pending {
      YAML::Node node;
      SwitchId id;
    };
    std::vector<Pending> pending;
    if (const YAML::Node switches = f["switches"]) {
      TOPOSCHED_CHECK(in_.expect_sequence(switches, "'fabric.switches'"));
      for (const auto& s : switches) {
        TOPOSCHED_CHECK(in_.expect_map(s, "a switch", {"name", "tier", "nodes", "switches", "parent"}));
        TOPOSCHED_TRY(name, in_.req_string(s, "name"));
        TOPOSCHED_TRY(tier, in_.req_string(s, "tier"));
        auto ti = tier_index.find(tier);
        if (ti == tier_index.end()) return in_.error_at(s["tier"], fmt::format("switch '{}': unknown tier '{}'", name, tier));
        if (builder_.find_switch(name)) return in_.error_at(s["name"], fmt::format("switch '{}' is declared twice", name));
        marks_[name] = in_.where(s["name"]);
        pending.push_back({s, builder_.add_switch(name, ti->second)});
      }
    }
    for (const auto& p : pending) {
      const YAML::Node& s = p.node;
      if (const YAML::Node nodes = s["nodes"]) {
        TOPOSCHED_TRY(ids, node_refs(nodes, "nodes"));
        for (NodeId id : ids) {
          if (auto prev = attached_.find(id.value); prev != attached_.end() && prev->second != p.id.value)
            return in_.error_at(nodes, fmt::format("node '{}' is under two switches ('{}' and '{}')", node_name(id),
                                                   switch_name(SwitchId(prev->second)), switch_name(p.id)));
          attached_[id.value] = p.id.value;
          builder_.attach(id, p.id);
        }
      }
      if (const YAML::Node children = s["switches"]) {
        TOPOSCHED_TRY(names, in_.words(children, "switches"));
        for (const auto& c : names) {
          auto child = builder_.find_switch(c);
          if (!child) return in_.error_at(children, fmt::format("switch '{}' lists unknown switch '{}'", switch_name(p.id), c));
          builder_.connect(*child, p.id);
        }
      }
      if (const YAML::Node parent = s["parent"]) {
        TOPOSCHED_TRY(pname, in_.string(parent, "parent"));
        auto par = builder_.find_switch(pname);
        if (!par) return in_.error_at(parent, fmt::format("switch '{}' has unknown parent '{}'", switch_name(p.id), pname));
        builder_.connect(p.id, *par);
      }
    }
    return read_cross_root(f);
  }

  // fabric.tiers, in order (read_fabric's first step).
  Result<void> read_tiers(const YAML::Node& f, std::unordered_map<std::string, int>& tier_index) {
    if (const YAML::Node tiers = f["tiers"]) {
      TOPOSCHED_CHECK(in_.expect_sequence(tiers, "'fabric.tiers'"));
      for (const auto& t : tiers) {
        TOPOSCHED_CHECK(in_.expect_map(t, "a tier", {"name", "bandwidth_GBps_per_node", "hop_latency_us", "oversubscription"}));
        Tier tier;
        TOPOSCHED_TRY(name, in_.req_string(t, "name"));
        tier.name = name;
        TOPOSCHED_TRY(bw, in_.opt_number(t, "bandwidth_GBps_per_node"));
        TOPOSCHED_TRY(lat, in_.opt_number(t, "hop_latency_us"));
        TOPOSCHED_TRY(over, in_.opt_number(t, "oversubscription"));
        if (bw) tier.bandwidth_GBps_per_node = *bw;
        tier.hop_latency_us = lat ? *lat : kDefaultHopLatencyUs;
        if (over) tier.oversubscription = *over;
        if (tier_index.contains(name)) return in_.error_at(t["name"], fmt::format("tier '{}' is declared twice", name));
        marks_[name] = in_.where(t["name"]);
        tier_index[name] = builder_.add_tier(tier);
      }
    }
    return {};
  }

  // fabric.cross_root (read_fabric's last step).
  Result<void> read_cross_root(const YAML::Node& f) {
    if (const YAML::Node cr = f["cross_root"]) {
      TOPOSCHED_CHECK(in_.expect_map(cr, "'fabric.cross_root'", {"bandwidth_GBps", "latency_us"}));
      TOPOSCHED_TRY(bw, in_.opt_number(cr, "bandwidth_GBps"));
      TOPOSCHED_TRY(lat, in_.opt_number(cr, "latency_us"));
      builder_.set_cross_root(bw ? *bw : 0, lat ? *lat : 0);
    }
    return {};
  }

  Result<void> read_domains(const YAML::Node& list) {
    TOPOSCHED_CHECK(in_.expect_sequence(list, "'accelerator_domains'"));
    for (const auto& d : list) {
      TOPOSCHED_CHECK(in_.expect_map(d, "an accelerator domain", {"name", "nodes", "bandwidth_GBps", "latency_us", "sub_domains"}));
      DomainSpec spec;
      TOPOSCHED_TRY(name, in_.req_string(d, "name"));
      spec.name = name;
      TOPOSCHED_TRY(bw, in_.opt_number(d, "bandwidth_GBps"));
      TOPOSCHED_TRY(lat, in_.opt_number(d, "latency_us"));
      if (bw) spec.bandwidth_GBps = *bw;
      if (lat) spec.latency_us = *lat;
      if (builder_.find_domain(name)) return in_.error_at(d["name"], fmt::format("accelerator domain '{}' is declared twice", name));
      marks_[name] = in_.where(d["name"]);
      if (!d["nodes"]) return in_.error_at(d, fmt::format("domain '{}': missing required key 'nodes'", name));
      TOPOSCHED_TRY(ids, node_refs(d["nodes"], "nodes"));
      DomainId id = builder_.add_domain(spec);
      for (NodeId n : ids) {
        if (auto prev = in_domain_.find(n.value); prev != in_domain_.end() && prev->second != id.value)
          return in_.error_at(d["nodes"], fmt::format("node '{}' is in two accelerator domains", node_name(n)));
        in_domain_[n.value] = id.value;
        builder_.add_to_domain(n, id);
      }
      if (const YAML::Node subs = d["sub_domains"]) {
        TOPOSCHED_CHECK(in_.expect_sequence(subs, "'sub_domains'"));
        for (const auto& s : subs) {
          TOPOSCHED_CHECK(in_.expect_map(s, "a sub-domain", {"name", "nodes"}));
          TOPOSCHED_TRY(sname, in_.req_string(s, "name"));
          if (!s["nodes"]) return in_.error_at(s, "missing required key 'nodes'");
          TOPOSCHED_TRY(sids, node_refs(s["nodes"], "nodes"));
          for (NodeId n : sids) {
            if (in_domain_[n.value] != id.value)
              return in_.error_at(s["nodes"], fmt::format("sub-domain '{}' names node '{}', which is not in domain '{}'", sname, node_name(n), name));
            builder_.add_to_domain(n, id, sname);
          }
        }
      }
    }
    return {};
  }

  // Names are only needed for error messages: a linear search is fine there.
  std::string node_name(NodeId id) const {
    for (const auto& [name, loc] : marks_) {
      auto n = builder_.find_node(name);
      if (n && *n == id) return name;
    }
    return fmt::format("#{}", id.value);
  }
  std::string switch_name(SwitchId id) const {
    for (const auto& [name, loc] : marks_) {
      auto s = builder_.find_switch(name);
      if (s && *s == id) return name;
    }
    return fmt::format("#{}", id.value);
  }

  YamlInput in_;
  ClusterBuilder builder_;
  std::unordered_map<std::string, SourceLocation> marks_;
  std::unordered_map<std::uint32_t, std::uint32_t> attached_;
  std::unordered_map<std::uint32_t, std::uint32_t> in_domain_;
};


bool is_full_mesh(const NodeType& t, int& links) {
  if (t.gpu_count < 2) return false;
  links = t.link(0, 1).nvlinks;
  return links > 0 && t.gpu_links == NodeType::full_nvlink_mesh(t.gpu_count, links);
}

std::string classes_text(const std::vector<LinkClass>& v) {
  std::string s;
  for (LinkClass c : v) s += (s.empty() ? "" : " ") + std::string(link_class_token(c));
  return s;
}

Json gpu_json(const NodeType& t) {
  Json gpu = {{"model", t.gpu_model}, {"memory_gb", t.gpu_memory_gb}, {"count", t.gpu_count}};
  if (t.power != GpuPowerSpec{}) {
    Json p = Json::object();
    if (t.power.busy_w > 0) p["busy_w"] = t.power.busy_w;
    if (t.power.comm_w > 0) p["comm_w"] = t.power.comm_w;
    if (t.power.idle_w > 0) p["idle_w"] = t.power.idle_w;
    gpu["power"] = p;
  }
  return gpu;
}

// nvlink, and links (the GPU matrix) unless the GPUs form a full NVLink mesh.
void gpu_links_json(const NodeType& t, Json& jt) {
  int links = 0;
  bool mesh = is_full_mesh(t, links);
  Json nv;
  if (mesh) nv["links"] = links;
  // Always written, 0 included: a PCIe-only node of a product that has NVLink elsewhere
  // (the reader would otherwise default to the product's per-link speed).
  nv["GBps_per_link"] = t.nvlink_GBps_per_link;
  nv["nvswitch"] = t.nvswitch;
  jt["nvlink"] = nv;
  if (!mesh && t.gpu_count > 1) {
    Json rows = Json::array();
    for (int a = 0; a < t.gpu_count; ++a) {
      std::string row;
      for (int b = 0; b < t.gpu_count; ++b) row += (b ? " " : "") + link_cell_token(t.link(a, b));
      rows.push_back(row);
    }
    jt["links"] = rows;
  }
}

Json nic_json(const Nic& n) {
  Json jn;
  jn["name"] = n.name;
  jn["gbit"] = n.gbit;
  jn["affinity"] = classes_text(n.gpu_affinity);
  if (n.numa_node >= 0) jn["numa"] = n.numa_node;
  if (!n.compute) jn["compute"] = false;
  return jn;
}

Json node_type_json(const NodeType& t) {
  Json jt;
  jt["name"] = t.name;
  jt["gpu"] = gpu_json(t);
  gpu_links_json(t, jt);
  jt["pcie"] = {{"GBps", t.pcie_GBps}};
  if (t.host_memory_gb > 0) jt["host_memory_gb"] = t.host_memory_gb;
  if (!t.gpu_numa.empty()) jt["numa"] = t.gpu_numa;
  if (!t.gpu_cpu_affinity.empty()) jt["cpu_affinity"] = t.gpu_cpu_affinity;
  if (!t.nics.empty()) {
    Json nics = Json::array();
    for (const Nic& n : t.nics) nics.push_back(nic_json(n));
    jt["nics"] = nics;
  }
  return jt;
}

// Consecutive nodes of one type become one hostlist entry.
Json nodes_json(const Cluster& c) {
  Json nodes = Json::array();
  for (std::size_t i = 0; i < c.node_count();) {
    NodeTypeId t = c.node_type_id(NodeId(static_cast<std::uint32_t>(i)));
    std::vector<std::string> run;
    std::size_t j = i;
    for (; j < c.node_count() && c.node_type_id(NodeId(static_cast<std::uint32_t>(j))) == t; ++j)
      run.push_back(c.node_name(NodeId(static_cast<std::uint32_t>(j))));
    nodes.push_back({{"names", compress_hostlist(run)}, {"type", c.node_type_at(t).name}});
    i = j;
  }
  return nodes;
}

Json switch_json(const Cluster& c, SwitchId id) {
  Json js;
  js["name"] = c.switch_name(id);
  js["tier"] = c.tiers()[static_cast<std::size_t>(c.switch_tier(id))].name;
  if (c.switch_parent(id).valid()) js["parent"] = c.switch_name(c.switch_parent(id));
  if (!c.switch_nodes(id).empty()) {
    std::vector<std::string> names;
    for (NodeId n : c.switch_nodes(id)) names.push_back(c.node_name(n));
    js["nodes"] = compress_hostlist(names);
  }
  return js;
}

Json fabric_json(const Cluster& c) {
  Json fabric;
  Json tiers = Json::array();
  for (const Tier& t : c.tiers()) {
    Json jt;
    jt["name"] = t.name;
    if (t.bandwidth_GBps_per_node > 0) jt["bandwidth_GBps_per_node"] = t.bandwidth_GBps_per_node;
    jt["hop_latency_us"] = t.hop_latency_us;
    jt["oversubscription"] = t.oversubscription;
    tiers.push_back(jt);
  }
  fabric["tiers"] = tiers;
  Json switches = Json::array();
  for (std::uint32_t s = 0; s < c.switch_count(); ++s) switches.push_back(switch_json(c, SwitchId(s)));
  fabric["switches"] = switches;
  if (c.cross_root_bandwidth_GBps() > 0 || c.cross_root_latency_us() > 0)
    fabric["cross_root"] = {{"bandwidth_GBps", c.cross_root_bandwidth_GBps()}, {"latency_us", c.cross_root_latency_us()}};
  return fabric;
}

Json domain_json(const Cluster& c, DomainId id) {
  Json jd;
  jd["name"] = c.domain(id).name;
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::string>> subs;
  for (NodeId n : c.domain_nodes(id)) {
    names.push_back(c.node_name(n));
    if (!c.node_sub_domain(n).empty()) subs[c.node_sub_domain(n)].push_back(c.node_name(n));
  }
  jd["nodes"] = compress_hostlist(names);
  jd["bandwidth_GBps"] = c.domain(id).bandwidth_GBps;
  jd["latency_us"] = c.domain(id).latency_us;
  if (!subs.empty()) {
    Json js = Json::array();
    for (const auto& [name, members] : subs) js.push_back({{"name", name}, {"nodes", compress_hostlist(members)}});
    jd["sub_domains"] = js;
  }
  return jd;
}

Json to_json(const Cluster& c) {
  Json root;
  root["version"] = 1;
  root["name"] = c.name();
  Json types = Json::array();
  for (std::uint32_t i = 0; i < c.node_type_count(); ++i) types.push_back(node_type_json(c.node_type_at(NodeTypeId(i))));
  root["node_types"] = types;
  root["nodes"] = nodes_json(c);
  if (!c.tiers().empty() || c.switch_count() > 0) root["fabric"] = fabric_json(c);
  if (c.domain_count() > 0) {
    Json domains = Json::array();
    for (std::uint32_t d = 0; d < c.domain_count(); ++d) domains.push_back(domain_json(c, DomainId(d)));
    root["accelerator_domains"] = domains;
  }
  return root;
}


}  // namespace

namespace {
template <class Input>
Result<Cluster> read_spec(const Input& input, const std::string& file) {
  try {
    SpecReader reader(file);
    return reader.read(input);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}
}  // namespace

Result<Cluster> read_native_spec(std::string_view text, const std::string& file) { return read_spec(text, file); }

std::optional<Cluster> read_native_spec_fast(std::string_view text, const std::string& file) {
  auto sections = split_native_spec(text);
  if (!sections) return std::nullopt;
  try {
    SpecReader reader(file);
    return reader.read_fast(*sections);
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

Result<Cluster> read_native_spec(const YAML::Node& root, const std::string& file) { return read_spec(root, file); }

Result<std::string> write_native_json(const Cluster& cluster) {
  TOPOSCHED_TRY(text, dump_json(to_json(cluster), 2));
  return text + "\n";
}

Result<std::string> write_native_json_identity(const Cluster& cluster) {
  Json spec = to_json(cluster);
  // What does not decide where jobs run, added after stores began to bind to this text.
  for (Json& type : spec["node_types"]) type.erase("host_memory_gb");
  TOPOSCHED_TRY(text, dump_json(spec, 2));
  return text + "\n";
}

std::string write_native_yaml(const Cluster& cluster) {
  return "# toposched cluster spec (docs/cluster-spec.md)\n" + json_to_yaml(to_json(cluster), YamlStyle::kCompact);
}

bool looks_like_native_spec(const YAML::Node& root) {
  return root.IsMap() && (root["node_types"] || root["nodes"]);
}

bool looks_like_native_spec(std::string_view text) {
  try {
    return looks_like_native_spec(YAML::Load(std::string(text)));
  } catch (const YAML::Exception&) {
    return false;
  }
}

}  // namespace toposched
