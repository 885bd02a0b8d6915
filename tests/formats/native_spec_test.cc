#include "formats/native_spec.h"

#include <gtest/gtest.h>

#include <random>

#include "formats/cluster_source.h"
#include "support/cluster_equal.h"
#include "topology/file_io.h"
#include "topology/presets.h"

namespace toposched {
namespace {

std::string example_path() { return std::string(TOPOSCHED_SOURCE_DIR) + "/examples/cluster-small.yaml"; }

Cluster load_example() {
  auto c = load_cluster(example_path());
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().to_string());
  return std::move(*c);
}

TEST(NativeSpec, ReadsTheDocumentedExample) {
  Cluster c = load_example();
  EXPECT_EQ(c.name(), "example");
  EXPECT_EQ(c.node_count(), 6u);
  EXPECT_EQ(c.gpu_count(), 40u);
  EXPECT_EQ(c.tiers().size(), 2u);
  NodeId v = *c.find_node("v100-01");
  // Hybrid cube-mesh: NV2 pairs twice as fast as NV1 pairs, no NVLink for SYS pairs.
  Path nv1 = c.path(c.node_gpu(v, 0), c.node_gpu(v, 1));
  Path nv2 = c.path(c.node_gpu(v, 0), c.node_gpu(v, 3));
  Path none = c.path(c.node_gpu(v, 0), c.node_gpu(v, 5));
  EXPECT_EQ(c.level_name(nv1), "nvlink");
  EXPECT_DOUBLE_EQ(nv2.bandwidth_GBps, 2 * nv1.bandwidth_GBps);
  EXPECT_EQ(c.level_name(none), "pcie-sys");
  NodeId g1 = *c.find_node("gb-r1-n1"), g2 = *c.find_node("gb-r1-n2");
  EXPECT_EQ(c.level_name(c.path(c.node_gpu(g1, 0), c.node_gpu(g2, 0))), "accel-domain");
  NodeId h = *c.find_node("h100-01");
  Path over = c.path(c.node_gpu(h, 0), c.node_gpu(v, 0));
  EXPECT_EQ(c.level_name(over), "tier:spine");
  // GPU 0 of the V100 node shares a 100G NIC with three others; the 2:1 leaf halves that.
  EXPECT_DOUBLE_EQ(over.bandwidth_GBps, 12.5 / 4 / 2);
}

TEST(NativeSpec, RoundTripsEveryPresetThroughYamlAndJson) {
  std::vector<std::string> specs;
  for (const auto& p : preset_catalog()) specs.push_back(p.name);
  specs.push_back("llama3-24k?pods=2&racks=4");
  specs.push_back("synthetic?nodes=100&gpus_per_node=4&nvlinks=0&fanout=3,2,2");
  for (const auto& s : specs) {
    auto c = build_preset(s);
    ASSERT_TRUE(c) << s;
    for (bool json : {false, true}) {
      std::string text = json ? write_native_json(*c).value() : write_native_yaml(*c);
      auto back = read_native_spec(text, "roundtrip");
      ASSERT_TRUE(back) << s << ": " << back.error().to_string();
      EXPECT_EQ(testing::cluster_difference(*c, *back), "") << s << (json ? " json" : " yaml");
      // And the writer is a fixed point.
      EXPECT_EQ(json ? write_native_json(*back).value() : write_native_yaml(*back), text);
    }
  }
  Cluster ex = load_example();
  auto back = read_native_spec(write_native_yaml(ex), "roundtrip");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(testing::cluster_difference(ex, *back), "");
}

struct BadSpec {
  std::string name;
  std::string text;
  int line;
  int column;
  std::string message;
};

TEST(NativeSpec, ReportsFileLineColumnForBadInput) {
  const std::string type =
      "node_types:\n"
      "  - name: t\n"
      "    gpu: {model: H100, count: 2}\n"
      "    nvlink: {links: 18}\n";
  std::vector<BadSpec> cases = {
      {"yaml syntax", "node_types: [\n", 2, 1, "invalid YAML"},
      {"unknown key", type + "nodes: []\ncolour: red\n", 6, 1, "unknown key 'colour'"},
      {"unknown node type", type + "nodes:\n  - {names: a, type: nope}\n", 6, 22, "unknown node type 'nope'"},
      {"bad hostlist", type + "nodes:\n  - {names: 'a[1-'}\n", 6, 5, "missing required key 'type'"},
      {"bad hostlist range", type + "nodes:\n  - {names: 'a[3-1]', type: t}\n", 6, 16, "runs backwards"},
      {"bad cell", "node_types:\n  - name: t\n    gpu: {model: H100, count: 2}\n    links: [X NV4, NV4 Y]\nnodes: []\n", 4, 20,
       "found 'Y'"},
      {"matrix size", "node_types:\n  - name: t\n    gpu: {model: H100, count: 3}\n    links: [X NV4, NV4 X]\nnodes: []\n", 4, 12,
       "3 GPUs but 'links' has 2 rows"},
      {"asymmetric", "node_types:\n  - name: t\n    gpu: {model: H100, count: 2}\n    links: [X NV4, NV2 X]\nnodes: []\n", 2, 11,
       "not symmetric"},
      {"two leaves",
       type + "nodes:\n  - {names: 'n[1-2]', type: t}\nfabric:\n  tiers: [{name: leaf}]\n  switches:\n"
              "    - {name: a, tier: leaf, nodes: 'n[1-2]'}\n    - {name: b, tier: leaf, nodes: n2}\n",
       11, 36, "under two switches"},
      {"cycle",
       type + "nodes: []\nfabric:\n  tiers: [{name: leaf}, {name: spine}]\n  switches:\n"
              "    - {name: a, tier: spine, parent: b}\n    - {name: b, tier: spine, parent: a}\n",
       9, 14, "cycle"},
      {"unknown switch", type + "nodes: []\nfabric:\n  tiers: [{name: leaf}]\n  switches:\n    - {name: a, tier: leaf, switches: [zz]}\n",
       9, 39, "unknown switch 'zz'"},
      {"domain unknown node", type + "nodes: [{names: n1, type: t}]\naccelerator_domains:\n  - {name: d, nodes: 'n[1-2]'}\n", 7,
       22, "node 'n2', which is not declared"},
      {"number", type + "nodes: []\nfabric:\n  tiers: [{name: leaf, oversubscription: lots}]\n", 7, 42,
       "expected 'oversubscription' to be a number, found 'lots'"},
      {"version", "version: 2\n" + type + "nodes: []\n", 1, 10, "unsupported spec version 2"},
      {"not a map", "- a\n- b\n", 1, 1, "expected the cluster spec (a mapping)"},
  };
  for (const auto& c : cases) {
    auto r = read_native_spec(c.text, "spec.yaml");
    ASSERT_FALSE(r) << c.name;
    EXPECT_EQ(r.error().where.file, "spec.yaml") << c.name;
    EXPECT_EQ(r.error().where.line, c.line) << c.name << ": " << r.error().to_string();
    EXPECT_EQ(r.error().where.column, c.column) << c.name << ": " << r.error().to_string();
    EXPECT_NE(r.error().message.find(c.message), std::string::npos) << c.name << ": " << r.error().to_string();
  }
}

// Truncated and byte-corrupted copies of the example: a clean error or a valid cluster,
// never a crash (this suite runs under AddressSanitizer).
TEST(NativeSpec, SurvivesTruncationAndCorruption) {
  auto text = read_text_file(example_path());
  ASSERT_TRUE(text);
  std::mt19937 rng(7);
  int errors = 0, valid = 0;
  for (std::size_t cut = 0; cut < text->size(); cut += 7) {
    auto r = read_native_spec(text->substr(0, cut), "cut.yaml");
    (r ? valid : errors)++;
    if (!r) {
      EXPECT_FALSE(r.error().message.empty());
    }
  }
  const std::string junk = "[]{}:,-#&*!|>'\"%@`\t\n \x01\xff";
  for (int i = 0; i < 600; ++i) {
    std::string copy = *text;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) copy[rng() % copy.size()] = junk[rng() % junk.size()];
    auto r = read_native_spec(copy, "corrupt.yaml");
    (r ? valid : errors)++;
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(valid, 0);
}

TEST(ClusterSource, LoadsPresetsAndFilesAndExplainsMistakes) {
  EXPECT_TRUE(load_cluster("preset:dgx-a100?nodes=4"));
  auto missing = load_cluster("dgx-h100");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("preset:dgx-h100"), std::string::npos);
  auto dir = load_cluster(TOPOSCHED_SOURCE_DIR);
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().message.find("is a directory"), std::string::npos);
}

// `gpu.power` overrides a node type's per-GPU power figures (sim/power.h); it round-trips,
// and a bad value is reported where it is.
constexpr const char* kPowerSpec = R"(name: powered
node_types:
  - name: capped
    gpu: {model: H100-SXM5, count: 8, power: {busy_w: 500, idle_w: 60}}
    nvlink: {links: 18}
nodes:
  - {names: "n[1-2]", type: capped}
)";

TEST(NativeSpec, GpuPowerOverridesReadAndRoundTrip) {
  auto c = read_native_spec(kPowerSpec, "power.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  const NodeType& t = c->node_type_at(NodeTypeId(0));
  EXPECT_DOUBLE_EQ(t.power.busy_w, 500);
  EXPECT_DOUBLE_EQ(t.power.comm_w, 0);  // left to the product's default
  EXPECT_DOUBLE_EQ(t.power.idle_w, 60);
  for (bool json : {false, true}) {
    auto text = json ? write_native_json(*c) : write_native_yaml(*c);
    ASSERT_TRUE(text) << text.error().to_string();
    auto back = read_native_spec(*text, "roundtrip");
    ASSERT_TRUE(back) << back.error().to_string();
    EXPECT_EQ(testing::cluster_difference(*c, *back), "");
  }
}

TEST(NativeSpec, GpuPowerErrorsSayWhereAndWhat) {
  std::string bad = kPowerSpec;
  bad.replace(bad.find("idle_w: 60"), 10, "idle_w: -5");
  auto c = read_native_spec(bad, "power.yaml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().to_string().find("power.yaml:4:"), std::string::npos) << c.error().to_string();
  EXPECT_NE(c.error().message.find("expected a power in watts"), std::string::npos) << c.error().message;
  std::string typo = kPowerSpec;
  typo.replace(typo.find("busy_w"), 6, "peak_w");
  auto t = read_native_spec(typo, "power.yaml");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("peak_w"), std::string::npos) << t.error().message;
}

// host_memory_gb: the node's system memory (the router's host tier is a share of it); optional,
// written only when known, checked where given.
TEST(NativeSpec, HostMemoryReadsRoundTripsAndIsChecked) {
  std::string spec = kPowerSpec;
  spec.replace(spec.find("    nvlink: {links: 18}"), 0, "    host_memory_gb: 2048\n");
  auto c = read_native_spec(spec, "host.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_DOUBLE_EQ(c->node_type_at(NodeTypeId(0)).host_memory_gb, 2048);
  const std::string text = write_native_yaml(*c);
  EXPECT_NE(text.find("host_memory_gb"), std::string::npos);
  auto back = read_native_spec(text, "roundtrip");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(testing::cluster_difference(*c, *back), "");
  // Unknown (not given) stays 0 and is not written.
  auto plain = read_native_spec(kPowerSpec, "power.yaml");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->node_type_at(NodeTypeId(0)).host_memory_gb, 0);
  EXPECT_EQ(write_native_yaml(*plain).find("host_memory_gb"), std::string::npos);
  for (const char* bad : {"-1", "0", "abc"}) {
    std::string wrong = spec;
    wrong.replace(wrong.find("2048"), 4, bad);
    auto e = read_native_spec(wrong, "host.yaml");
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().to_string().find("host.yaml:5:21:"), std::string::npos) << e.error().to_string();
  }
  // The DGX presets carry their datasheets' 2 TB.
  auto dgx = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(dgx);
  EXPECT_DOUBLE_EQ(dgx->node_type_at(NodeTypeId(0)).host_memory_gb, 2048);
}

}  // namespace
}  // namespace toposched
