// Per-node discovery readers: `nvidia-smi topo -m` and NVLink fabric membership, on the
// shared fixtures (tests/data/discovery, see its README) and on hand-made variants of them.
#include <gtest/gtest.h>

#include "formats/nvidia_fabric.h"
#include "formats/nvidia_topo.h"
#include "topology/file_io.h"
#include "topology/hardware.h"
#include "support/test_data.h"

namespace toposched {
namespace {

std::string data(const std::string& name) { return testing::test_data_text("discovery/" + name); }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// ---------------------------------------------------------------- topo -m

TEST(NvidiaTopo, H100NodeIsFullyNVLinkedWithOneIbNicPixPerGpu) {
  TopoMatrixOptions o;
  o.gpu_model = "H100";
  auto m = read_nvidia_topo(data("h100-hgx-13nic.topo"), "h100.topo", o);
  ASSERT_TRUE(m) << m.error().to_string();
  const NodeType& t = m->type;
  EXPECT_EQ(t.gpu_count, 8);
  EXPECT_EQ(t.gpu_model, "H100-SXM5");
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      EXPECT_EQ(t.link(a, b).cls, LinkClass::kNVLink);
      EXPECT_EQ(t.link(a, b).nvlinks, 18);
    }
  EXPECT_TRUE(t.nvswitch);
  EXPECT_DOUBLE_EQ(t.nvlink_GBps_per_link, 25);
  ASSERT_EQ(t.nics.size(), 13u);
  for (int k = 0; k < 8; ++k) {
    const Nic& nic = t.nics[static_cast<std::size_t>(k)];
    EXPECT_EQ(nic.name, "mlx5_ib" + std::to_string(k));
    int pix = 0;
    for (int g = 0; g < 8; ++g)
      if (nic.gpu_affinity[static_cast<std::size_t>(g)] == LinkClass::kPix) {
        ++pix;
        EXPECT_EQ(g, k) << nic.name;
      }
    EXPECT_EQ(pix, 1) << nic.name;
  }
  EXPECT_EQ(t.nics[8].name, "mlx5_eth0");
  EXPECT_EQ(t.nics[0].gpu_affinity[1], LinkClass::kPxb);
  EXPECT_EQ(t.nics[0].gpu_affinity[4], LinkClass::kSys);
  ASSERT_EQ(t.gpu_numa.size(), 8u);
  EXPECT_EQ(t.gpu_numa[0], 0);
  EXPECT_EQ(t.gpu_numa[7], 1);
  ASSERT_EQ(t.gpu_cpu_affinity.size(), 8u);
  EXPECT_EQ(t.gpu_cpu_affinity[5], "56-111,168-223");
  EXPECT_TRUE(m->warnings.empty());
}

TEST(NvidiaTopo, Gb200TrayHasFourGpusAndLegendNames) {
  TopoMatrixOptions o;
  o.gpu_model = "GB200";
  auto m = read_nvidia_topo(data("gb200-4gpu.topo"), "gb200.topo", o);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->type.gpu_count, 4);
  EXPECT_EQ(m->type.link(0, 3).nvlinks, 18);
  EXPECT_DOUBLE_EQ(m->type.nvlink_GBps_per_link, 50);
  ASSERT_EQ(m->type.nics.size(), 8u);
  EXPECT_EQ(m->type.nics[7].name, "mlx5_7");
  EXPECT_EQ(m->type.nics[0].gpu_affinity[0], LinkClass::kSys);
  // "NUMA Affinity" 0,2-17 -> the first NUMA node.
  EXPECT_EQ(m->type.gpu_numa[0], 0);
  EXPECT_EQ(m->type.gpu_numa[2], 1);
}

TEST(NvidiaTopo, SpacesAndTabsGiveTheSameModel) {
  std::string tabs = data("h100-hgx-13nic.topo");
  std::string spaces = replace_all(tabs, "\t", "    ");
  auto a = read_nvidia_topo(tabs, "tabs");
  auto b = read_nvidia_topo(spaces, "spaces");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->type, b->type);
}

TEST(NvidiaTopo, HybridCubeMeshKeepsOnlyLinkedPairs) {
  TopoMatrixOptions o;
  o.gpu_model = "V100";
  auto m = read_nvidia_topo(data("dgx1-v100.topo"), "dgx1.topo", o);
  ASSERT_TRUE(m) << m.error().to_string();
  const NodeType& t = m->type;
  EXPECT_FALSE(t.nvswitch);
  EXPECT_EQ(t.link(0, 1), (GpuLink{LinkClass::kNVLink, 1}));
  EXPECT_EQ(t.link(0, 3), (GpuLink{LinkClass::kNVLink, 2}));
  EXPECT_EQ(t.link(0, 5), (GpuLink{LinkClass::kSys, 0}));
  EXPECT_EQ(t.nics.size(), 4u);
  EXPECT_EQ(t.nics[1].name, "mlx5_2");  // device-named columns, kept in header order
  EXPECT_EQ(t.nics[1].gpu_affinity[4], LinkClass::kPix);
  // Each V100 uses all of its 6 NVLinks.
  for (int g = 0; g < 8; ++g) {
    int links = 0;
    for (int h = 0; h < 8; ++h) links += t.link(g, h).nvlinks;
    EXPECT_EQ(links, 6) << "GPU" << g;
  }
  EXPECT_TRUE(t.gpu_numa.empty());  // no NUMA Affinity column
}

// Without a model the NVLink count per GPU names the generation, and a warning says so.
bool warns(const TopoMatrix& m, const std::string& text) {
  for (const auto& w : m.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

TEST(NvidiaTopoInference, HybridCubeMeshIsV100WithPcieGen3) {
  auto m = read_nvidia_topo(data("dgx1v-dlperf.topo"), "dgx1v.topo");
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->type.gpu_model, "V100-SXM2");
  EXPECT_DOUBLE_EQ(m->type.pcie_GBps, pcie_GBps(3, 16));
  EXPECT_DOUBLE_EQ(m->type.gpu_memory_gb, 32);
  EXPECT_FALSE(m->type.nvswitch);
  EXPECT_TRUE(warns(*m, "inferred V100 from 6 NVLinks per GPU")) << (m->warnings.empty() ? "" : m->warnings[0]);
  // The project's own DGX-1V file (four NICs) reads the same way.
  auto own = read_nvidia_topo(data("dgx1-v100.topo"), "dgx1.topo");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->type.gpu_model, "V100-SXM2");
}

TEST(NvidiaTopoInference, Nv12IsA100AndNv18IsH100) {
  auto a100 = read_nvidia_topo(data("dgx-a100.topo"), "dgx-a100.topo");
  ASSERT_TRUE(a100) << a100.error().to_string();
  EXPECT_EQ(a100->type.gpu_model, "A100-SXM4");
  EXPECT_DOUBLE_EQ(a100->type.pcie_GBps, pcie_GBps(4, 16));
  EXPECT_TRUE(a100->type.nvswitch);
  EXPECT_TRUE(warns(*a100, "inferred A100 from 12 NVLinks per GPU"));
  auto h100 = read_nvidia_topo(data("h100-hgx-13nic.topo"), "h100.topo");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->type.gpu_model, "H100-SXM5");
  EXPECT_DOUBLE_EQ(h100->type.pcie_GBps, pcie_GBps(5, 16));
  EXPECT_TRUE(warns(*h100, "inferred H100 from 18 NVLinks per GPU"));
  EXPECT_TRUE(warns(*h100, "H200 and B200 look the same"));
}

TEST(NvidiaTopoInference, GivenModelWinsAndNoNvlinkIsAnAssumption) {
  TopoMatrixOptions o;
  o.gpu_model = "A100";
  auto given = read_nvidia_topo(data("dgx1v-dlperf.topo"), "dgx1v.topo", o);
  ASSERT_TRUE(given);
  EXPECT_EQ(given->type.gpu_model, "A100-SXM4");
  EXPECT_TRUE(given->warnings.empty());
  const std::string pcie_only =
      "        GPU0    GPU1    mlx5_0\n"
      "GPU0     X      SYS     PIX\n"
      "GPU1    SYS      X      SYS\n"
      "mlx5_0  PIX     SYS      X \n";
  auto m = read_nvidia_topo(pcie_only, "pcie.topo");
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->type.gpu_model, "H100-SXM5");
  EXPECT_TRUE(warns(*m, "no NVLink: assumed H100"));
}

TEST(NvidiaTopoInference, LinkCountsPerGeneration) {
  auto full = [](int n, int k) {
    std::vector<int> v(static_cast<std::size_t>(n * n), k);
    for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i * n + i)] = 0;
    return v;
  };
  EXPECT_EQ(infer_gpu_model(full(16, 6), 16).model, "V100");  // DGX-2: NV6 through NVSwitch
  EXPECT_EQ(infer_gpu_model(full(4, 4), 4).model, "A100");    // HGX A100 4-GPU: 3 x NV4 direct
  EXPECT_EQ(infer_gpu_model(full(4, 18), 4).model, "H100");   // GB200 tray looks like Hopper
  EXPECT_EQ(infer_gpu_model(full(8, 8), 8).model, "");        // H800/A800: cannot tell
  EXPECT_EQ(infer_gpu_model(full(8, 0), 8).model, "");
}

TEST(NvidiaTopo, PerLinkSpeedCanBeOverridden) {
  TopoMatrixOptions o;
  o.gpu_model = "V100";
  o.nvlink_GBps_per_link = 20;
  auto m = read_nvidia_topo(data("dgx1-v100.topo"), "dgx1.topo", o);
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->type.nvlink_GBps_per_link, 20);
}

TEST(NvidiaTopo, UnknownModelWithNVLinkNeedsASpeed) {
  TopoMatrixOptions o;
  o.gpu_model = "Quantum Accelerator 9000";
  auto m = read_nvidia_topo(data("dgx1-v100.topo"), "dgx1.topo", o);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("Quantum Accelerator 9000"), std::string::npos);
  o.nvlink_GBps_per_link = 25;
  EXPECT_TRUE(read_nvidia_topo(data("dgx1-v100.topo"), "dgx1.topo", o));
}

TEST(NvidiaTopo, UnknownCellNamesRowColumnAndToken) {
  std::string text = data("h100-hgx-13nic.topo");
  // Line 4 is GPU2; its 4th cell (column GPU3) becomes "NVX".
  std::string bad = text;
  auto line4 = bad.find("\nGPU2\t");
  auto cell = bad.find("NV18", line4 + 20);
  bad.replace(cell, 4, "NVX ");
  auto m = read_nvidia_topo(bad, "bad.topo");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().where.file, "bad.topo");
  EXPECT_EQ(m.error().where.line, 4);
  EXPECT_GT(m.error().where.column, 1);
  EXPECT_NE(m.error().message.find("row 'GPU2'"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("column 'GPU3'"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("'NVX'"), std::string::npos) << m.error().message;
}

TEST(NvidiaTopo, SelfCellOnlyOnTheDiagonal) {
  std::string text = "\tGPU0\tGPU1\nGPU0\t X \t X \nGPU1\tNV4\t X \n";
  auto m = read_nvidia_topo(text, "x.topo");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().where.line, 2);
  EXPECT_NE(m.error().message.find("column 'GPU1'"), std::string::npos);
}

TEST(NvidiaTopo, AsymmetricMatrixIsAnError) {
  std::string text = "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV2\t X \n";
  auto m = read_nvidia_topo(text, "asym.topo");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("symmetric"), std::string::npos);
}

TEST(NvidiaTopo, OldLayoutWithSocAndNoAffinityColumns) {
  // nvidia-smi before 2017 printed SOC where newer versions print SYS, and had no NUMA column.
  std::string text =
      "        GPU0    GPU1    mlx4_0\n"
      "GPU0     X      SOC     PHB\n"
      "GPU1    SOC      X      SOC\n"
      "mlx4_0  PHB     SOC      X \n";
  TopoMatrixOptions o;
  o.gpu_model = "Tesla P100-PCIE-16GB";
  auto m = read_nvidia_topo(text, "old.topo", o);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->type.link(0, 1).cls, LinkClass::kSys);
  ASSERT_EQ(m->type.nics.size(), 1u);
  EXPECT_EQ(m->type.nics[0].name, "mlx4_0");
  EXPECT_EQ(m->type.nics[0].gpu_affinity[0], LinkClass::kPhb);
  EXPECT_TRUE(m->type.gpu_cpu_affinity.empty());
}

TEST(NvidiaTopo, NicColumnWithoutLegendEntryIsKeptWithAWarning) {
  std::string text = data("h100-hgx-13nic.topo");
  text = text.substr(0, text.find("  NIC12: mlx5_eth4"));
  TopoMatrixOptions o;
  o.gpu_model = "H100";
  auto m = read_nvidia_topo(text, "h100.topo", o);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->type.nics[12].name, "NIC12");
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_NE(m->warnings[0].find("NIC12"), std::string::npos);
}

TEST(NvidiaTopo, ComputeNicFilterMarksOtherNics) {
  TopoMatrixOptions o;
  o.compute_nic_regex = "mlx5_ib[0-7]";
  auto m = read_nvidia_topo(data("h100-hgx-13nic.topo"), "h100.topo", o);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->type.nics[7].compute);
  EXPECT_FALSE(m->type.nics[8].compute);
}

TEST(NvidiaTopo, MissingGpuRowAndMissingHeaderAreErrors) {
  EXPECT_FALSE(read_nvidia_topo("no matrix here\n", "empty.topo"));
  auto m = read_nvidia_topo("\tGPU0\tGPU1\nGPU0\t X \tNV4\n", "short.topo");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("GPU1"), std::string::npos);
}

// ---------------------------------------------------------------- fabric

TEST(NvidiaFabric, HealthyCsvGivesUuidDotClique) {
  auto f = read_nvidia_fabric(data("fabric-gb-r1-n01.csv"), "n01.csv");
  ASSERT_TRUE(f) << f.error().to_string();
  EXPECT_EQ(f->domain, "9c6f5af3-6a4e-4c1b-9f3d-2b7e8a1c4d50.4026");
  EXPECT_EQ(f->gpus, 4);
  EXPECT_TRUE(f->warnings.empty());
}

TEST(NvidiaFabric, NotApplicableMeansNoDomainWithAWarning) {
  auto f = read_nvidia_fabric(data("fabric-not-supported.csv"), "na.csv");
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->domain.empty());
  EXPECT_EQ(f->gpus, 8);
  ASSERT_EQ(f->warnings.size(), 1u);
  EXPECT_NE(f->warnings[0].find("N/A"), std::string::npos);
}

TEST(NvidiaFabric, AllZeroUuidMeansNoDomainWithAWarning) {
  auto f = read_nvidia_fabric(data("fabric-degraded.csv"), "zero.csv");
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->domain.empty());
  ASSERT_EQ(f->warnings.size(), 1u);
  EXPECT_NE(f->warnings[0].find("all zeros"), std::string::npos);
}

TEST(NvidiaFabric, DisagreeingGpusAreAmbiguous) {
  auto f = read_nvidia_fabric(data("fabric-ambiguous.csv"), "amb.csv");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("ambiguous"), std::string::npos);
  EXPECT_EQ(f.error().where.line, 3);
}

TEST(NvidiaFabric, QueryOutputHealthyAndInsufficient) {
  auto ok = read_nvidia_fabric(data("q-fabric-healthy.txt"), "q.txt");
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_EQ(ok->domain, "9c6f5af3-6a4e-4c1b-9f3d-2b7e8a1c4d50.4026");
  auto bad = read_nvidia_fabric(data("q-fabric-insufficient.txt"), "q2.txt");
  ASSERT_TRUE(bad);
  EXPECT_TRUE(bad->domain.empty());
  ASSERT_EQ(bad->warnings.size(), 1u);
  EXPECT_NE(bad->warnings[0].find("Insufficient Resources"), std::string::npos);
}

TEST(NvidiaFabric, QueryOutputWithSeveralGpus) {
  std::string one = data("q-fabric-healthy.txt");
  std::string two = "GPU 00000000:01:00.0\n" + one + "GPU 00000000:02:00.0\n" + one;
  auto f = read_nvidia_fabric(two, "q.txt");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->gpus, 2);
  std::string mixed = "GPU 00000000:01:00.0\n" + one + "GPU 00000000:02:00.0\n" + data("q-fabric-insufficient.txt");
  EXPECT_FALSE(read_nvidia_fabric(mixed, "q.txt"));
}

TEST(NvidiaFabric, MalformedLinesNamePosition) {
  auto f = read_nvidia_fabric("9c6f5af3-6a4e-4c1b-9f3d-2b7e8a1c4d50, 4026\nnot-a-uuid, 12\n", "bad.csv");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().where.line, 2);
  EXPECT_EQ(f.error().where.column, 1);
  EXPECT_NE(f.error().message.find("not-a-uuid"), std::string::npos);
  EXPECT_FALSE(read_nvidia_fabric("", "empty.csv"));
}

TEST(NvidiaFabric, QueryOutputErrorsPointAtTheField) {
  std::string text = data("q-fabric-healthy.txt");
  text.replace(text.find("4026"), 4, "40x6");
  auto f = read_nvidia_fabric(text, "q.txt");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().where.line, 4);
  EXPECT_EQ(f.error().where.column, 45);
  EXPECT_NE(f.error().message.find("40x6"), std::string::npos);
}

TEST(NvidiaFabric, DetectsBothFormats) {
  EXPECT_TRUE(looks_like_nvidia_fabric(data("fabric-gb-r1-n01.csv")));
  EXPECT_TRUE(looks_like_nvidia_fabric(data("fabric-not-supported.csv")));
  EXPECT_TRUE(looks_like_nvidia_fabric(data("q-fabric-healthy.txt")));
  EXPECT_FALSE(looks_like_nvidia_fabric(data("h100-hgx-13nic.topo")));
}

}  // namespace
}  // namespace toposched
