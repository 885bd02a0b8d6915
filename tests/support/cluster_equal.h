// Test helper: structural comparison of two Clusters (names, node types, fabric, domains),
// reporting the first difference. Header-only; pure functions.
#pragma once

#include <string>

#include "topology/cluster.h"

namespace toposched::testing {

// Empty when equal; otherwise a description of the first difference.
inline std::string cluster_difference(const Cluster& a, const Cluster& b) {
  if (a.name() != b.name()) return "name " + a.name() + " vs " + b.name();
  if (a.node_count() != b.node_count()) return "node count";
  if (a.gpu_count() != b.gpu_count()) return "gpu count";
  if (a.node_type_count() != b.node_type_count()) return "node type count";
  for (std::uint32_t t = 0; t < a.node_type_count(); ++t)
    if (!(a.node_type_at(NodeTypeId(t)) == b.node_type_at(NodeTypeId(t)))) return "node type " + a.node_type_at(NodeTypeId(t)).name;
  for (std::uint32_t n = 0; n < a.node_count(); ++n) {
    NodeId id(n);
    if (a.node_name(id) != b.node_name(id)) return "node name " + a.node_name(id);
    if (a.node_type_id(id) != b.node_type_id(id)) return "type of node " + a.node_name(id);
    SwitchId sa = a.node_switch(id), sb = b.node_switch(id);
    if (sa.valid() != sb.valid() || (sa.valid() && a.switch_name(sa) != b.switch_name(sb))) return "switch of node " + a.node_name(id);
    DomainId da = a.node_domain(id), db = b.node_domain(id);
    if (da.valid() != db.valid() || (da.valid() && a.domain(da).name != b.domain(db).name)) return "domain of node " + a.node_name(id);
    if (a.node_sub_domain(id) != b.node_sub_domain(id)) return "sub-domain of node " + a.node_name(id);
  }
  if (a.tiers() != b.tiers()) return "tiers";
  if (a.switch_count() != b.switch_count()) return "switch count";
  for (std::uint32_t s = 0; s < a.switch_count(); ++s) {
    SwitchId id(s);
    auto other = b.find_switch(a.switch_name(id));
    if (!other) return "switch " + a.switch_name(id) + " missing";
    if (a.switch_tier(id) != b.switch_tier(*other)) return "tier of switch " + a.switch_name(id);
    SwitchId pa = a.switch_parent(id), pb = b.switch_parent(*other);
    if (pa.valid() != pb.valid() || (pa.valid() && a.switch_name(pa) != b.switch_name(pb))) return "parent of switch " + a.switch_name(id);
  }
  if (a.domain_count() != b.domain_count()) return "domain count";
  for (std::uint32_t d = 0; d < a.domain_count(); ++d) {
    const DomainSpec& x = a.domain(DomainId(d));
    auto other = b.find_domain(x.name);
    if (!other) return "domain " + x.name + " missing";
    const DomainSpec& y = b.domain(*other);
    if (x.bandwidth_GBps != y.bandwidth_GBps || x.latency_us != y.latency_us) return "domain " + x.name + " link";
  }
  if (a.cross_root_bandwidth_GBps() != b.cross_root_bandwidth_GBps() || a.cross_root_latency_us() != b.cross_root_latency_us())
    return "cross-root";
  return "";
}

}  // namespace toposched::testing
