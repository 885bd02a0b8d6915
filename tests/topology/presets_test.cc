#include "topology/presets.h"

#include <gtest/gtest.h>

#include <map>

namespace toposched {
namespace {

Cluster preset(std::string_view spec) {
  auto c = build_preset(spec);
  EXPECT_TRUE(c.has_value()) << spec << ": " << (c ? "" : c.error().to_string());
  return std::move(*c);
}

TEST(Presets, CatalogListsTheReferenceClusters) {
  std::vector<std::string> names;
  for (const auto& p : preset_catalog()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72", "pcie-l40s",
                                             "llama3-24k", "synthetic"}));
  for (const auto& p : preset_catalog()) {
    EXPECT_FALSE(p.description.empty());
    EXPECT_FALSE(p.params.empty()) << p.name;
  }
}

TEST(Presets, DgxH100SizedByNodes) {
  Cluster c = preset("dgx-h100?nodes=64");
  EXPECT_EQ(c.node_count(), 64u);
  EXPECT_EQ(c.gpu_count(), 512u);
  EXPECT_EQ(c.hostlist(), "dgx-h100-[001-064]");
  ASSERT_EQ(c.tiers().size(), 2u);  // two SUs of 32 under one spine
  EXPECT_EQ(c.tiers()[0].name, "leaf");
  NodeId n1 = *c.find_node("dgx-h100-001");
  EXPECT_EQ(c.level_name(c.path(c.node_gpu(n1, 0), c.node_gpu(n1, 7))), "nvlink");
  EXPECT_DOUBLE_EQ(c.path(c.node_gpu(n1, 0), c.node_gpu(n1, 7)).bandwidth_GBps, 450);
  NodeId n33 = *c.find_node("dgx-h100-033");
  Path cross = c.path(c.node_gpu(n1, 0), c.node_gpu(n33, 0));
  EXPECT_EQ(c.level_name(cross), "tier:spine");
  EXPECT_DOUBLE_EQ(cross.bandwidth_GBps, 50);  // one 400G NIC per GPU
}

TEST(Presets, Gb200RackIsOneNvlinkDomain) {
  Cluster c = preset("gb200-nvl72?racks=8");
  EXPECT_EQ(c.node_count(), 144u);
  EXPECT_EQ(c.gpu_count(), 576u);
  EXPECT_EQ(c.domain_count(), 8u);
  NodeId a = *c.find_node("gb200-r01-n01"), b = *c.find_node("gb200-r01-n02"), other = *c.find_node("gb200-r02-n01");
  Path tray = c.path(c.node_gpu(a, 0), c.node_gpu(a, 1));
  Path rack = c.path(c.node_gpu(a, 0), c.node_gpu(b, 0));
  Path racks = c.path(c.node_gpu(a, 0), c.node_gpu(other, 0));
  EXPECT_EQ(c.level_name(tray), "nvlink");
  EXPECT_EQ(c.level_name(rack), "accel-domain");
  EXPECT_EQ(racks.level, PathLevel::kTier);
  EXPECT_GE(tray.bandwidth_GBps, rack.bandwidth_GBps);
  EXPECT_GT(rack.bandwidth_GBps, racks.bandwidth_GBps);
  EXPECT_LT(rack.latency_us, racks.latency_us);
}

TEST(Presets, Llama3ClusterHasPublishedShape) {
  Cluster c = preset("llama3-24k");
  EXPECT_EQ(c.gpu_count(), 24576u);
  EXPECT_EQ(c.node_count(), 3072u);
  ASSERT_EQ(c.tiers().size(), 3u);
  EXPECT_EQ(c.tiers()[1].oversubscription, 7);
  NodeId a = *c.find_node("p1-r001-s1"), same_pod = *c.find_node("p1-r192-s2"), other_pod = *c.find_node("p2-r001-s1");
  Path in_pod = c.path(c.node_gpu(a, 0), c.node_gpu(same_pod, 0));
  Path across = c.path(c.node_gpu(a, 0), c.node_gpu(other_pod, 0));
  EXPECT_EQ(c.level_name(in_pod), "tier:pod");
  EXPECT_EQ(c.level_name(across), "tier:aggregation");
  EXPECT_NEAR(across.bandwidth_GBps, in_pod.bandwidth_GBps / 7, 1e-9);
}

TEST(Presets, PcieL40sPrefersSameSocket) {
  Cluster c = preset("pcie-l40s");
  NodeId n = NodeId(0);
  EXPECT_EQ(c.level_name(c.path(c.node_gpu(n, 0), c.node_gpu(n, 1))), "pcie-pix");
  EXPECT_EQ(c.level_name(c.path(c.node_gpu(n, 0), c.node_gpu(n, 2))), "pcie-node");
  EXPECT_EQ(c.level_name(c.path(c.node_gpu(n, 0), c.node_gpu(n, 4))), "pcie-sys");
}

// Closer levels are never slower nor later, within the intra-node PCIe classes and from
// NVLink outward through domains and fabric tiers. (PCIe SYS can legitimately be slower
// than the network on PCIe-only servers, so the two families are ordered separately.)
void check_ordering(const Cluster& c, std::string_view name) {
  std::map<int, std::pair<double, double>> best;  // distance -> (min bw, max latency)
  auto record = [&](GpuId a, GpuId b) {
    Path p = c.path(a, b);
    auto [it, fresh] = best.try_emplace(p.distance(), p.bandwidth_GBps, p.latency_us);
    if (!fresh) {
      it->second.first = std::min(it->second.first, p.bandwidth_GBps);
      it->second.second = std::max(it->second.second, p.latency_us);
    }
  };
  // Every pair inside the first node, and the first GPU against a sample of GPUs.
  NodeId first(0);
  for (int i = 0; i < c.node_gpu_count(first); ++i)
    for (int j = 0; j < c.node_gpu_count(first); ++j) record(c.node_gpu(first, i), c.node_gpu(first, j));
  std::size_t step = std::max<std::size_t>(1, c.gpu_count() / 5000);
  for (std::size_t g = 0; g < c.gpu_count(); g += step) record(GpuId(0), GpuId(static_cast<std::uint32_t>(g)));
  record(GpuId(0), GpuId(static_cast<std::uint32_t>(c.gpu_count() - 1)));
  auto family = [](int d) { return d >= static_cast<int>(PathLevel::kPciePix) && d <= static_cast<int>(PathLevel::kPcieSys); };
  for (auto a = best.begin(); a != best.end(); ++a)
    for (auto b = std::next(a); b != best.end(); ++b) {
      if (a->first == 0 || family(a->first) != family(b->first)) continue;
      EXPECT_GE(a->second.first, b->second.first) << name << ": distance " << a->first << " vs " << b->first;
      EXPECT_LE(a->second.second, b->second.second) << name << ": distance " << a->first << " vs " << b->first;
    }
  EXPECT_GE(best.size(), 3u) << name;
}

TEST(Presets, PathLevelsAreOrderedOnEveryPreset) {
  for (const auto& p : preset_catalog()) check_ordering(preset(p.name), p.name);
  check_ordering(preset("synthetic?nodes=512&fanout=4,4,4&nvlinks=0"), "synthetic pcie");
}

TEST(Presets, BuildsHundredThousandGpus) {
  Cluster c = preset("synthetic?nodes=12500");
  EXPECT_EQ(c.gpu_count(), 100000u);
  Cluster d = preset("dgx-h100?nodes=12500");
  EXPECT_EQ(d.gpu_count(), 100000u);
  EXPECT_EQ(d.tiers().size(), 3u);
  Path far = d.path(GpuId(0), GpuId(99999));
  EXPECT_EQ(d.level_name(far), "tier:core");
}

TEST(Presets, RejectsUnknownNamesKeysAndValues) {
  auto unknown = build_preset("dgx-z100");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown preset 'dgx-z100'; known: dgx-a100"), std::string::npos);
  auto key = build_preset("dgx-h100?gpus=8");
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message.find("no parameter 'gpus'"), std::string::npos);
  auto value = build_preset("dgx-h100?nodes=zero");
  ASSERT_FALSE(value);
  EXPECT_NE(value.error().message.find("must be an integer"), std::string::npos);
  EXPECT_FALSE(build_preset("dgx-h100?nodes=0"));
  EXPECT_FALSE(build_preset("dgx-h100?nodes"));
  EXPECT_FALSE(build_preset("synthetic?fanout=4,,2"));
  EXPECT_EQ(build_preset("dgx-h100?nodes=2&nic_gbit=200")->path(GpuId(0), GpuId(8)).bandwidth_GBps, 25);
}

}  // namespace
}  // namespace toposched
