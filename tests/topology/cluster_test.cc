#include "topology/cluster.h"

#include <gtest/gtest.h>

#include "topology/hardware.h"

namespace toposched {
namespace {

NodeType pcie_type(std::string name, int gpus) {
  NodeType t;
  t.name = std::move(name);
  t.gpu_model = "L40S";
  t.gpu_count = gpus;
  t.pcie_GBps = 32;
  t.gpu_links.assign(static_cast<std::size_t>(gpus * gpus), GpuLink{LinkClass::kPxb, 0});
  for (int i = 0; i < gpus; ++i) t.gpu_links[static_cast<std::size_t>(i * gpus + i)] = {LinkClass::kSelf, 0};
  return t;
}

NodeType nvlink_type(std::string name, int gpus, int links) {
  NodeType t;
  t.name = std::move(name);
  t.gpu_model = "H100-SXM5";
  t.gpu_count = gpus;
  t.pcie_GBps = 63;
  t.nvlink_GBps_per_link = 25;
  t.nvswitch = true;
  t.gpu_links = NodeType::full_nvlink_mesh(gpus, links);
  return t;
}

TEST(LinkCells, ParseAndPrint) {
  EXPECT_EQ(parse_link_cell("NV18"), (GpuLink{LinkClass::kNVLink, 18}));
  EXPECT_EQ(parse_link_cell("X"), (GpuLink{LinkClass::kSelf, 0}));
  EXPECT_EQ(parse_link_cell("SYS"), (GpuLink{LinkClass::kSys, 0}));
  EXPECT_FALSE(parse_link_cell("NV"));
  EXPECT_FALSE(parse_link_cell("NV0"));
  EXPECT_FALSE(parse_link_cell("NV1x"));
  EXPECT_FALSE(parse_link_cell("NV999"));
  EXPECT_FALSE(parse_link_cell("pix"));
  EXPECT_EQ(link_cell_token(GpuLink{LinkClass::kNVLink, 4}), "NV4");
  EXPECT_EQ(link_cell_token(GpuLink{LinkClass::kNode, 0}), "NODE");
}

TEST(Cluster, BuildsIdsAndQueries) {
  ClusterBuilder b("t");
  NodeTypeId t = b.add_node_type(nvlink_type("h", 8, 18));
  int leaf = b.add_tier(Tier{"leaf", 0, 0.5, 1});
  int spine = b.add_tier(Tier{"spine", 0, 0.5, 1});
  SwitchId s0 = b.add_switch("leaf0", leaf);
  SwitchId s1 = b.add_switch("leaf1", leaf);
  SwitchId top = b.add_switch("spine", spine);
  b.connect(s0, top);
  b.connect(s1, top);
  for (int i = 0; i < 4; ++i) b.attach(b.add_node("n" + std::to_string(i), t), i < 2 ? s0 : s1);
  auto c = std::move(b).build();
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->node_count(), 4u);
  EXPECT_EQ(c->gpu_count(), 32u);
  EXPECT_EQ(c->node_gpu(NodeId(2), 3), GpuId(19));
  EXPECT_EQ(c->gpu_node(GpuId(19)), NodeId(2));
  EXPECT_EQ(c->gpu_local_index(GpuId(19)), 3);
  EXPECT_EQ(c->find_node("n3"), NodeId(3));
  EXPECT_FALSE(c->find_node("n9"));
  EXPECT_EQ(c->switch_subtree_nodes(top).size(), 4u);
  EXPECT_EQ(c->switch_nodes(s1), (std::vector<NodeId>{NodeId(2), NodeId(3)}));
  EXPECT_EQ(c->root_switches(), (std::vector<SwitchId>{top}));
  EXPECT_EQ(c->hostlist(), "n[0-3]");

  Path same = c->path(GpuId(0), GpuId(0));
  EXPECT_EQ(same.level, PathLevel::kSameGpu);
  Path nv = c->path(GpuId(0), GpuId(7));
  EXPECT_EQ(c->level_name(nv), "nvlink");
  EXPECT_DOUBLE_EQ(nv.bandwidth_GBps, 450);
  Path leafp = c->path(GpuId(0), GpuId(8));
  EXPECT_EQ(c->level_name(leafp), "tier:leaf");
  Path spinep = c->path(GpuId(0), GpuId(31));
  EXPECT_EQ(c->level_name(spinep), "tier:spine");
  EXPECT_GT(spinep.latency_us, leafp.latency_us);
  EXPECT_LT(leafp.distance(), spinep.distance());
  EXPECT_LT(nv.distance(), leafp.distance());
}

TEST(Cluster, NicSharingAndOversubscriptionLowerNetworkBandwidth) {
  NodeType t = nvlink_type("h", 4, 4);
  // One 400G NIC for all four GPUs: each gets a quarter of 50 GB/s.
  t.nics.push_back(Nic{"mlx5_0", 400, {LinkClass::kPix, LinkClass::kPix, LinkClass::kPxb, LinkClass::kPxb}, 0, true});
  // A storage NIC is never used for GPU traffic.
  t.nics.push_back(Nic{"mlx5_9", 400, {LinkClass::kPix, LinkClass::kPix, LinkClass::kPix, LinkClass::kPix}, 0, false});
  ClusterBuilder b("t");
  NodeTypeId id = b.add_node_type(t);
  int leaf = b.add_tier(Tier{"leaf", 0, 0.5, 4});
  int spine = b.add_tier(Tier{"spine", 0, 0.5, 1});
  SwitchId l0 = b.add_switch("l0", leaf), l1 = b.add_switch("l1", leaf), sp = b.add_switch("sp", spine);
  b.connect(l0, sp);
  b.connect(l1, sp);
  b.attach(b.add_node("a", id), l0);
  b.attach(b.add_node("b", id), l0);
  b.attach(b.add_node("c", id), l1);
  auto c = std::move(b).build();
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_DOUBLE_EQ(c->gpu_network_GBps(GpuId(0)), 12.5);
  EXPECT_DOUBLE_EQ(c->path(GpuId(0), GpuId(4)).bandwidth_GBps, 12.5);
  // Above a 4:1 leaf, a quarter of that.
  EXPECT_DOUBLE_EQ(c->path(GpuId(0), GpuId(8)).bandwidth_GBps, 12.5 / 4);
}

TEST(Cluster, AcceleratorDomainJoinsBeforeTheFabric) {
  ClusterBuilder b("t");
  NodeTypeId id = b.add_node_type(nvlink_type("gb", 4, 18));
  int leaf = b.add_tier(Tier{"leaf", 0, 0.5, 1});
  SwitchId l = b.add_switch("l", leaf);
  DomainId d = b.add_domain(DomainSpec{"rack1", 0, 0});
  NodeId a = b.add_node("a", id), bb = b.add_node("b", id), c = b.add_node("c", id);
  for (NodeId n : {a, bb, c}) b.attach(n, l);
  b.add_to_domain(a, d, "half1");
  b.add_to_domain(bb, d);
  auto cl = std::move(b).build();
  ASSERT_TRUE(cl) << cl.error().to_string();
  Path p = cl->path(cl->node_gpu(a, 0), cl->node_gpu(bb, 3));
  EXPECT_EQ(cl->level_name(p), "accel-domain");
  EXPECT_DOUBLE_EQ(p.bandwidth_GBps, 450);  // default: the members' NVLink bandwidth
  EXPECT_EQ(cl->level_name(cl->path(cl->node_gpu(a, 0), cl->node_gpu(c, 0))), "tier:leaf");
  EXPECT_EQ(cl->node_sub_domain(a), "half1");
  EXPECT_EQ(cl->node_sub_domain(bb), "");
}

TEST(Cluster, NodesWithoutCommonSwitchAreCrossRoot) {
  ClusterBuilder b("t");
  NodeTypeId id = b.add_node_type(pcie_type("p", 2));
  int leaf = b.add_tier(Tier{"leaf", 0, 0.5, 1});
  SwitchId l0 = b.add_switch("l0", leaf), l1 = b.add_switch("l1", leaf);
  b.attach(b.add_node("a", id), l0);
  b.attach(b.add_node("b", id), l1);
  b.add_node("orphan", id);
  auto c = std::move(b).build();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->level_name(c->path(GpuId(0), GpuId(2))), "cross-root");
  EXPECT_EQ(c->level_name(c->path(GpuId(0), GpuId(4))), "cross-root");
  EXPECT_EQ(c->level_name(c->path(GpuId(0), GpuId(1))), "pcie-pxb");
  EXPECT_GT(c->path(GpuId(0), GpuId(4)).bandwidth_GBps, 0);
}

// ---- validation

std::string build_error(ClusterBuilder&& b) {
  auto c = std::move(b).build();
  EXPECT_FALSE(c.has_value());
  return c ? "" : c.error().message;
}

TEST(ClusterValidation, NodeUnderTwoLeaves) {
  ClusterBuilder b("t");
  NodeTypeId id = b.add_node_type(pcie_type("p", 2));
  int leaf = b.add_tier(Tier{"leaf", 0, 0.5, 1});
  SwitchId l0 = b.add_switch("l0", leaf), l1 = b.add_switch("l1", leaf);
  NodeId n = b.add_node("a", id);
  b.attach(n, l0);
  b.attach(n, l1);
  std::string msg = build_error(std::move(b));
  EXPECT_NE(msg.find("under two switches"), std::string::npos) << msg;
  EXPECT_EQ(b.error_subject(), "a");
}

TEST(ClusterValidation, SwitchCycle) {
  ClusterBuilder b("t");
  b.add_node_type(pcie_type("p", 2));
  int t0 = b.add_tier(Tier{"leaf", 0, 0.5, 1});
  int t1 = b.add_tier(Tier{"spine", 0, 0.5, 1});
  SwitchId x = b.add_switch("x", t0), y = b.add_switch("y", t1);
  b.connect(x, y);
  b.connect(y, x);
  std::string msg = build_error(std::move(b));
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
}

TEST(ClusterValidation, ParentMustBeInHigherTier) {
  ClusterBuilder b("t");
  int t0 = b.add_tier(Tier{"leaf", 0, 0.5, 1});
  SwitchId x = b.add_switch("x", t0), y = b.add_switch("y", t0);
  b.connect(x, y);
  std::string msg = build_error(std::move(b));
  EXPECT_NE(msg.find("higher tier"), std::string::npos) << msg;
}

TEST(ClusterValidation, TwoParents) {
  ClusterBuilder b("t");
  int t0 = b.add_tier(Tier{"leaf", 0, 0.5, 1});
  int t1 = b.add_tier(Tier{"spine", 0, 0.5, 1});
  SwitchId x = b.add_switch("x", t0), y = b.add_switch("y", t1), z = b.add_switch("z", t1);
  b.connect(x, y);
  b.connect(x, z);
  std::string msg = build_error(std::move(b));
  EXPECT_NE(msg.find("two parents"), std::string::npos) << msg;
}

TEST(ClusterValidation, UnknownNodeType) {
  ClusterBuilder b("t");
  b.add_node("a", NodeTypeId(3));
  std::string msg = build_error(std::move(b));
  EXPECT_NE(msg.find("unknown node type"), std::string::npos) << msg;
}

TEST(ClusterValidation, GpuCountMustMatchLinkMatrix) {
  ClusterBuilder b("t");
  NodeType t = pcie_type("p", 4);
  t.gpu_count = 8;
  b.add_node_type(t);
  std::string msg = build_error(std::move(b));
  EXPECT_NE(msg.find("8 GPUs but its link matrix has 16 cells"), std::string::npos) << msg;
}

TEST(ClusterValidation, AsymmetricMatrixAndMisplacedSelf) {
  {
    ClusterBuilder b("t");
    NodeType t = pcie_type("p", 3);
    t.gpu_links[1] = {LinkClass::kSys, 0};
    b.add_node_type(t);
    EXPECT_NE(build_error(std::move(b)).find("not symmetric"), std::string::npos);
  }
  {
    ClusterBuilder b("t");
    NodeType t = pcie_type("p", 3);
    t.gpu_links[1] = t.gpu_links[3] = {LinkClass::kSelf, 0};
    b.add_node_type(t);
    EXPECT_NE(build_error(std::move(b)).find("diagonal"), std::string::npos);
  }
}

TEST(ClusterValidation, DuplicatesAndDomains) {
  {
    ClusterBuilder b("t");
    NodeTypeId id = b.add_node_type(pcie_type("p", 2));
    b.add_node("a", id);
    b.add_node("a", id);
    EXPECT_NE(build_error(std::move(b)).find("declared twice"), std::string::npos);
  }
  {
    ClusterBuilder b("t");
    NodeTypeId id = b.add_node_type(nvlink_type("h", 2, 2));
    NodeId n = b.add_node("a", id);
    b.add_to_domain(n, b.add_domain(DomainSpec{"d1", 0, 0}));
    b.add_to_domain(n, b.add_domain(DomainSpec{"d2", 0, 0}));
    EXPECT_NE(build_error(std::move(b)).find("two accelerator domains"), std::string::npos);
  }
  {
    ClusterBuilder b("t");
    NodeTypeId id = b.add_node_type(pcie_type("p", 2));
    NodeId n = b.add_node("a", id);
    b.add_to_domain(n, b.add_domain(DomainSpec{"d1", 0, 0}));
    EXPECT_NE(build_error(std::move(b)).find("without NVLink"), std::string::npos);
  }
}

TEST(ClusterValidation, NicAffinityAndTierValues) {
  {
    ClusterBuilder b("t");
    NodeType t = pcie_type("p", 2);
    t.nics.push_back(Nic{"eth0", 100, {LinkClass::kPix}, 0, true});
    b.add_node_type(t);
    EXPECT_NE(build_error(std::move(b)).find("1 GPU affinities for 2 GPUs"), std::string::npos);
  }
  {
    ClusterBuilder b("t");
    b.add_tier(Tier{"leaf", 0, 0.5, 0.5});
    EXPECT_NE(build_error(std::move(b)).find("oversubscription"), std::string::npos);
  }
}

TEST(Hardware, KnownProductsAndPcie) {
  auto h100 = find_gpu_product("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->canonical, "H100-SXM5");
  EXPECT_EQ(h100->nvlinks_per_gpu, 18);
  auto nvl = find_gpu_product("NVIDIA H100 NVL");
  ASSERT_TRUE(nvl);
  EXPECT_EQ(nvl->canonical, "H100-NVL");
  EXPECT_EQ(find_gpu_product("NVIDIA GB200")->nvlink_GBps_per_link, 50);
  EXPECT_FALSE(find_gpu_product("Radeon Instinct"));
  EXPECT_NEAR(pcie_GBps(4, 16), 31.5, 0.1);
  EXPECT_NEAR(pcie_GBps(5, 16), 63.0, 0.1);
  EXPECT_EQ(pcie_GBps(9, 16), 0);
}

}  // namespace
}  // namespace toposched
