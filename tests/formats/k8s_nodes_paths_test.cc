// read_k8s_nodes has two parsers (formats/k8s_nodes.h): simdjson On Demand for a JSON
// NodeList, yaml-cpp for everything that path declines. These tests hold them to one result:
// on every input the fast path either gives exactly what the yaml-cpp path gives (nodes,
// switches, tiers, warnings, the positions of GPU products) or declines, and every error
// read_k8s_nodes reports is the yaml-cpp path's, with its file:line:col.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "formats/k8s_nodes.h"
#include "topology/file_io.h"
#include "support/test_data.h"

namespace toposched {
namespace {

std::string data(const std::string& name) { return testing::test_data_text("discovery/" + name); }

std::string where(const SourceLocation& l) { return fmt::format("{}:{}:{}", l.file, l.line, l.column); }

// Every field of a DiscoveredTopology, one line each, so a difference shows where it is.
std::vector<std::string> lines_of(const DiscoveredTopology& t) {
  std::vector<std::string> out{"source " + t.source};
  for (const auto& tier : t.tiers) out.push_back("tier " + tier);
  for (const auto& s : t.switches) out.push_back(fmt::format("switch {} {} {}", s.name, s.tier, s.parent));
  for (const auto& n : t.nodes)
    out.push_back(fmt::format("node {} sw={} dom={} sub={} hw={} gpus={} model={} at={} nic={} mem={}", n.name,
                              n.switch_name, n.domain, n.sub_domain, n.hardware != nullptr, n.gpu_count,
                              n.gpu_model, where(n.gpu_model_at), n.nic_gbit, n.host_memory_gb));
  for (const auto& w : t.warnings) out.push_back("warning " + w);
  return out;
}

// The fast path reads `text` and agrees with the yaml-cpp path.
void expect_fast_and_equal(const std::string& text, const std::vector<std::string>& label_map = {}) {
  auto fast = read_k8s_nodes_fast_path(text, "nodes.json", label_map);
  auto slow = read_k8s_nodes_yaml_path(text, "nodes.json", label_map);
  ASSERT_TRUE(slow) << slow.error().to_string();
  ASSERT_TRUE(fast.has_value()) << "the fast path declined";
  EXPECT_EQ(lines_of(*fast), lines_of(*slow));
  auto both = read_k8s_nodes(text, "nodes.json", label_map);
  ASSERT_TRUE(both);
  EXPECT_EQ(lines_of(*both), lines_of(*slow));
}

// The fast path declines `text`, and read_k8s_nodes answers what the yaml-cpp path answers.
void expect_declined_and_same(const std::string& text, const std::vector<std::string>& label_map = {}) {
  EXPECT_FALSE(read_k8s_nodes_fast_path(text, "nodes.json", label_map).has_value()) << text;
  auto slow = read_k8s_nodes_yaml_path(text, "nodes.json", label_map);
  auto both = read_k8s_nodes(text, "nodes.json", label_map);
  ASSERT_EQ(bool(slow), bool(both)) << text;
  if (slow)
    EXPECT_EQ(lines_of(*both), lines_of(*slow));
  else
    EXPECT_EQ(both.error().to_string(), slow.error().to_string());
}

std::string node_list(const std::string& items) { return "{\"kind\": \"NodeList\", \"items\": [" + items + "]}\n"; }

std::string node(const std::string& name, const std::string& labels) {
  return fmt::format("{{\"metadata\": {{\"name\": \"{}\", \"labels\": {{{}}}}}}}", name, labels);
}

TEST(K8sNodesPaths, FixtureIsReadByTheFastPathWithTheSameResult) {
  expect_fast_and_equal(data("k8s-nodes.json"));
  expect_fast_and_equal(data("k8s-nodes.json"), {"example.com/rack=tier-0"});
  expect_fast_and_equal(data("k8s-nodes.json"), {"example.com/rack=leaf", "nvidia.com/gpu.clique=tier-1"});
}

TEST(K8sNodesPaths, ProductPositionsWarningsAndCompactJsonAgree) {
  // Positions of the GPU product after multi-byte UTF-8 on its line, CRLF line ends, compact
  // JSON, a switch two nodes put under different parents, a CPU node that is skipped.
  std::string text = node_list(
      "\n" + node("a1", "\"note\": \"caf\xC3\xA9\", \"nvidia.com/gpu.product\": \"NVIDIA-H100-80GB-HBM3\","
                        "\"network.topology.nvidia.com/leaf\": \"l1\", \"network.topology.nvidia.com/spine\": \"s1\"") +
      ",\r\n" + node("a2", "\"network.topology.nvidia.com/leaf\":\"l1\",\"network.topology.nvidia.com/spine\":\"s2\"") +
      ",\n" + node("cpu1", "\"kubernetes.io/os\": \"linux\"") + ",\n" +
      node("a3", "\"nvidia.com/gpu.count\": \"4\", \"nvidia.com/gpu.product\": \"NVIDIA-GB200\","
                 " \"nvidia.com/gpu.clique\": \"d1\", \"accelerator.topograph.run/sub-domain\": \"t1\""));
  expect_fast_and_equal(text);
  auto t = read_k8s_nodes(text, "nodes.json");
  ASSERT_TRUE(t);
  EXPECT_EQ(where(t->nodes[0].gpu_model_at), "nodes.json:2:83");  // the value's quote, in bytes
  EXPECT_EQ(t->warnings.size(), 2u);
  // Empty label values are skipped, and a later key of the same role is taken instead.
  expect_fast_and_equal(node_list(node("b1", "\"fabric.topograph.run/tier-0\": \"\", \"nvidia.com/gpu.count\": \"8\","
                                             " \"network.topology.nvidia.com/leaf\": \"x\"")));
  // Values the reader ignores may be anything JSON allows.
  expect_fast_and_equal(node_list(
      "{\"apiVersion\": \"v1\", \"status\": {\"images\": [{\"names\": [\"a\", \"b\"], \"sizeBytes\": 12}], \"x\": null,"
      " \"y\": [true, false, -1.5e3]}, " + node("c1", "\"nvidia.com/gpu.count\": \"2\"").substr(1)));
}

// A Node with labels and a status, as `kubectl get nodes -o json` writes it.
std::string node_with_status(const std::string& name, const std::string& labels, const std::string& status) {
  return fmt::format("{{\"metadata\": {{\"name\": \"{}\", \"labels\": {{{}}}}}, \"status\": {}}}", name, labels,
                     status);
}

TEST(K8sNodesPaths, MemoryCapacityIsReadAlikeByBothPaths) {
  const std::string gpus = "\"nvidia.com/gpu.count\": \"8\"";
  // kubelet writes MemTotal in Ki; other quantity forms read the same way on both paths.
  const std::string text = node_list(
      node_with_status("m1", gpus, "{\"capacity\": {\"cpu\": \"224\", \"memory\": \"2113442596Ki\", "
                                   "\"nvidia.com/gpu\": \"8\"}, \"allocatable\": {\"memory\": \"1Ki\"}}") +
      ",\n" + node_with_status("m2", gpus, "{\"capacity\": {\"memory\": \"2Ti\"}}") +
      ",\n" + node_with_status("m3", gpus, "{\"conditions\": [], \"capacity\": {\"memory\": \"1.5e12\"}}") +
      ",\n" + node_with_status("m4", gpus, "{\"capacity\": {\"pods\": \"110\"}}") +
      ",\n" + node_with_status("m5", gpus, "[]") + ",\n" + node_with_status("m6", gpus, "{\"capacity\": 7}"));
  expect_fast_and_equal(text);
  auto t = read_k8s_nodes(text, "nodes.json");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 6u);
  EXPECT_EQ(t->nodes[0].host_memory_gb, 2164);  // 2,164,165,218,304 bytes: whole GB, rounded down
  EXPECT_EQ(t->nodes[1].host_memory_gb, 2199);
  EXPECT_EQ(t->nodes[2].host_memory_gb, 1500);
  for (std::size_t i = 3; i < 6; ++i) EXPECT_EQ(t->nodes[i].host_memory_gb, 0) << i;  // none given: unknown
  // A number is text to yaml-cpp (the fast path leaves it to that path); null is no value.
  expect_declined_and_same(node_list(node_with_status("n1", gpus, "{\"capacity\": {\"memory\": 4000000000}}")));
  auto number = read_k8s_nodes(node_list(node_with_status("n1", gpus, "{\"capacity\": {\"memory\": 4000000000}}")),
                               "nodes.json");
  ASSERT_TRUE(number);
  EXPECT_EQ(number->nodes[0].host_memory_gb, 4);
  auto null = read_k8s_nodes(node_list(node_with_status("n1", gpus, "{\"capacity\": {\"memory\": null}}")), "n.json");
  ASSERT_TRUE(null);
  EXPECT_EQ(null->nodes[0].host_memory_gb, 0);
}

TEST(K8sNodesPaths, DevicePluginCapacityCountsGpusWhereNoLabelDoes) {
  const std::string leaf = "\"network.topology.nvidia.com/leaf\": \"l1\"";
  const std::string text = node_list(
      node_with_status("p1", leaf, "{\"capacity\": {\"nvidia.com/gpu\": \"4\"}}") + ",\n" +
      node_with_status("p2", "", "{\"capacity\": {\"memory\": \"1Ti\", \"nvidia.com/gpu\": \"8\"}}") + ",\n" +
      // GPU Feature Discovery's label wins: with time-slicing the capacity counts replicas.
      node_with_status("p3", "\"nvidia.com/gpu.count\": \"8\"", "{\"capacity\": {\"nvidia.com/gpu\": \"32\"}}") +
      ",\n" + node_with_status("p4", leaf, "{\"capacity\": {\"nvidia.com/gpu\": \"80\"}}") + ",\n" +
      node_with_status("cpu1", "", "{\"capacity\": {\"nvidia.com/gpu\": \"0\", \"memory\": \"512Gi\"}}"));
  expect_fast_and_equal(text);
  auto t = read_k8s_nodes(text, "nodes.json");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 4u);  // cpu1: no GPU, no topology label: skipped
  EXPECT_EQ(t->nodes[0].gpu_count, 4);
  EXPECT_EQ(t->nodes[1].gpu_count, 8);  // a GPU node by its capacity alone, kept
  EXPECT_EQ(t->nodes[2].gpu_count, 8);
  EXPECT_EQ(t->nodes[3].gpu_count, 0);  // 80: replicas, not GPUs; warned
  ASSERT_EQ(t->warnings.size(), 2u);
  EXPECT_NE(t->warnings[0].find("'p4'"), std::string::npos) << t->warnings[0];
  EXPECT_NE(t->warnings[1].find("cpu1"), std::string::npos) << t->warnings[1];
  for (const std::string bad : {"\"2.5\"", "\"-1\"", "\"four\""}) {
    const std::string b = node_list("\n" + node_with_status("n1", leaf, "{\"capacity\":\n {\"nvidia.com/gpu\": " + bad + "}}"));
    expect_declined_and_same(b);
    auto r = read_k8s_nodes(b, "nodes.json");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(where(r.error().where), "nodes.json:3:21") << r.error().to_string();
    EXPECT_NE(r.error().message.find("nvidia.com/gpu"), std::string::npos) << r.error().message;
  }
}

// The labels EKS and GKE put on GPU nodes: EKS's network-node-layer-N counts from the top,
// so the deepest one a node has is its leaf (3 layers on one node, 4 on another); GKE's
// sub-block is the leaf under its block, and on A4X also the NVLink domain; EKS's UltraServer
// id is the NVLink domain. A Topograph label on a node wins over the cloud's.
TEST(K8sNodesPaths, EksAndGkeTopologyLabels) {
  const std::string eks3 = R"("topology.k8s.aws/network-node-layer-1": "nn-top", "topology.k8s.aws/network-node-layer-2": "nn-mid",
                              "topology.k8s.aws/network-node-layer-3": "nn-leaf3", "nvidia.com/gpu.count": "8")";
  const std::string eks4 = R"("topology.k8s.aws/network-node-layer-1": "nn-top", "topology.k8s.aws/network-node-layer-2": "nn-mid",
                              "topology.k8s.aws/network-node-layer-3": "nn-agg", "topology.k8s.aws/network-node-layer-4": "nn-leaf4",
                              "topology.k8s.aws/ultraserver-id": "us-1", "nvidia.com/gpu.count": "4")";
  const std::string gke = R"("cloud.google.com/gce-topology-block": "blk", "cloud.google.com/gce-topology-subblock": "sb1",
                             "cloud.google.com/gce-topology-host": "h1", "node.kubernetes.io/instance-type": "a3-ultragpu-8g",
                             "nvidia.com/gpu.count": "8")";
  const std::string a4x = R"("cloud.google.com/gce-topology-block": "blk", "cloud.google.com/gce-topology-subblock": "sb2",
                             "node.kubernetes.io/instance-type": "a4x-highgpu-4g", "nvidia.com/gpu.count": "4")";
  const std::string both = R"("network.topology.nvidia.com/leaf": "tg-leaf", "topology.k8s.aws/network-node-layer-3": "nn-leaf3",
                              "nvidia.com/gpu.count": "8")";
  const std::string text = node_list(node("e3", eks3) + ",\n" + node("e4", eks4) + ",\n" + node("g1", gke) + ",\n" +
                                     node("g2", a4x) + ",\n" + node("t1", both));
  expect_fast_and_equal(text);
  auto t = read_k8s_nodes(text, "nodes.json");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 5u);
  EXPECT_EQ(t->nodes[0].switch_name, "nn-leaf3");
  EXPECT_EQ(t->nodes[1].switch_name, "nn-leaf4");
  EXPECT_EQ(t->nodes[1].domain, "us-1");
  EXPECT_EQ(t->nodes[0].domain, "");
  EXPECT_EQ(t->nodes[2].switch_name, "sb1");
  EXPECT_EQ(t->nodes[2].domain, "");  // an A3 Ultra sub-block is a rack, not an NVLink domain
  EXPECT_EQ(t->nodes[3].switch_name, "sb2");
  EXPECT_EQ(t->nodes[3].domain, "sb2");
  EXPECT_EQ(t->nodes[4].switch_name, "tg-leaf");  // Topograph's label wins; EKS's layers are not mixed in
  std::map<std::string, std::pair<int, std::string>> sw;
  for (const auto& s : t->switches) sw[s.name] = {s.tier, s.parent};
  EXPECT_EQ(sw["nn-leaf3"], (std::pair<int, std::string>{0, "nn-mid"}));
  EXPECT_EQ(sw["nn-leaf4"], (std::pair<int, std::string>{0, "nn-agg"}));
  // Tiers count from the node up, as AWS's own NetworkNodes are read (aws_topology.h): nn-mid
  // is tier 1 above the 3-layer node and tier 2 above the 4-layer one, so it is two switches.
  EXPECT_EQ(sw["nn-agg"], (std::pair<int, std::string>{1, "nn-mid@tier-2"}));
  EXPECT_EQ(sw["nn-mid"], (std::pair<int, std::string>{1, "nn-top"}));
  EXPECT_EQ(sw["nn-mid@tier-2"], (std::pair<int, std::string>{2, "nn-top@tier-3"}));
  EXPECT_EQ(sw["sb1"], (std::pair<int, std::string>{0, "blk"}));
  EXPECT_EQ(sw["blk"].first, 1);
  EXPECT_EQ(builtin_label_tier("cloud.google.com/gce-topology-block"), 1);
  EXPECT_EQ(builtin_label_tier("topology.k8s.aws/network-node-layer-3"), std::nullopt);  // depends on the node
  EXPECT_TRUE(builtin_label_is_domain("topology.k8s.aws/ultraserver-id"));
}

TEST(K8sNodesPaths, BadMemoryIsRefusedAtItsPosition) {
  const std::string gpus = "\"nvidia.com/gpu.count\": \"8\"";
  for (const std::string memory : {"\"2TB\"", "\"-1Gi\"", "\"\"", "\" 2Gi\"", "[1]", "{\"a\": 1}"}) {
    const std::string text =
        node_list("\n" + node_with_status("n1", gpus, "{\"capacity\":\n {\"memory\": " + memory + "}}"));
    expect_declined_and_same(text);
    auto r = read_k8s_nodes(text, "nodes.json");
    ASSERT_FALSE(r) << memory;
    EXPECT_EQ(where(r.error().where), "nodes.json:3:13") << memory << ": " << r.error().to_string();
    EXPECT_NE(r.error().message.find("status.capacity.memory"), std::string::npos) << r.error().message;
  }
}

TEST(K8sNodesPaths, ErrorsComeFromTheYamlPathWithTheirPosition) {
  const std::vector<std::string> bad = {
      node_list(node("", "")),                                                 // empty name
      node_list(node("n1", "") + "," + node("n1", "")),                       // a node twice
      node_list(node("n1", "\"nvidia.com/gpu.count\": \"65\"")),               // GPU count out of range
      node_list(node("n1", "\"nvidia.com/gpu.count\": 8")),                    // a number: yaml-cpp reads "8"
      node_list(node("n1", "\"nvidia.com/gpu.product\": {\"a\": 1}")),         // not a string
      node_list("{\"metadata\": {\"labels\": {}}}"),                           // no name
      node_list("{\"metadata\": {\"name\": \"n1\", \"labels\": []}}"),          // labels not a mapping
      node_list("{\"metadata\": {\"name\": \"n1\", \"name\": \"n2\"}}"),        // a repeated key
      node_list("{\"metadata\": {\"name\": \"n1\"}, \"status\": {\"a\": 1, \"a\": 2}}"),  // repeated, unused
      node_list(node("n1", "")) + "{}",                                         // a second document
      node_list(node("n1", "")) + ",,,\n",                                      // trailing commas
      "{\"items\": [" + node("n1", "\"x\": \"\\q\""),                          // bad escape, truncated
      node_list("{\"metadata\": {\"name\": \"n1\"}, \"status\": {\"x\": \"\\q\"}}"),  // bad escape, unused value
      "{\"items\": 3}",                                                         // items not a list
      "{\"kind\": \"Node\"}",                                                   // neither items nor metadata
      node_list(node("n\xff", "")),                                             // not UTF-8
  };
  for (const auto& text : bad) {
    expect_declined_and_same(text);
    auto r = read_k8s_nodes(text, "nodes.json");
    if (text.find("gpu.count\": 8") != std::string::npos) continue;  // valid: the yaml-cpp path reads it
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().where.file, "nodes.json") << r.error().to_string();
    EXPECT_GT(r.error().where.line, 0) << r.error().to_string();
  }
}

TEST(K8sNodesPaths, InputsTheFastPathLeavesToYamlCpp) {
  // YAML, one Node, \u escapes (yaml-cpp encodes surrogate halves alone), a lone CR.
  expect_declined_and_same("items:\n- metadata: {name: n1, labels: {nvidia.com/gpu.count: '8'}}\n");
  expect_declined_and_same(node("n1", "\"nvidia.com/gpu.count\": \"8\""));
  expect_declined_and_same(node_list(node("n\\u00e9", "\"nvidia.com/gpu.count\": \"8\"")));
  expect_declined_and_same(node_list(node("n1", "\"nvidia.com/gpu.count\": \"8\"")) + "\r \n");
  // A line break between a key and its colon: JSON, but not a YAML flow mapping's implicit key.
  expect_declined_and_same(node_list("{\"metadata\": {\"name\": \"n1\", \"labels\"\n  : {}}}"));
  EXPECT_FALSE(read_k8s_nodes(node_list("{\"metadata\": {\"name\"\n: \"n1\"}}"), "nodes.json"));
  // A line break after the colon, or inside a value, is read by the fast path.
  expect_fast_and_equal(node_list("{\"metadata\": {\"name\":\n \"n1\", \"labels\": {\"nvidia.com/gpu.count\":\n\"8\"}}}"));
}

TEST(K8sNodesPaths, LargeGeneratedListAgrees) {
  std::string items;
  for (int i = 0; i < 2000; ++i)
    items += fmt::format("{}{}\n", i ? "," : "",
                         node(fmt::format("n{:05d}", i),
                              fmt::format("\"fabric.topograph.run/tier-0\": \"leaf{}\", \"fabric.topograph.run/tier-1\": "
                                          "\"spine{}\", \"nvidia.com/gpu.count\": \"8\", \"nvidia.com/gpu.product\": "
                                          "\"NVIDIA-H100-80GB-HBM3\"",
                                          i / 32, i / 512)));
  expect_fast_and_equal(node_list(items));
}

}  // namespace
}  // namespace toposched
