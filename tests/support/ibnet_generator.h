// Test helper: writes a synthetic `ibnetdiscover` dump in the real tool's format (switch and
// CA records, port lines with GUIDs, descriptions, LIDs and link widths, SHARP aggregation
// nodes on every switch) for a rail-optimised fat tree: scalable units (SUs) of nodes, one
// leaf per rail per SU, pods of SUs under their own spines, and core switches above all
// spines. Node i of SU s is "gpu-su<s>-n<i>"; its HCA on rail r is "mlx5_<r>".
// Header-only so both tests and benchmarks can use it. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace toposched {

struct IbnetGeneratorSpec {
  int scalable_units = 2;
  int nodes_per_su = 4;
  int rails = 2;
  int sus_per_pod = 2;  // SUs that share a set of spines
  int spines = 2;       // per pod
  int cores = 0;        // above all spines; 0 = two tiers only
};

inline std::string generate_ibnetdiscover(const IbnetGeneratorSpec& s) {
  const int pods = (s.scalable_units + s.sus_per_pod - 1) / s.sus_per_pod;
  auto guid = [](std::uint64_t kind, std::uint64_t i) { return fmt::format("{:016x}", (kind << 40) | i); };
  struct Sw {
    std::string name, guid;
    int lid;
  };
  std::vector<Sw> leaves, spines, cores;
  int lid = 1;
  for (int su = 0; su < s.scalable_units; ++su)
    for (int r = 0; r < s.rails; ++r)
      leaves.push_back({fmt::format("SU{}-LEAF-R{}", su + 1, r), guid(0x2c5eab, leaves.size()), lid++});
  for (int p = 0; p < pods; ++p)
    for (int k = 0; k < s.spines; ++k)
      spines.push_back({fmt::format("POD{}-SPINE-{:02}", p + 1, k + 1), guid(0x2c5eac, spines.size()), lid++});
  for (int k = 0; k < s.cores; ++k)
    cores.push_back({fmt::format("CORE-{:02}", k + 1), guid(0x2c5ead, cores.size()), lid++});
  auto ca_guid = [&](int su, int n, int r) {
    return guid(0x2c5231, (static_cast<std::uint64_t>(su) * 4096 + static_cast<std::uint64_t>(n)) * 64 +
                              static_cast<std::uint64_t>(r));
  };
  auto host = [](int su, int n) { return fmt::format("gpu-su{:03}-n{:02}", su + 1, n + 1); };
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 "#\n# Topology file: generated on Sun Nov 29 12:00:00 2026\n#\n# Initiated from node {} port {}\n\n",
                 ca_guid(0, 0, 0), ca_guid(0, 0, 0));
  std::uint64_t agg = 0;
  auto switch_header = [&](const Sw& w, int ports) {
    fmt::format_to(it, "vendid=0x2c9\ndevid=0xd2f2\nsysimgguid=0x{0}\nswitchguid=0x{0}({0})\n", w.guid);
    fmt::format_to(it, "Switch\t{} \"S-{}\"\t\t# \"MF0;{}:MQM9701/U1\" enhanced port 0 lid {} lmc 0\n", ports, w.guid,
                   w.name, w.lid);
  };
  auto port_to_switch = [&](int port, const Sw& peer, int peer_port) {
    fmt::format_to(it, "[{}]\t\"S-{}\"[{}]\t\t# \"MF0;{}:MQM9701/U1\" lid {} 4xNDR\n", port, peer.guid, peer_port,
                   peer.name, peer.lid);
  };
  auto aggregation = [&]() {
    std::string g = guid(0x2c5232, agg++);
    fmt::format_to(it, "[65]\t\"H-{0}\"[1]({0}) \t\t# \"Mellanox Technologies Aggregation Node\" lid {1} 4xNDR\n\n", g,
                   10000 + agg);
  };
  // Cores: one port per spine.
  for (const Sw& c : cores) {
    switch_header(c, 65);
    for (std::size_t k = 0; k < spines.size(); ++k) port_to_switch(static_cast<int>(k) + 1, spines[k], s.spines + 1);
    aggregation();
  }
  // Spines: the leaves of their pod, then the cores.
  for (std::size_t k = 0; k < spines.size(); ++k) {
    const int pod = static_cast<int>(k) / s.spines;
    switch_header(spines[k], 65);
    int port = 1;
    for (int su = pod * s.sus_per_pod; su < std::min(s.scalable_units, (pod + 1) * s.sus_per_pod); ++su)
      for (int r = 0; r < s.rails; ++r)
        port_to_switch(port++, leaves[static_cast<std::size_t>(su * s.rails + r)],
                       s.nodes_per_su + 1 + static_cast<int>(k) % s.spines);
    for (const Sw& c : cores) port_to_switch(port++, c, static_cast<int>(k) + 1);
    aggregation();
  }
  // Leaves: their nodes' HCAs, then the pod's spines.
  for (int su = 0; su < s.scalable_units; ++su)
    for (int r = 0; r < s.rails; ++r) {
      const Sw& l = leaves[static_cast<std::size_t>(su * s.rails + r)];
      switch_header(l, 65);
      for (int n = 0; n < s.nodes_per_su; ++n) {
        std::string g = ca_guid(su, n, r);
        fmt::format_to(it, "[{0}]\t\"H-{1}\"[1]({1}) \t\t# \"{2} mlx5_{3}\" lid {4} 4xNDR\n", n + 1, g, host(su, n), r,
                       20000 + (su * s.nodes_per_su + n) * s.rails + r);
      }
      const int pod = su / s.sus_per_pod;
      for (int k = 0; k < s.spines; ++k)
        port_to_switch(s.nodes_per_su + 1 + k, spines[static_cast<std::size_t>(pod * s.spines + k)], r + 1);
      aggregation();
    }
  // CA records.
  for (int su = 0; su < s.scalable_units; ++su)
    for (int n = 0; n < s.nodes_per_su; ++n)
      for (int r = 0; r < s.rails; ++r) {
        const Sw& l = leaves[static_cast<std::size_t>(su * s.rails + r)];
        std::string g = ca_guid(su, n, r);
        const int ca_lid = 20000 + (su * s.nodes_per_su + n) * s.rails + r;
        fmt::format_to(it, "vendid=0x2c9\ndevid=0x1021\nsysimgguid=0x{0}\ncaguid=0x{0}\n", g);
        fmt::format_to(it, "Ca\t1 \"H-{0}\"\t\t# \"{1} mlx5_{2}\"\n", g, host(su, n), r);
        fmt::format_to(it, "[1]({0}) \t\"S-{1}\"[{2}]\t\t# lid {3} lmc 0 \"MF0;{4}:MQM9701/U1\" lid {5} 4xNDR\n\n", g,
                       l.guid, n + 1, ca_lid, l.name, l.lid);
      }
  return out;
}

}  // namespace toposched
