// Cluster-wide discovery sources: Slurm topology.conf, Topograph model YAML, Kubernetes node
// labels and AWS DescribeInstanceTopology, and the detection of topology.conf / Topograph
// models in load_cluster_text.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "formats/aws_topology.h"
#include "formats/cluster_source.h"
#include "formats/k8s_nodes.h"
#include "formats/slurm_topology.h"
#include "formats/topograph_model.h"
#include "topology/file_io.h"
#include "support/test_data.h"

namespace toposched {
namespace {

std::string data(const std::string& name) { return testing::test_data_text("discovery/" + name); }

const DiscoveredNode* node(const DiscoveredTopology& t, const std::string& name) {
  return testing::find_discovered_node(t, name);
}

const DiscoveredSwitch* sw(const DiscoveredTopology& t, const std::string& name) {
  for (const auto& s : t.switches)
    if (s.name == name) return &s;
  return nullptr;
}

// ---------------------------------------------------------------- Slurm topology.conf

TEST(SlurmTopology, TreeWithCommentsAndContinuations) {
  auto t = read_slurm_topology(data("slurm-tree.conf"), "topology.conf");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->tiers, (std::vector<std::string>{"leaf", "spine", "core"}));
  ASSERT_TRUE(sw(*t, "leaf01") && sw(*t, "spine1") && sw(*t, "core"));
  EXPECT_EQ(sw(*t, "leaf01")->tier, 0);
  EXPECT_EQ(sw(*t, "leaf01")->parent, "spine1");
  EXPECT_EQ(sw(*t, "spine2")->tier, 1);
  EXPECT_EQ(sw(*t, "core")->tier, 2);
  EXPECT_EQ(sw(*t, "core")->parent, "");
  EXPECT_EQ(t->nodes.size(), 16u);
  // The continuation line carries the second half of leaf02's nodes.
  ASSERT_TRUE(node(*t, "dgx08"));
  EXPECT_EQ(node(*t, "dgx08")->switch_name, "leaf02");
  EXPECT_EQ(node(*t, "dgx16")->switch_name, "leaf04");
  EXPECT_TRUE(t->warnings.empty());
}

TEST(SlurmTopology, BlocksBecomeAcceleratorDomains) {
  auto t = read_slurm_topology(data("slurm-block.conf"), "topology.conf");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_TRUE(t->tiers.empty());
  EXPECT_EQ(t->nodes.size(), 36u);
  EXPECT_EQ(node(*t, "gb-r1-n01")->domain, "rack1");
  EXPECT_EQ(node(*t, "gb-r2-n18")->domain, "rack2");
}

TEST(SlurmTopology, KeysAreCaseInsensitive) {
  auto t = read_slurm_topology("switchname=s1 nodes=a[1-2]\nSWITCHNAME=top SWITCHES=s1\n", "t.conf");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(sw(*t, "s1")->parent, "top");
}

TEST(SlurmTopology, ErrorsNamePositions) {
  auto unknown_child = read_slurm_topology("SwitchName=s1 Nodes=a1\nSwitchName=top Switches=s1,s9\n", "t.conf");
  ASSERT_FALSE(unknown_child);
  EXPECT_EQ(unknown_child.error().where.line, 2);
  EXPECT_EQ(unknown_child.error().where.column, 28);
  EXPECT_NE(unknown_child.error().message.find("'s9'"), std::string::npos);

  auto bad_key = read_slurm_topology("SwitchName=s1 Nodez=a1\n", "t.conf");
  ASSERT_FALSE(bad_key);
  EXPECT_EQ(bad_key.error().where.column, 15);
  EXPECT_NE(bad_key.error().message.find("nodez"), std::string::npos);

  auto cycle = read_slurm_topology("SwitchName=a Switches=b\nSwitchName=b Switches=a\n", "t.conf");
  ASSERT_FALSE(cycle);
  EXPECT_NE(cycle.error().message.find("cycle"), std::string::npos);

  auto bad_hostlist = read_slurm_topology("SwitchName=s1 Nodes=a[1-\n", "t.conf");
  ASSERT_FALSE(bad_hostlist);
  EXPECT_EQ(bad_hostlist.error().where.line, 1);

  auto mixed = read_slurm_topology("SwitchName=s1 Nodes=a1\nBlockName=b1 Nodes=a2\n", "t.conf");
  ASSERT_FALSE(mixed);
  EXPECT_EQ(mixed.error().where.line, 2);

  EXPECT_FALSE(read_slurm_topology("# only a comment\n", "t.conf"));
}

TEST(SlurmTopology, NodeUnderTwoSwitchesIsAWarning) {
  auto t = read_slurm_topology("SwitchName=s1 Nodes=a[1-2]\nSwitchName=s2 Nodes=a[2-3]\n", "t.conf");
  ASSERT_TRUE(t);
  EXPECT_EQ(node(*t, "a2")->switch_name, "s1");
  ASSERT_EQ(t->warnings.size(), 1u);
  EXPECT_NE(t->warnings[0].find("a2"), std::string::npos);
}

TEST(SlurmTopology, LoadClusterDetectsTopologyConf) {
  auto c = load_cluster_text(data("slurm-tree.conf"), "site/topology.conf");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->node_count(), 16u);
  EXPECT_EQ(c->tiers().size(), 3u);
  EXPECT_EQ(c->name(), "topology");
  auto a = *c->find_node("dgx01"), b = *c->find_node("dgx16");
  EXPECT_EQ(c->level_name(c->node_path(a, b)), "tier:core");
  auto blocks = load_cluster_text(data("slurm-block.conf"), "block.conf");
  ASSERT_TRUE(blocks) << blocks.error().to_string();
  EXPECT_EQ(blocks->domain_count(), 2u);
  EXPECT_EQ(blocks->node_gpu_count(*blocks->find_node("gb-r1-n01")), 8);
  auto bad = load_cluster_text("SwitchName=s1 Nodes=a1 Bogus=1\n", "bad.conf");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.file, "bad.conf");
}

// ---------------------------------------------------------------- Topograph model

TEST(TopographModel, SwitchesBlocksAndDomains) {
  auto t = read_topograph_model(data("topograph-model.yaml"), "model.yaml");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->tiers, (std::vector<std::string>{"leaf", "spine", "core"}));
  EXPECT_EQ(sw(*t, "leaf-1-1")->parent, "spine-1");
  EXPECT_EQ(sw(*t, "core")->tier, 2);
  EXPECT_EQ(t->nodes.size(), 32u);
  EXPECT_EQ(node(*t, "srv1101")->switch_name, "leaf-1-1");
  EXPECT_EQ(node(*t, "srv1101")->domain, "nvl-1");
  EXPECT_EQ(node(*t, "srv2208")->domain, "nvl-2");
  EXPECT_EQ(node(*t, "srv2208")->sub_domain, "rack04");
}

TEST(TopographModel, OlderCapacityBlockLayout) {
  const char* text =
      "switches:\n"
      "- name: spine1\n  switches: [ibleaf1]\n"
      "- name: ibleaf1\n  capacity_blocks: [cb1]\n"
      "capacity_blocks:\n"
      "- name: cb1\n  type: H100\n  nvlink: nv1\n  nodes: [n1-1,n1-2]\n";
  auto t = read_topograph_model(text, "old.yaml");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(node(*t, "n1-2")->switch_name, "ibleaf1");
  EXPECT_EQ(node(*t, "n1-2")->domain, "nv1");
  EXPECT_EQ(node(*t, "n1-2")->gpu_model, "H100");
}

TEST(TopographModel, ErrorsNamePositions) {
  // Since Topograph #409 a switch named only as a child exists (an empty leaf); a block
  // may name it, but not a switch that is neither defined nor a child.
  auto implicit = read_topograph_model("switches:\n  top:\n    switches: [leaf]\nblocks:\n- {switch: leaf, nodes: [n1]}\n", "m.yaml");
  ASSERT_TRUE(implicit) << implicit.error().to_string();
  EXPECT_EQ(sw(*implicit, "leaf")->parent, "top");
  EXPECT_EQ(node(*implicit, "n1")->switch_name, "leaf");
  auto unknown = read_topograph_model("switches:\n  top:\n    switches: [leaf]\nblocks:\n- switch: missing\n  nodes: [n1]\n", "m.yaml");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().where.line, 5);
  EXPECT_NE(unknown.error().message.find("missing"), std::string::npos);
  auto two_parents =
      read_topograph_model("switches:\n  a:\n    switches: [c]\n  b:\n    switches: [c]\n  c: {}\n", "m.yaml");
  ASSERT_FALSE(two_parents);
  EXPECT_NE(two_parents.error().message.find("two parent"), std::string::npos);
  auto bad_block = read_topograph_model("blocks:\n- switch: nowhere\n  nodes: [n1]\n", "m.yaml");
  ASSERT_FALSE(bad_block);
  EXPECT_EQ(bad_block.error().where.line, 2);
}

TEST(TopographModel, LoadClusterDetectsModels) {
  EXPECT_TRUE(looks_like_topograph_model(data("topograph-model.yaml")));
  EXPECT_FALSE(looks_like_topograph_model(data("slurm-tree.conf")));
  auto c = load_cluster_text(data("topograph-model.yaml"), "model.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->node_count(), 32u);
  EXPECT_EQ(c->domain_count(), 2u);
  auto a = *c->find_node("srv1101"), b = *c->find_node("srv1208");
  EXPECT_EQ(c->level_name(c->node_path(a, b)), "accel-domain");
}

// ---------------------------------------------------------------- Kubernetes

TEST(K8sNodes, TopographOlderNvidiaAndGfdLabels) {
  auto t = read_k8s_nodes(data("k8s-nodes.json"), "nodes.json");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->nodes.size(), 3u);
  EXPECT_EQ(t->tiers, (std::vector<std::string>{"leaf", "spine"}));
  // Topograph labels.
  EXPECT_EQ(node(*t, "gb-a1")->switch_name, "S-leaf-a");
  EXPECT_EQ(node(*t, "gb-a1")->domain, "7f3c2a10-5b4e-4d6a-9c1e-2b8f0e6d4a91.1");
  EXPECT_EQ(node(*t, "gb-a1")->sub_domain, "tray-1");
  EXPECT_EQ(sw(*t, "S-leaf-a")->parent, "S-spine");
  // Older NVIDIA labels.
  EXPECT_EQ(node(*t, "h100-b1")->switch_name, "leaf-b");
  EXPECT_EQ(node(*t, "h100-b1")->domain, "");
  // GFD: clique as the domain when no Topograph label says otherwise; product and count.
  EXPECT_EQ(node(*t, "gb-a2")->domain, "7f3c2a10-5b4e-4d6a-9c1e-2b8f0e6d4a91.1");
  EXPECT_EQ(node(*t, "gb-a2")->gpu_count, 4);
  EXPECT_EQ(node(*t, "h100-b1")->gpu_model, "NVIDIA-H100-80GB-HBM3");
  // Neither GPU nor topology labels: a CPU node, skipped with a warning.
  EXPECT_EQ(node(*t, "cpu-login"), nullptr);
  ASSERT_EQ(t->warnings.size(), 1u);
  EXPECT_NE(t->warnings[0].find("cpu-login"), std::string::npos);
}

TEST(K8sNodes, LabelMapAddsSiteKeys) {
  auto t = read_k8s_nodes(data("k8s-nodes.json"), "nodes.json", {"example.com/rack=tier-0"});
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_NE(node(*t, "cpu-login"), nullptr);
  EXPECT_EQ(node(*t, "cpu-login")->switch_name, "rack-9");
  // A site key is tried before the built-in ones.
  auto t2 = read_k8s_nodes(data("k8s-nodes.json"), "nodes.json", {"example.com/rack=leaf"});
  ASSERT_TRUE(t2);
  EXPECT_EQ(node(*t2, "gb-a1")->switch_name, "rack-1");
  EXPECT_FALSE(read_k8s_nodes(data("k8s-nodes.json"), "nodes.json", {"example.com/rack=floor"}));
  EXPECT_FALSE(read_k8s_nodes(data("k8s-nodes.json"), "nodes.json", {"no-role"}));
}

TEST(K8sNodes, ErrorsNamePositions) {
  auto bad = read_k8s_nodes("{\"items\": [{\"metadata\": {\"labels\": {}}}]}", "n.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("name"), std::string::npos);
  auto count = read_k8s_nodes(
      "{\"items\": [\n {\"metadata\": {\"name\": \"n1\", \"labels\": {\"nvidia.com/gpu.count\": \"many\"}}}]}",
      "n.json");
  ASSERT_FALSE(count);
  EXPECT_EQ(count.error().where.line, 2);
  EXPECT_NE(count.error().message.find("many"), std::string::npos);
}

TEST(K8sNodes, MemoryCapacityGivesTheTypeItsSmallestNodesMemory) {
  // Three nodes alike, one with half the memory: one node type (host memory decides no
  // placement and must not split a Kueue flavor), with the smallest memory, in whole GB.
  auto item = [](const std::string& name, const std::string& memory) {
    return "{\"metadata\": {\"name\": \"" + name +
           "\", \"labels\": {\"nvidia.com/gpu.count\": \"8\", \"nvidia.com/gpu.product\": "
           "\"NVIDIA-H100-80GB-HBM3\", \"network.topology.nvidia.com/leaf\": \"l1\"}}, "
           "\"status\": {\"capacity\": {\"memory\": \"" + memory + "\"}}}";
  };
  const std::string text = "{\"kind\": \"NodeList\", \"items\": [" + item("h1", "2113442596Ki") + ", " + item("h2", "2113442596Ki") + ", " +
                           item("h3", "1056721298Ki") + "]}";
  auto c = load_cluster_text(text, "nodes.json");
  ASSERT_TRUE(c) << c.error().to_string();
  const auto type_of = [&](const char* n) -> const NodeType& { return c->node_type(*c->find_node(n)); };
  EXPECT_EQ(c->node_type_count(), 1u);
  EXPECT_EQ(&type_of("h1"), &type_of("h3"));
  EXPECT_EQ(type_of("h1").host_memory_gb, 1082);
  // Alike in memory: theirs.
  auto same = load_cluster_text("{\"kind\": \"NodeList\", \"items\": [" + item("h1", "2113442596Ki") + ", " +
                                    item("h2", "2113442596Ki") + "]}",
                                "nodes.json");
  ASSERT_TRUE(same) << same.error().to_string();
  EXPECT_EQ(same->node_type(*same->find_node("h2")).host_memory_gb, 2164);
  // Without the field the type's host memory stays unknown.
  auto fixture = load_cluster_text(data("k8s-nodes.json"), "nodes.json");
  ASSERT_TRUE(fixture) << fixture.error().to_string();
  for (std::size_t n = 0; n < fixture->node_count(); ++n)
    EXPECT_EQ(fixture->node_type(NodeId(static_cast<std::uint32_t>(n))).host_memory_gb, 0) << n;
}

// ---------------------------------------------------------------- AWS

TEST(AwsTopology, NetworkNodesBecomeTiers) {
  auto t = read_aws_topology(data("aws-instance-topology.json"), "aws.json");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->tiers, (std::vector<std::string>{"leaf", "spine", "core"}));
  EXPECT_EQ(t->nodes.size(), 4u);
  const DiscoveredNode* p5 = node(*t, "i-1111111111example");
  ASSERT_TRUE(p5);
  EXPECT_EQ(p5->switch_name, "nn-3333333333example");
  EXPECT_EQ(p5->gpu_model, "H100");
  EXPECT_EQ(p5->gpu_count, 8);
  EXPECT_EQ(p5->domain, "");  // a p5 capacity block is no NVLink domain
  EXPECT_EQ(sw(*t, "nn-3333333333example")->parent, "nn-2222222222example");
  EXPECT_EQ(sw(*t, "nn-1111111111example")->tier, 2);
  const DiscoveredNode* gb = node(*t, "i-3333333333example");
  EXPECT_EQ(gb->domain, "cr-0123456789example");
  EXPECT_EQ(gb->gpu_count, 4);
}

TEST(AwsTopology, Errors) {
  EXPECT_FALSE(read_aws_topology("{\"Instances\": [{\"InstanceType\": \"p5.48xlarge\"}]}", "a.json"));
  auto bad = read_aws_topology("{\"Instances\": 3}", "a.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.line, 1);
  EXPECT_FALSE(read_aws_topology("{\"Instances\": [", "a.json"));
}

}  // namespace
}  // namespace toposched
