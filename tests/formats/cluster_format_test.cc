// Cluster sources detected by content (formats/cluster_format.h): every format the CLI's
// --cluster reads is recognised from its first bytes, read into the right cluster, and a file
// of none of them is refused naming the formats tried.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "formats/cluster_format.h"
#include "formats/cluster_source.h"
#include "formats/resource_slices.h"
#include "formats/slurm_topology.h"
#include "topology/file_io.h"

namespace toposched {
namespace {

std::string data(const std::string& name) {
  auto t = read_text_file(std::string(TOPOSCHED_TEST_DATA) + "/discovery/" + name);
  EXPECT_TRUE(t) << name;
  return t ? *t : std::string();
}

TEST(ClusterFormat, EachFormatIsRecognisedFromItsFirstBytes) {
  struct Case {
    const char* what;
    std::string text;
    ClusterFormat want;
  };
  const std::vector<Case> cases = {
      {"kubectl get nodes -o json (a List of Nodes)", data("k8s-nodes.json"), ClusterFormat::kK8sNodes},
      {"NodeList JSON, kind first", R"({"kind": "NodeList", "apiVersion": "v1", "items": []})", ClusterFormat::kK8sNodes},
      {"kubectl get nodes -o yaml",
       "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n    ownerReferences:\n"
       "    - kind: Machine\nkind: List\n",
       ClusterFormat::kK8sNodes},
      {"one Node", "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n", ClusterFormat::kK8sNodes},
      {"an empty kubectl list", R"({"apiVersion": "v1", "items": [], "kind": "List"})", ClusterFormat::kK8sNodes},
      {"ResourceSlices JSON", data("resource-slices.json"), ClusterFormat::kResourceSlices},
      {"ResourceSliceList YAML", "apiVersion: resource.k8s.io/v1\nkind: ResourceSliceList\nitems: []\n",
       ClusterFormat::kResourceSlices},
      {"ResourceSlices YAML list",
       "apiVersion: v1\nitems:\n  - apiVersion: resource.k8s.io/v1beta1\n    kind: ResourceSlice\n    spec: {}\n",
       ClusterFormat::kResourceSlices},
      {"topology.conf (tree)", data("slurm-tree.conf"), ClusterFormat::kSlurmTopologyConf},
      {"topology.conf (block)", data("slurm-block.conf"), ClusterFormat::kSlurmTopologyConf},
      {"topology.yaml", data("slurm-topology.yaml"), ClusterFormat::kSlurmTopologyYaml},
      {"Topograph model", data("topograph-model.yaml"), ClusterFormat::kTopographModel},
      {"native spec", "# a cluster\nversion: 1\nname: x\nnode_types: []\nnodes: []\n", ClusterFormat::kNativeSpec},
      {"native spec JSON", R"({"name": "x", "node_types": [{"name": "t", "switches": []}], "nodes": []})",
       ClusterFormat::kNativeSpec},
      {"a Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n", ClusterFormat::kUnknown},
      {"CSV", "node,gpus\nn1,8\n", ClusterFormat::kUnknown},
      {"a JSON array", R"([{"name": "n1"}])", ClusterFormat::kUnknown},
      {"empty", "", ClusterFormat::kUnknown},
      {"binary", std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10), ClusterFormat::kUnknown},
  };
  for (const Case& c : cases) EXPECT_EQ(detect_cluster_format(c.text), c.want) << c.what;
}

// Only the head decides: a NodeList whose first item says `kind: Node` is one, whatever
// follows (here, text that is not even JSON any more).
TEST(ClusterFormat, TheDecisionNeedsOnlyTheHead) {
  std::string text = R"({"apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {}})";
  EXPECT_EQ(detect_cluster_format(text + std::string(3 << 20, 'x')), ClusterFormat::kK8sNodes);
}

TEST(ClusterFormat, UnknownFilesAreRefusedNamingTheFormatsTried) {
  auto c = load_cluster_text("apiVersion: apps/v1\nkind: Deployment\n", "deploy.yaml");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().where.file, "deploy.yaml");
  for (const char* name : {"toposched cluster spec", "Slurm topology.conf", "Slurm topology.yaml", "Topograph model",
                           "Kubernetes nodes", "Kubernetes ResourceSlices"})
    EXPECT_NE(c.error().message.find(name), std::string::npos) << name << " missing in: " << c.error().message;
  EXPECT_NE(c.error().message.find("it starts 'apiVersion: apps/v1'"), std::string::npos) << c.error().message;
}

// load_cluster reads only the head of a file of an unknown format: a 64 MB file of one
// repeated line is refused with the same message as its first line alone.
TEST(ClusterFormat, LargeUnknownFileIsRefusedFromItsHead) {
  const auto path = std::filesystem::temp_directory_path() / "toposched-cluster-format-large.csv";
  {
    std::ofstream out(path, std::ios::binary);
    const std::string line = "node,gpus,rack,row,extra,columns,padding,to,make,it,long\n";
    for (std::size_t n = 0; n < (64u << 20) / line.size(); ++n) out << line;
  }
  auto c = load_cluster(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("not a cluster format toposched reads"), std::string::npos) << c.error().message;
}

TEST(ClusterFormat, KubernetesNodeListIsReadAsACluster) {
  auto c = load_cluster_text(data("k8s-nodes.json"), "nodes.json");
  ASSERT_TRUE(c) << c.error().to_string();
  ASSERT_TRUE(c->find_node("gb-a1"));
  EXPECT_EQ(c->node_gpu_count(*c->find_node("gb-a1")), 4);
  EXPECT_GT(c->switch_count(), 0u);
}

TEST(ClusterFormat, ResourceSlicesGiveNodesAndTheirGpus) {
  auto t = read_resource_slices(data("resource-slices.json"), "slices.json");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 2u);  // cpu-1 lists no GPU
  EXPECT_EQ(t->nodes[0].name, "h100-b1");
  EXPECT_EQ(t->nodes[0].gpu_count, 2);  // the MIG partition is not a GPU
  EXPECT_EQ(t->nodes[0].gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t->nodes[1].gpu_count, 4);
  auto c = load_cluster_text(data("resource-slices.json"), "slices.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->node_count(), 2u);
  EXPECT_EQ(c->gpu_count(), 6u);
  // Bad input: a device that is not a mapping, with its position.
  auto bad = read_resource_slices("items:\n- spec:\n    driver: gpu.nvidia.com\n    nodeName: n1\n    devices: [3]\n",
                                  "bad.yaml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.line, 5);
  EXPECT_NE(bad.error().message.find("expected a device"), std::string::npos);
}

TEST(ClusterFormat, SlurmTopologyYamlTakesTheDefaultTreeAndTheFirstBlocks) {
  auto t = read_slurm_topology_yaml(data("slurm-topology.yaml"), "topology.yaml");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 4u);
  for (const auto& n : t->nodes) {
    EXPECT_FALSE(n.switch_name.empty()) << n.name;
    EXPECT_EQ(n.domain, n.name.starts_with("gb-r1") ? "b1" : "b2") << n.name;
  }
  ASSERT_FALSE(t->warnings.empty());
  EXPECT_NE(t->warnings.back().find("nvl-small"), std::string::npos) << t->warnings.back();
  auto c = load_cluster_text(data("slurm-topology.yaml"), "topology.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->domain_count(), 2u);
  // Errors point into the YAML: a bad hostlist in the second switch.
  auto bad = read_slurm_topology_yaml("- topology: t\n  tree:\n    switches:\n      - switch: s\n        children: a\n"
                                      "      - switch: a\n        nodes: n[1-\n",
                                      "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.file, "t.yaml");
  EXPECT_EQ(bad.error().where.line, 6);
}

}  // namespace
}  // namespace toposched
