#include "formats/cluster_summary.h"

#include <cmath>
#include <string>
#include <vector>

#include "topology/hostlist.h"

namespace toposched {

nlohmann::ordered_json cluster_summary_json(const Cluster& c) {
  using Json = nlohmann::ordered_json;
  Json out;
  out["name"] = c.name();
  out["nodes"] = c.node_count();
  out["gpus"] = c.gpu_count();
  out["hostlist"] = c.hostlist();
  Json tiers = Json::array();
  for (const auto& t : c.tiers()) tiers.push_back(t.name);
  out["tiers"] = tiers;
  Json domains = Json::array();
  for (std::uint32_t d = 0; d < c.domain_count(); ++d) {
    std::vector<std::string> names;
    std::size_t gpus = 0;
    for (NodeId n : c.domain_nodes(DomainId(d))) {
      names.push_back(c.node_name(n));
      gpus += static_cast<std::size_t>(c.node_gpu_count(n));
    }
    domains.push_back({{"name", c.domain(DomainId(d)).name}, {"nodes", compress_hostlist(names)}, {"gpus", gpus},
                       {"bandwidth_GBps", c.domain(DomainId(d)).bandwidth_GBps}});
  }
  out["accelerator_domains"] = domains;
  Json types = Json::array();
  std::vector<std::size_t> per_type(c.node_type_count(), 0);
  for (std::uint32_t n = 0; n < c.node_count(); ++n) ++per_type[c.node_type_id(NodeId(n)).index()];
  for (std::uint32_t t = 0; t < c.node_type_count(); ++t) {
    const NodeType& nt = c.node_type_at(NodeTypeId(t));
    Json type = {{"name", nt.name}, {"nodes", per_type[t]}, {"gpu_model", nt.gpu_model},
                 {"gpus_per_node", nt.gpu_count}, {"gpu_memory_gb", nt.gpu_memory_gb},
                 {"nvswitch", nt.nvswitch}, {"nics", nt.nics.size()}};
    if (nt.host_memory_gb > 0) type["host_memory_gb"] = nt.host_memory_gb;  // as the spec: only when known
    types.push_back(std::move(type));
  }
  out["node_types"] = types;
  Json switches = Json::array();
  for (std::size_t k = 0; k < c.tiers().size(); ++k) {
    std::size_t count = 0;
    for (std::uint32_t s = 0; s < c.switch_count(); ++s) count += static_cast<std::size_t>(c.switch_tier(SwitchId(s))) == k;
    switches.push_back({{"tier", c.tiers()[k].name}, {"switches", count}, {"oversubscription", c.tiers()[k].oversubscription}});
  }
  out["fabric"] = switches;
  std::size_t no_topology = 0;
  for (std::uint32_t n = 0; n < c.node_count(); ++n) no_topology += !c.node_switch(NodeId(n)).valid();
  out["nodes_without_switch"] = no_topology;
  return out;
}

nlohmann::ordered_json path_json(const Cluster& c, GpuId a, GpuId b, std::string_view a_name, std::string_view b_name) {
  Path p = c.path(a, b);
  nlohmann::ordered_json out;
  out["level"] = c.level_name(p);
  out["bandwidth_GBps"] = std::isfinite(p.bandwidth_GBps) ? nlohmann::ordered_json(p.bandwidth_GBps) : nlohmann::ordered_json(nullptr);
  out["latency_us"] = p.latency_us;
  out["from"] = a_name;
  out["to"] = b_name;
  return out;
}

}  // namespace toposched
