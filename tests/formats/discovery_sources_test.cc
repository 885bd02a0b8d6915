// Cluster-wide discovery sources: Slurm topology.conf, Topograph model YAML, Kubernetes node
// labels, AWS DescribeInstanceTopology, Google Compute Engine instances and OCI's compute hosts
// and rdmaTopologyData (with the chains of
// network nodes both clouds give, NetworkPaths), and the detection of topology.conf /
// Topograph models in load_cluster_text.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "formats/aws_topology.h"
#include "formats/cluster_source.h"
#include "formats/gcp_instances.h"
#include "formats/network_paths.h"
#include "formats/node_renames.h"
#include "formats/oci_topology.h"
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

// `scontrol show topology` (Slurm's own print of its tree and block plugins): Level= and
// LinkSpeed= on every switch, and a switch above others listing all the nodes below it,
// which the leaves place; BlockIndex= on every block.
TEST(SlurmTopology, ScontrolShowTopologyOutput) {
  auto tree = read_slurm_topology(
      "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=dgx[01-08] \n"
      "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=dgx[09-16] \n"
      "SwitchName=spine Level=1 LinkSpeed=1 Nodes=dgx[01-16] Switches=leaf[1-2] \n",
      "show-topology.txt");
  ASSERT_TRUE(tree) << tree.error().to_string();
  EXPECT_TRUE(tree->warnings.empty()) << tree->warnings.front();  // no "already under" for the spine's list
  EXPECT_EQ(tree->nodes.size(), 16u);
  EXPECT_EQ(node(*tree, "dgx09")->switch_name, "leaf2");
  EXPECT_EQ(sw(*tree, "leaf1")->parent, "spine");
  auto blocks = read_slurm_topology("BlockName=b1 BlockIndex=0 Nodes=gb[01-18]\nBlockName=b2 BlockIndex=1 Nodes=gb[19-36]\n",
                                    "show-topology.txt");
  ASSERT_TRUE(blocks) << blocks.error().to_string();
  EXPECT_EQ(node(*blocks, "gb20")->domain, "b2");
  auto bad = read_slurm_topology("SwitchName=s1 Level=x Nodes=a1\n", "t.txt");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().to_string(),
            "t.txt:1:21: expected Level= a whole number (scontrol show topology's switch level), found 'x'");
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

// ---------------------------------------------------------------- NetworkPaths

TEST(NetworkPaths, ChainsOfDifferentLengthsAClashAndAConflict) {
  DiscoveredTopology t;
  for (const char* n : {"a", "b", "c", "d"}) {
    DiscoveredNode node;
    node.name = n;
    t.nodes.push_back(std::move(node));
  }
  NetworkPaths paths("VM");
  paths.add(0, {"core", "spine1", "leaf1"});
  paths.add(1, {"core", "spine2", "leaf1"});  // leaf1 already hangs under spine1
  paths.add(2, {"spine1"});                   // one id as a leaf here and a spine above
  paths.add(3, {});                           // no chain: no switch
  paths.finish(t);
  EXPECT_EQ(t.tiers, (std::vector<std::string>{"leaf", "spine", "core"}));
  EXPECT_EQ(t.nodes[0].switch_name, "leaf1");
  EXPECT_EQ(t.nodes[1].switch_name, "leaf1");
  EXPECT_EQ(t.nodes[2].switch_name, "spine1@tier-0");
  EXPECT_EQ(t.nodes[3].switch_name, "");
  EXPECT_EQ(sw(t, "leaf1")->parent, "spine1");
  EXPECT_EQ(sw(t, "spine1")->tier, 1);
  EXPECT_EQ(sw(t, "spine1@tier-0")->parent, "");
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_EQ(t.warnings[0],
            "VM 'b' puts network node 'leaf1' under 'spine2', but another VM put it under 'spine1'; keeping 'spine1'");
}

// ---------------------------------------------------------------- Google Compute Engine

constexpr const char* kBlockA3 = "a2b6f3c1d0e9f8a7b6c5d4e3f2a1b0c9";
constexpr const char* kSubblockA3 = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
constexpr const char* kSubblockA4x = "5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b";

TEST(GcpInstances, SubBlocksBlocksAndClustersBecomeTiers) {
  auto t = read_gcp_instances(data("gcp-instances.json"), "gcp.json");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->tiers, (std::vector<std::string>{"leaf", "spine", "core"}));
  ASSERT_EQ(t->nodes.size(), 6u);  // a3u-005 (TERMINATED) and the CPU VM are left out
  const DiscoveredNode* a3 = node(*t, "a3u-001");
  ASSERT_TRUE(a3);
  EXPECT_EQ(a3->switch_name, kSubblockA3);
  EXPECT_EQ(a3->gpu_model, "H200");  // guestAccelerators' nvidia-h200-141gb
  EXPECT_EQ(a3->gpu_count, 8);
  EXPECT_EQ(a3->nic_gbit, 400);
  EXPECT_EQ(a3->domain, "");  // an A3 Ultra sub-block is a rack, not an NVLink domain
  EXPECT_EQ(sw(*t, kSubblockA3)->parent, kBlockA3);
  EXPECT_EQ(sw(*t, kBlockA3)->parent, "us-central1-b-cluster-2");
  EXPECT_EQ(sw(*t, "us-central1-b-cluster-2")->tier, 2);
  EXPECT_EQ(node(*t, "a3u-003")->switch_name, "1a2b3c4d5e6f70819203a4b5c6d7e8f9");
  const DiscoveredNode* gb = node(*t, "a4x-002");
  ASSERT_TRUE(gb);
  EXPECT_EQ(gb->gpu_model, "GB200");  // from the machine type: no guestAccelerators
  EXPECT_EQ(gb->gpu_count, 4);
  EXPECT_EQ(gb->domain, kSubblockA4x);
  EXPECT_EQ(gb->switch_name, kSubblockA4x);
  EXPECT_FALSE(node(*t, "a3u-005"));
  EXPECT_FALSE(node(*t, "slurm-controller"));
  EXPECT_EQ(t->warnings, (std::vector<std::string>{
                             "1 VM(s) not RUNNING left out (a stopped VM has no physical host): a3u-005",
                             "1 VM(s) without GPUs (no guestAccelerators, no GPU machine type) left out: "
                             "slurm-controller"}));
}

// The API's shapes (instances.list, aggregatedList, one instance) give what gcloud's list does.
TEST(GcpInstances, ApiShapesReadAlike) {
  const std::string list = data("gcp-instances.json");
  auto expected = read_gcp_instances(list, "gcp.json");
  ASSERT_TRUE(expected);
  auto names = [](const DiscoveredTopology& t) {
    std::vector<std::string> out;
    for (const auto& n : t.nodes) out.push_back(n.name + "@" + n.switch_name + "/" + n.domain);
    return out;
  };
  auto items = read_gcp_instances("{\"kind\": \"compute#instanceList\", \"items\": " + list + "}", "list.json");
  ASSERT_TRUE(items) << items.error().to_string();
  EXPECT_EQ(names(*items), names(*expected));
  auto aggregated = read_gcp_instances(
      "{\"items\": {\"zones/us-central1-a\": {\"warning\": {\"code\": \"NO_RESULTS_ON_PAGE\"}}, "
      "\"zones/us-central1-b\": {\"instances\": " + list + "}}}",
      "aggregated.json");
  ASSERT_TRUE(aggregated) << aggregated.error().to_string();
  EXPECT_EQ(names(*aggregated), names(*expected));
  auto one = read_gcp_instances(
      R"({"name": "a4x-009", "machineType": "zones/us-central1-b/machineTypes/a4x-highgpu-4g", "status": "RUNNING",
          "resourceStatus": {"physicalHostTopology": {"cluster": "c", "block": "b", "subblock": "s", "host": "h"}}})",
      "describe.json");
  ASSERT_TRUE(one) << one.error().to_string();
  ASSERT_EQ(one->nodes.size(), 1u);
  EXPECT_EQ(one->nodes[0].domain, "s");
}

TEST(GcpInstances, MachineTypesAcceleratorsAndPhysicalHost) {
  auto t = read_gcp_instances(R"([
    {"name": "h1", "machineType": "a3-highgpu-4g", "resourceStatus": {"physicalHost": "/cl/bl/host1"}},
    {"name": "h2", "machineType": "a2-highgpu-1g"},
    {"name": "h3", "machineType": "a2-ultragpu-8g"},
    {"name": "h4", "machineType": "g2-standard-24",
     "guestAccelerators": [{"acceleratorType": "projects/p/zones/z/acceleratorTypes/nvidia-l4", "acceleratorCount": 2}]},
    {"name": "h5", "machineType": "n1-standard-8",
     "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1},
                           {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}]},
    {"name": "h6", "machineType": "a2-highgpu-8g", "guestAccelerators": [{"acceleratorType": "nvidia-tesla-a100",
     "acceleratorCount": 8}]},
    {"name": "h7", "machineType": "a4x-maxgpu-4g-metal", "resourceStatus": {"physicalHostTopology": {"cluster": "c"}}}
  ])",
                              "types.json");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 7u);
  EXPECT_EQ(node(*t, "h1")->gpu_model, "H100");
  EXPECT_EQ(node(*t, "h1")->gpu_count, 4);
  EXPECT_EQ(node(*t, "h1")->nic_gbit, 0);  // A3 High shares its NICs: --nic-gbit decides
  EXPECT_EQ(node(*t, "h1")->switch_name, "bl");  // "/cluster/block/host": the host is the VM's own
  EXPECT_EQ(sw(*t, "bl")->parent, "cl");
  EXPECT_EQ(node(*t, "h2")->gpu_model, "A100 40GB");
  EXPECT_EQ(node(*t, "h3")->gpu_model, "A100");
  EXPECT_EQ(node(*t, "h3")->gpu_count, 8);
  EXPECT_EQ(node(*t, "h4")->gpu_model, "");  // L4: not a product toposched knows
  EXPECT_EQ(node(*t, "h4")->gpu_count, 2);
  EXPECT_EQ(node(*t, "h5")->gpu_model, "T4");
  EXPECT_EQ(node(*t, "h5")->gpu_count, 2);
  EXPECT_EQ(node(*t, "h6")->gpu_model, "A100 40GB");
  EXPECT_EQ(node(*t, "h7")->gpu_model, "GB300");
  EXPECT_EQ(node(*t, "h7")->nic_gbit, 800);
  EXPECT_EQ(node(*t, "h7")->domain, "");  // no sub-block given: no NVLink domain to name
  EXPECT_EQ(node(*t, "h7")->switch_name, "c");
  EXPECT_EQ(t->warnings, (std::vector<std::string>{"1 VM(s) whose accelerator type names no GPU product toposched "
                                                   "knows take --gpu-model: h4"}));
}

TEST(GcpInstances, ErrorsNameTheirPlace) {
  auto where = [](const char* text) {
    auto r = read_gcp_instances(text, "g.json");
    EXPECT_FALSE(r) << text;
    return r ? std::string() : r.error().to_string();
  };
  EXPECT_NE(where("[{\"machineType\": \"a3-megagpu-8g\"}]").find("g.json:1:2"), std::string::npos);
  EXPECT_NE(where("[{\"name\": \"a\"},\n {\"name\": \"a\"}]").find("g.json:2:11: instance 'a' appears twice"),
            std::string::npos);
  EXPECT_NE(where("[{\"name\": \"a\", \"guestAccelerators\": [{\"acceleratorType\": \"nvidia-h100-80gb\", "
                  "\"acceleratorCount\": 0}]}]")
                .find("acceleratorCount"),
            std::string::npos);
  EXPECT_NE(where("[{\"name\": \"a\", \"guestAccelerators\": [{\"acceleratorType\": \"nvidia-h100-80gb\", "
                  "\"acceleratorCount\": 4}, {\"acceleratorType\": \"nvidia-tesla-t4\", \"acceleratorCount\": 1}]}]")
                .find("expected one GPU product per VM, found 'T4' beside 'H100'"),
            std::string::npos);
  EXPECT_NE(where("{\"Instances\": []}").find("expected `gcloud compute instances list --format=json` output"),
            std::string::npos);
  EXPECT_NE(where("{\"items\": 3}").find("expected 'items' to be a list of instances or a map of zones"),
            std::string::npos);
  EXPECT_NE(where("[{\"name\": \"a\", \"machineType\": \"a3-megagpu-8g\", \"resourceStatus\": []}]")
                .find("expected 'resourceStatus' to be a mapping"),
            std::string::npos);
  EXPECT_FALSE(read_gcp_instances("[{\"name\": ", "g.json"));
}

// ---------------------------------------------------------------- OCI

const std::string kOciIsland = "ocid1.computehpcisland.oc1.us-chicago-1.anxxeljr7vqkbcyb2ffpqo3skw4ee4xqxfbsgyqbm4ud4rdwbzmb5ufaaqvq";
const std::string kOciNetwork =
    "ocid1.computenetworkblock.oc1.us-chicago-1.anxxeljrejz3ltt4aw7bfkthkbhmcc6dr2tszvkaqpwe6kklnbgvurtbpgkq";
const std::string kOciLocal1 =
    "ocid1.computelocalblock.oc1.us-chicago-1.anxxeljr5cjhutu5hx5q3f5nmx3xmnvvhg5yvbhvwnigkz7nn3ad7qyduf3a";
const std::string kOciLocal3 =
    "ocid1.computelocalblock.oc1.us-chicago-1.anxxeljr2tbgfzvfvw6qh4s3nrk5b7ki4i5wfhmxmnbgdyb3yi2ykwqdrmua";
const std::string kOciFabric =
    "ocid1.computegpumemoryfabric.oc1.us-chicago-1.anxxeljrhq4yu7xfnjnfz7r6cwnqk2g3vw2ldglqhe5puuypjnv5lpz7gaoa";

TEST(OciComputeHosts, BlocksAndIslandsBecomeTiersFabricsDomains) {
  auto t = read_oci_compute_hosts(data("oci-compute-hosts.json"), "hosts.json");
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->tiers, (std::vector<std::string>{"leaf", "spine", "core"}));
  ASSERT_EQ(t->nodes.size(), 6u);
  const DiscoveredNode* h100 = node(*t, "ocid1.instance.oc1.us-chicago-1.anxxeljrh100n1x7bfkthkbhmcc6dr2tszvkaqpwe6kklnbgv");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->gpu_model, "H100");
  EXPECT_EQ(h100->gpu_count, 8);
  EXPECT_EQ(h100->switch_name, kOciLocal1);
  EXPECT_EQ(h100->domain, "");  // "gpu-memory-fabric-id": null
  EXPECT_EQ(sw(*t, kOciLocal1)->parent, kOciNetwork);
  EXPECT_EQ(sw(*t, kOciNetwork)->parent, kOciIsland);
  const DiscoveredNode* gb = node(*t, "ocid1.instance.oc1.us-chicago-1.anxxeljrgb200n2kthkbhmcc6dr2tszvkaqpwe6kklnbgv");
  ASSERT_TRUE(gb);
  EXPECT_EQ(gb->gpu_model, "GB200");
  EXPECT_EQ(gb->gpu_count, 4);
  EXPECT_EQ(gb->domain, kOciFabric);
  ASSERT_EQ(t->warnings.size(), 2u);
  EXPECT_EQ(t->warnings[0].rfind("1 host(s) running no instance left out: ocid1.computehost.", 0), 0u) << t->warnings[0];
  EXPECT_EQ(t->warnings[1].rfind("1 instance(s) on a shape without GPUs left out: ocid1.instance.", 0), 0u)
      << t->warnings[1];
}

TEST(OciComputeHosts, ApiShapesAndShapes) {
  auto t = read_oci_compute_hosts(R"({"items": [
    {"instanceId": "i1", "shape": "BM.GPU.A100-v2.8", "localBlockId": "l1", "networkBlockId": "n1", "hpcIslandId": "h"},
    {"instanceId": "i2", "shape": "BM.GPU4.8", "localBlockId": "l1", "networkBlockId": "n1", "hpcIslandId": "h"},
    {"instanceId": "i3", "shape": "BM.GPU.MI300X.8", "localBlockId": "l2", "networkBlockId": "n1"},
    {"instanceId": "i4", "shape": "BM.GPU.L40S-NC.4"}
  ]})",
                                  "api.json");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 4u);
  EXPECT_EQ(node(*t, "i1")->gpu_model, "A100");
  EXPECT_EQ(node(*t, "i2")->gpu_model, "A100 40GB");
  EXPECT_EQ(node(*t, "i3")->gpu_model, "");  // an AMD MI300X: not a product toposched knows
  EXPECT_EQ(node(*t, "i3")->gpu_count, 8);
  EXPECT_EQ(node(*t, "i3")->switch_name, "l2");  // no island given: a shorter chain
  EXPECT_EQ(sw(*t, "l2")->parent, "n1");
  EXPECT_EQ(node(*t, "i4")->gpu_model, "L40S");
  EXPECT_EQ(node(*t, "i4")->switch_name, "");
  EXPECT_EQ(t->warnings, (std::vector<std::string>{"1 instance(s) whose shape names no GPU product toposched knows "
                                                   "take --gpu-model: i3"}));
  auto data_list = read_oci_compute_hosts(R"({"data": [{"instance-id": "x", "shape": "BM.GPU.H200.8"}]})", "d.json");
  ASSERT_TRUE(data_list) << data_list.error().to_string();
  EXPECT_EQ(data_list->nodes[0].gpu_model, "H200");
  auto twice = read_oci_compute_hosts("[{\"instance-id\": \"x\"},\n {\"instance-id\": \"x\"}]", "t.json");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().to_string(), "t.json:2:2: instance 'x' appears on two hosts");
  auto many = read_oci_compute_hosts("[{\"instance-id\": \"x\", \"shape\": \"BM.GPU.H100.128\"}]", "m.json");
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().message.find("expected at most 64 GPUs per host, found 128"), std::string::npos);
  EXPECT_FALSE(read_oci_compute_hosts("{\"data\": {\"items\": 3}}", "b.json"));
  EXPECT_FALSE(read_oci_compute_hosts("[{\"instance-id\": 3, \"shape\": []}]", "b.json"));
}

// The same hosts from their instance metadata: one file per host (named after it) or pdsh's lines.
TEST(OciRdmaTopology, PerHostFilesAndPdshLinesMakeOneTree) {
  OciRdmaTopology hosts;
  for (const char* h : {"gpu-01", "gpu-02", "gpu-03", "gpu-04"})
    ASSERT_TRUE(hosts.add(data(std::string("oci-rdma/") + h + ".json"), h, h));
  ASSERT_TRUE(hosts.add(data("oci-rdma-pdsh.txt"), "pdsh.txt", "pdsh"));
  const DiscoveredTopology t = hosts.finish("--oci-rdma-topology");
  EXPECT_EQ(t.tiers, (std::vector<std::string>{"leaf", "spine", "core"}));
  ASSERT_EQ(t.nodes.size(), 6u);
  EXPECT_EQ(node(t, "gpu-02")->switch_name, kOciLocal1);
  EXPECT_EQ(node(t, "gpu-02")->domain, "");
  EXPECT_EQ(node(t, "gb-01")->switch_name, kOciLocal3);
  EXPECT_EQ(node(t, "gb-02")->domain, kOciFabric);
  EXPECT_EQ(sw(t, kOciNetwork)->parent, kOciIsland);
  int network_blocks = 0;
  for (const auto& s : t.switches) network_blocks += s.tier == 1;
  EXPECT_EQ(network_blocks, 1);  // one network block for all six hosts' files
  auto again = hosts.add(data("oci-rdma/gpu-01.json"), "gpu-01.json", "gpu-01");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message, "host 'gpu-01' appears twice");
}

TEST(OciRdmaTopology, ErrorsNameTheLineAndColumnOfThePdshOutput) {
  auto bad = read_oci_rdma_topology(
      "n1: {\"customerHPCIslandId\": \"i\", \"customerNetworkBlock\": \"n\", \"customerLocalBlock\": \"l\"}\n"
      "n2: {\"customerHPCIslandId\": \"i\", \"customerNetworkBlock\": 7, \"customerLocalBlock\": [1]}\n",
      "pdsh.txt", "x");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().to_string(), "pdsh.txt:2:83: expected 'customerLocalBlock' to be a string, found a list");
  auto missing = read_oci_rdma_topology("n1: {\"customerHPCIslandId\": \"i\"}\n", "pdsh.txt", "x");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().where.line, 1);
  EXPECT_NE(missing.error().message.find("customerNetworkBlock"), std::string::npos);
  auto garbage = read_oci_rdma_topology("n3: curl: (7) Failed to connect to 169.254.169.254\nplain\n", "p.txt", "x");
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().to_string(),
            "p.txt:2:1: expected 'NODE: {rdmaTopologyData JSON}' (pdsh's output), found 'plain'");
  auto unanswered = read_oci_rdma_topology(
      "n1: {\"customerHPCIslandId\": \"i\", \"customerNetworkBlock\": \"n\", \"customerLocalBlock\": \"l\"}\n"
      "n3: curl: (7) Failed to connect to 169.254.169.254\nn4: \n",
      "p.txt", "x");
  ASSERT_TRUE(unanswered) << unanswered.error().to_string();
  EXPECT_EQ(unanswered->nodes.size(), 1u);
  EXPECT_EQ(unanswered->warnings,
            (std::vector<std::string>{"2 host(s) gave no rdmaTopologyData JSON (pdsh lines whose output is not an "
                                      "object), left out: p.txt:2: n3, p.txt:3: n4"}));
  auto twice = read_oci_rdma_topology(
      "n1: {\"customerHPCIslandId\": \"i\", \"customerNetworkBlock\": \"n\", \"customerLocalBlock\": \"l\"}\n"
      "n1: {\"customerHPCIslandId\": \"i\", \"customerNetworkBlock\": \"n\", \"customerLocalBlock\": \"l\"}\n",
      "pdsh.txt", "x");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().to_string(), "pdsh.txt:2: host 'n1' appears twice");
  EXPECT_FALSE(read_oci_rdma_topology("", "empty.txt", "x"));
  EXPECT_FALSE(read_oci_rdma_topology("{\"customerLocalBlock\": ", "one.json", "x"));
}

// ---------------------------------------------------------------- renaming nodes

TEST(NodeRenames, InstanceIdsAndMappingsRenameEverySource) {
  auto aws = read_aws_topology(data("aws-instance-topology.json"), "aws.json");
  ASSERT_TRUE(aws);
  NodeRenames renames;
  ASSERT_TRUE(renames.add_instance_ids("gpu-01: i-1111111111example\n\ngpu-02: i-2222222222example\n", "ids.txt"));
  ASSERT_TRUE(renames.add_mapping("{i-3333333333example: gb-01, i-gone: gb-99}", "names.yaml"));
  std::vector<DiscoveredTopology> sources{*aws};
  std::vector<std::string> warnings;
  ASSERT_TRUE(renames.apply(sources, warnings));
  EXPECT_EQ(sources[0].nodes[0].name, "gpu-01");
  EXPECT_EQ(sources[0].nodes[0].switch_name, "nn-3333333333example");  // the node's place is kept
  EXPECT_EQ(sources[0].nodes[1].name, "gpu-02");
  EXPECT_EQ(sources[0].nodes[2].name, "gb-01");
  EXPECT_EQ(sources[0].nodes[2].domain, "cr-0123456789example");
  EXPECT_EQ(sources[0].nodes[3].name, "i-4444444444example");  // not in any rename
  EXPECT_EQ(warnings, (std::vector<std::string>{"1 name(s) to rename are no node of any source: i-gone"}));
}

TEST(NodeRenames, ConflictsAndBadLinesAreErrorsAtTheirPlace) {
  NodeRenames a;
  ASSERT_TRUE(a.add_instance_ids("n1: i-1\n", "ids.txt"));
  auto twice = a.add_mapping("i-1: n2\n", "names.yaml");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().to_string(), "names.yaml:1:6: 'i-1' is renamed to 'n2' here and to 'n1' at ids.txt:1:5");
  NodeRenames b;
  auto shared = b.add_instance_ids("n1: i-1\nn2: i-1\n", "ids.txt");
  ASSERT_FALSE(shared);
  EXPECT_EQ(shared.error().to_string(), "ids.txt:2:5: instance 'i-1' is on node 'n1' and on node 'n2'");
  auto bad = NodeRenames().add_instance_ids("n1 i-1\n", "ids.txt");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().to_string(),
            "ids.txt:1:1: expected 'NODE: INSTANCE-ID' (pdsh's output of the instance-id query), found 'n1 i-1'");
  auto comma = NodeRenames().add_mapping("{i-1: 'a,b'}", "names.yaml");
  ASSERT_FALSE(comma);
  EXPECT_NE(comma.error().message.find("expected a node name for 'i-1' (no space, ',', '[' or ']'), found 'a,b'"),
            std::string::npos);
  EXPECT_FALSE(NodeRenames().add_mapping("[a, b]", "names.yaml"));
  NodeRenames c;
  ASSERT_TRUE(c.add_mapping("{i-1: n1, i-2: n1}", "names.yaml"));
  DiscoveredTopology t;
  t.source = "aws.json";
  for (const char* n : {"i-1", "i-2"}) {
    DiscoveredNode node;
    node.name = n;
    t.nodes.push_back(std::move(node));
  }
  std::vector<DiscoveredTopology> sources{t};
  std::vector<std::string> warnings;
  auto clash = c.apply(sources, warnings);
  ASSERT_FALSE(clash);
  EXPECT_EQ(clash.error().message, "aws.json: nodes 'i-1' and 'i-2' would both be named 'n1'");
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
