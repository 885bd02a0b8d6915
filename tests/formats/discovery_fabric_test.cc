// ibnetdiscover reader and the discovery merge, on the shared fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "formats/discovery.h"
#include "formats/ibnetdiscover.h"
#include "formats/native_spec.h"
#include "formats/nvidia_fabric.h"
#include "formats/nvidia_topo.h"
#include "support/ibnet_generator.h"
#include "topology/file_io.h"
#include "support/test_data.h"

namespace toposched {
namespace {

std::string data(const std::string& name) { return testing::test_data_text("discovery/" + name); }

// switch name -> its nodes
std::map<std::string, std::set<std::string>> leaf_members(const DiscoveredTopology& t) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& n : t.nodes) out[n.switch_name].insert(n.name);
  return out;
}

DiscoveredTopology named(const std::string& source) {
  DiscoveredTopology t;
  t.source = source;
  return t;
}

bool any_warning_mentions(const std::vector<std::string>& ws, const std::string& needle) {
  return std::any_of(ws.begin(), ws.end(), [&](const std::string& w) { return w.find(needle) != std::string::npos; });
}

TEST(Ibnetdiscover, TwoSuWithHcaFilterGivesTwoLeafGroupsOfFour) {
  IbnetOptions o;
  o.hca_regex = "mlx5_[01]";
  auto f = read_ibnetdiscover(data("two-su-rails-storage.ibnet"), "two-su.ibnet", o);
  ASSERT_TRUE(f) << f.error().to_string();
  const auto& t = f->topology;
  EXPECT_EQ(f->stats.leaf_groups, 2);
  auto members = leaf_members(t);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members["SU1-LEAF"], (std::set<std::string>{"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04"}));
  EXPECT_EQ(members["SU2-LEAF"], (std::set<std::string>{"gpu-b01", "gpu-b02", "gpu-b03", "gpu-b04"}));
  // Two spines with the same children become one spine group above both leaf groups.
  ASSERT_EQ(t.tiers, (std::vector<std::string>{"leaf", "spine"}));
  int spines = 0;
  for (const auto& s : t.switches) {
    if (s.tier == 1) {
      ++spines;
      EXPECT_EQ(s.name, "SPINE");
    } else {
      EXPECT_EQ(s.parent, "SPINE");
    }
  }
  EXPECT_EQ(spines, 1);
  EXPECT_EQ(f->stats.skipped_unnamed, 1);
  EXPECT_EQ(f->stats.aggregation_nodes, 7);
  EXPECT_EQ(f->stats.filtered_hcas, 8);  // the mlx5_4 storage HCAs
  EXPECT_EQ(f->stats.nodes_in_several_leaf_groups, 0);
  for (const auto& n : t.nodes) EXPECT_DOUBLE_EQ(n.nic_gbit, 400) << n.name;  // 4xNDR
  EXPECT_TRUE(any_warning_mentions(t.warnings, "skipped 1 CA"));
  EXPECT_TRUE(any_warning_mentions(t.warnings, "MT4129 ConnectX7"));
  EXPECT_TRUE(any_warning_mentions(t.warnings, "7 SHARP aggregation"));
  EXPECT_FALSE(any_warning_mentions(t.warnings, "several leaf groups"));
}

TEST(Ibnetdiscover, WithoutFilterTheStorageLeafIsReported) {
  auto f = read_ibnetdiscover(data("two-su-rails-storage.ibnet"), "two-su.ibnet");
  ASSERT_TRUE(f) << f.error().to_string();
  EXPECT_EQ(f->stats.nodes_in_several_leaf_groups, 8);
  EXPECT_TRUE(any_warning_mentions(f->topology.warnings, "STORAGE-LEAF-01"));
  EXPECT_TRUE(any_warning_mentions(f->topology.warnings, "gpu-a[01-04],gpu-b[01-04]"));
  EXPECT_TRUE(any_warning_mentions(f->topology.warnings, "--hca"));
  // Each node still lands in its own scalable unit, not under the storage leaf.
  auto members = leaf_members(f->topology);
  EXPECT_EQ(members.size(), 2u);
  EXPECT_EQ(members["SU1-LEAF"].size(), 4u);
  EXPECT_EQ(f->stats.skipped_unnamed, 1);
}

TEST(Ibnetdiscover, SingleCaWithoutSwitchIsAnEmptyFabric) {
  auto f = read_ibnetdiscover(data("gb200-single-ca-no-switch.ibnet"), "gb200.ibnet");
  ASSERT_TRUE(f) << f.error().to_string();
  EXPECT_TRUE(f->topology.tiers.empty());
  EXPECT_TRUE(f->topology.switches.empty());
  EXPECT_TRUE(f->topology.nodes.empty());
  EXPECT_EQ(f->stats.cas, 1);
}

TEST(Ibnetdiscover, BadLinesNamePosition) {
  std::string text = data("two-su-rails-storage.ibnet");
  auto pos = text.find("[2]\t\"S-2c5eab0300b801fc\"[5]");
  text.replace(pos, 3, "[x]");
  auto f = read_ibnetdiscover(text, "bad.ibnet");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().where.file, "bad.ibnet");
  EXPECT_EQ(f.error().where.line, 12);
  EXPECT_NE(f.error().message.find("port line"), std::string::npos);
  IbnetOptions o;
  o.hca_regex = "mlx5_[";
  auto r = read_ibnetdiscover(data("two-su-rails-storage.ibnet"), "x", o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

TEST(Ibnetdiscover, GeneratedFatTreeGroupsRailsPerScalableUnit) {
  IbnetGeneratorSpec spec;
  spec.scalable_units = 3;
  spec.nodes_per_su = 8;
  spec.rails = 4;
  spec.spines = 4;
  spec.cores = 2;
  std::string text = generate_ibnetdiscover(spec);
  IbnetOptions o;
  o.hca_regex = "mlx5_[0-3]";
  auto f = read_ibnetdiscover(text, "gen.ibnet", o);
  ASSERT_TRUE(f) << f.error().to_string();
  EXPECT_EQ(f->stats.leaf_groups, 3);
  EXPECT_EQ(f->topology.nodes.size(), 24u);
  EXPECT_EQ(f->topology.tiers, (std::vector<std::string>{"leaf", "spine", "core"}));
  for (const auto& [leaf, nodes] : leaf_members(f->topology)) EXPECT_EQ(nodes.size(), 8u) << leaf;
}

// ---------------------------------------------------------------- merge

DiscoveredNode topo_node(const std::string& name, const std::string& file, const std::string& model) {
  TopoMatrixOptions o;
  o.gpu_model = model;
  auto m = read_nvidia_topo(data(file), file, o);
  EXPECT_TRUE(m);
  DiscoveredNode n;
  n.name = name;
  n.hardware = std::make_shared<const NodeType>(m->type);
  return n;
}

TEST(DiscoveryMerge, TopoFabricAndIbnetBecomeOneCluster) {
  DiscoveredTopology hw = named("topo-m");
  for (const char* n : {"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04", "gpu-b01", "gpu-b02", "gpu-b03", "gpu-b04"})
    hw.nodes.push_back(topo_node(n, "h100-hgx-13nic.topo", "H100"));
  IbnetOptions o;
  o.hca_regex = "mlx5_[01]";
  auto ib = read_ibnetdiscover(data("two-su-rails-storage.ibnet"), "two-su.ibnet", o);
  ASSERT_TRUE(ib);
  auto r = merge_discovered({hw, ib->topology}, {});
  ASSERT_TRUE(r) << r.error().to_string();
  const Cluster& c = r->cluster;
  EXPECT_EQ(c.node_count(), 8u);
  EXPECT_EQ(c.node_type_count(), 1u);  // identical hardware shares one type
  EXPECT_EQ(c.hostlist(), "gpu-a[01-04],gpu-b[01-04]");
  auto a1 = c.find_node("gpu-a01"), a2 = c.find_node("gpu-a02"), b1 = c.find_node("gpu-b01");
  ASSERT_TRUE(a1 && a2 && b1);
  EXPECT_EQ(c.level_name(c.path(c.node_gpu(*a1, 0), c.node_gpu(*a1, 1))), "nvlink");
  EXPECT_EQ(c.level_name(c.node_path(*a1, *a2)), "tier:leaf");
  EXPECT_EQ(c.level_name(c.node_path(*a1, *b1)), "tier:spine");
  // HDR links instead of NDR: the compute NICs take the fabric's rate unless told otherwise.
  std::string hdr = data("two-su-rails-storage.ibnet");
  for (auto p = hdr.find("4xNDR"); p != std::string::npos; p = hdr.find("4xNDR", p)) hdr.replace(p, 5, "4xHDR");
  auto ib_hdr = read_ibnetdiscover(hdr, "hdr.ibnet", o);
  ASSERT_TRUE(ib_hdr);
  auto slow = merge_discovered({hw, ib_hdr->topology}, {});
  ASSERT_TRUE(slow);
  EXPECT_DOUBLE_EQ(slow->cluster.node_type(*slow->cluster.find_node("gpu-a01")).nics[0].gbit, 200);
  DiscoveryOptions fixed;
  fixed.nic_gbit_from_fabric = false;
  auto kept = merge_discovered({hw, ib_hdr->topology}, fixed);
  ASSERT_TRUE(kept);
  EXPECT_DOUBLE_EQ(kept->cluster.node_type(*kept->cluster.find_node("gpu-a01")).nics[0].gbit, 400);
  // The result round-trips through the native spec.
  auto again = read_native_spec(write_native_yaml(c), "spec.yaml");
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->node_count(), 8u);
}

TEST(DiscoveryMerge, FabricDomainsAndNoTopologyGroup) {
  DiscoveredTopology hw = named("topo-m"), fab = named("fabric");
  for (const char* n : {"gb-r1-n01", "gb-r1-n02", "gb-r2-n01"})
    hw.nodes.push_back(topo_node(n, "gb200-4gpu.topo", "GB200"));
  for (auto [node, file] :
       {std::pair{"gb-r1-n01", "fabric-gb-r1-n01.csv"}, std::pair{"gb-r1-n02", "fabric-gb-r1-n02.csv"},
        std::pair{"gb-r2-n01", "fabric-gb-r2-n01.csv"}}) {
    auto f = read_nvidia_fabric(data(file), file);
    ASSERT_TRUE(f);
    DiscoveredNode dn;
    dn.name = node;
    dn.domain = f->domain;
    fab.nodes.push_back(dn);
  }
  auto r = merge_discovered({hw, fab}, {});
  ASSERT_TRUE(r) << r.error().to_string();
  const Cluster& c = r->cluster;
  EXPECT_EQ(c.domain_count(), 2u);
  EXPECT_TRUE(r->warnings.empty());
  auto n1 = *c.find_node("gb-r1-n01"), n2 = *c.find_node("gb-r1-n02"), n3 = *c.find_node("gb-r2-n01");
  EXPECT_EQ(c.level_name(c.node_path(n1, n2)), "accel-domain");
  EXPECT_EQ(c.level_name(c.node_path(n1, n3)), "cross-root");
  EXPECT_DOUBLE_EQ(c.domain(c.node_domain(n1)).bandwidth_GBps, 18 * 50);

  // A node the switch tree does not know goes under no-topology, with a warning naming it.
  DiscoveredTopology tree = named("tree");
  tree.tiers = {"leaf"};
  tree.switches = {{"leaf-1", 0, ""}};
  DiscoveredNode placed;
  placed.name = "gb-r1-n01";
  placed.switch_name = "leaf-1";
  tree.nodes.push_back(placed);
  auto r2 = merge_discovered({hw, tree}, {});
  ASSERT_TRUE(r2) << r2.error().to_string();
  auto nt = r2->cluster.find_switch(kNoTopologySwitch);
  ASSERT_TRUE(nt);
  EXPECT_EQ(r2->cluster.switch_nodes(*nt).size(), 2u);
  EXPECT_TRUE(any_warning_mentions(r2->warnings, "gb-r1-n02,gb-r2-n01"));
  DiscoveryOptions strict;
  strict.strict = true;
  auto r3 = merge_discovered({hw, tree}, strict);
  ASSERT_FALSE(r3);
  EXPECT_NE(r3.error().message.find("--strict"), std::string::npos);
}

TEST(DiscoveryMerge, ConflictingLeavesAreReportedAndFirstWins) {
  DiscoveredTopology a = named("a.conf"), b = named("b.conf");
  a.tiers = b.tiers = {"leaf"};
  a.switches = {{"s1", 0, ""}};
  b.switches = {{"s2", 0, ""}};
  DiscoveredNode n;
  n.name = "n1";
  n.switch_name = "s1";
  a.nodes.push_back(n);
  n.switch_name = "s2";
  b.nodes.push_back(n);
  auto r = merge_discovered({a, b}, {});
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->cluster.switch_name(r->cluster.node_switch(*r->cluster.find_node("n1"))), "s1");
  EXPECT_TRUE(any_warning_mentions(r->warnings, "node 'n1' is under switch 's2' here but under 's1'"));
  // Nodes without topo -m get the generic type of the default GPU.
  EXPECT_EQ(r->cluster.node_type(*r->cluster.find_node("n1")).gpu_count, 8);
}

TEST(DiscoveryMerge, HybridCubeMeshPathsFollowLinkCounts) {
  DiscoveredTopology hw = named("topo-m");
  hw.nodes.push_back(topo_node("dgx1-01", "dgx1-v100.topo", "V100"));
  auto r = merge_discovered({hw}, {});
  ASSERT_TRUE(r) << r.error().to_string();
  const Cluster& c = r->cluster;
  NodeId n = *c.find_node("dgx1-01");
  auto path = [&](int a, int b) { return c.path(c.node_gpu(n, a), c.node_gpu(n, b)); };
  // NV1 and NV2 pairs are NVLink, at one and two times the V100's 25 GB/s per link.
  EXPECT_EQ(c.level_name(path(0, 1)), "nvlink");
  EXPECT_DOUBLE_EQ(path(0, 1).bandwidth_GBps, 25);
  EXPECT_EQ(c.level_name(path(0, 3)), "nvlink");
  EXPECT_DOUBLE_EQ(path(0, 3).bandwidth_GBps, 50);
  EXPECT_DOUBLE_EQ(path(0, 3).bandwidth_GBps, 2 * path(0, 1).bandwidth_GBps);
  // Pairs without NVLink cross the CPU interconnect.
  EXPECT_EQ(c.level_name(path(0, 5)), "pcie-sys");
  EXPECT_EQ(c.level_name(path(3, 6)), "pcie-sys");
  int nvlink_pairs = 0;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b) nvlink_pairs += path(a, b).level == PathLevel::kNVLink;
  EXPECT_EQ(nvlink_pairs, 16);  // a hybrid cube-mesh: 16 of the 28 pairs
}

TEST(DiscoveryMerge, NoNodesIsAnError) { EXPECT_FALSE(merge_discovered({}, {})); }

TEST(DiscoveryMerge, NaturalOrder) {
  EXPECT_TRUE(natural_less("n2", "n10"));
  EXPECT_FALSE(natural_less("n10", "n2"));
  EXPECT_TRUE(natural_less("a", "b"));
  EXPECT_TRUE(natural_less("gpu-a04", "gpu-b01"));
  EXPECT_FALSE(natural_less("x", "x"));
}

}  // namespace
}  // namespace toposched
