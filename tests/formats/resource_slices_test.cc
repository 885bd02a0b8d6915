// Kubernetes DRA ResourceSlices as a discovery source (formats/resource_slices.h): NVIDIA's
// driver v25.8+ attributes (uuid, productName, pciBusID, pcieRoot, numaNode), the PCI order,
// the PCIe distances of a generic node type, merging with a NodeList's gpu.clique labels in
// `discover`, and every refusal at its file:line:col.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/discover.h"
#include "formats/resource_slices.h"
#include "topology/file_io.h"
#include "support/test_data.h"

namespace toposched {
namespace {

const std::string kDir = std::string(TOPOSCHED_TEST_DATA) + "/discovery/dra/";

std::string data(const std::string& name) { return testing::test_data_text("discovery/dra/" + name); }

const DiscoveredNode* node(const DiscoveredTopology& t, const std::string& name) {
  return testing::find_discovered_node(t, name);
}

TEST(ResourceSlices, NvidiaDriverAttributesGiveGpusInPciOrder) {
  auto t = read_resource_slices(data("resource-slices.json"), "slices.json");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 5u);  // the dra.net slice adds no node of its own
  const DiscoveredNode* gb = node(*t, "gb-r1-n01");
  ASSERT_NE(gb, nullptr);
  EXPECT_EQ(gb->gpu_count, 4);
  EXPECT_EQ(gb->gpu_model, "NVIDIA GB200");
  EXPECT_GT(gb->gpu_model_at.line, 0);
  ASSERT_NE(gb->pcie, nullptr);
  // Listed gpu-3, gpu-2, gpu-1, gpu-0 (minors out of PCI order); read back in bus order.
  EXPECT_EQ(gb->pcie->pci_bus_id,
            (std::vector<std::string>{"0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"}));
  EXPECT_EQ(gb->pcie->pcie_root,
            (std::vector<std::string>{"pci0008:00", "pci0009:00", "pci0018:00", "pci0019:00"}));
  EXPECT_EQ(gb->pcie->numa, (std::vector<int>{0, 0, 1, 1}));
  for (const auto& u : gb->pcie->uuid) EXPECT_TRUE(u.starts_with("GPU-")) << u;
  const DiscoveredNode* l40s = node(*t, "l40s-01");
  ASSERT_NE(l40s, nullptr);
  EXPECT_EQ(l40s->gpu_count, 8);  // the NIC of driver dra.net is not a GPU
  ASSERT_NE(l40s->pcie, nullptr);
  EXPECT_EQ(l40s->pcie->pcie_root[0], l40s->pcie->pcie_root[1]);
  EXPECT_NE(l40s->pcie->pcie_root[1], l40s->pcie->pcie_root[2]);
  bool nic_warning = false;
  for (const auto& w : t->warnings) nic_warning |= w.find("ignored 1 device(s)") != std::string::npos;
  EXPECT_TRUE(nic_warning);
}

TEST(ResourceSlices, PcieRootsGiveThePcieDistancesOfAGenericNodeType) {
  DiscoverRequest r;
  r.resource_slices = {kDir + "resource-slices.json"};
  auto d = discover(r);
  ASSERT_TRUE(d) << d.error().to_string();
  const Cluster& c = d->cluster;
  const NodeType& l40s = c.node_type(*c.find_node("l40s-01"));
  ASSERT_EQ(l40s.gpu_count, 8);
  EXPECT_EQ(l40s.link(0, 1).cls, LinkClass::kPhb);   // one root complex
  EXPECT_EQ(l40s.link(0, 2).cls, LinkClass::kNode);  // two roots, one NUMA node
  EXPECT_EQ(l40s.link(0, 4).cls, LinkClass::kSys);   // the other socket
  EXPECT_EQ(l40s.gpu_numa, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  ASSERT_EQ(l40s.nics.size(), 8u);
  EXPECT_EQ(l40s.nics[0].gpu_affinity[0], LinkClass::kPix);
  EXPECT_EQ(l40s.nics[0].gpu_affinity[1], LinkClass::kPhb);
  EXPECT_EQ(l40s.nics[0].gpu_affinity[7], LinkClass::kSys);
  // NVLink stays NVLink: the GB200 tray's GPUs all meet in NVLink whatever their roots.
  const NodeType& gb = c.node_type(*c.find_node("gb-r1-n01"));
  EXPECT_EQ(gb.link(0, 3).cls, LinkClass::kNVLink);
  EXPECT_EQ(gb.gpu_numa, (std::vector<int>{0, 0, 1, 1}));
  // Without the slices' layout the same GPUs are SYS apart (generic_node_type's default).
  auto plain = generic_node_type("L40S", 8, 400);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->link(0, 1).cls, LinkClass::kSys);
}

TEST(ResourceSlices, MergedWithTheNodeListsCliqueLabels) {
  DiscoverRequest r;
  r.resource_slices = {kDir + "resource-slices.json"};
  r.k8s_nodes = {kDir + "nodes.json"};
  auto d = discover(r);
  ASSERT_TRUE(d) << d.error().to_string();
  const Cluster& c = d->cluster;
  EXPECT_EQ(c.node_count(), 5u);  // cp-1 has no GPU label and no slice
  EXPECT_EQ(c.gpu_count(), 4u * 4 + 8);
  const NodeId a = *c.find_node("gb-r1-n01"), b = *c.find_node("gb-r1-n02"), x = *c.find_node("gb-r2-n01");
  ASSERT_TRUE(c.node_domain(a).valid());
  EXPECT_EQ(c.node_domain(a), c.node_domain(b));
  EXPECT_NE(c.node_domain(a), c.node_domain(x));
  EXPECT_EQ(c.domain_count(), 2u);
  EXPECT_FALSE(c.node_domain(*c.find_node("l40s-01")).valid());
}

TEST(ResourceSlices, TopoMCountDisagreeingIsAWarning) {
  // A node described by both: topo -m wins; the slices' other count is named.
  const std::string topo = std::string(TOPOSCHED_TEST_DATA) + "/discovery/gb200-4gpu.topo";
  auto topo_text = read_text_file(topo);
  ASSERT_TRUE(topo_text);
  const std::string dir = ::testing::TempDir() + "/slices-topo";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_file_atomically(dir + "/l40s-01.topo", *topo_text));
  DiscoverRequest r;
  r.topo_m = {dir + "/l40s-01.topo"};
  r.topo.gpu_model = "GB200";
  r.resource_slices = {kDir + "resource-slices.json"};
  auto d = discover(r);
  ASSERT_TRUE(d) << d.error().to_string();
  EXPECT_EQ(d->cluster.node_gpu_count(*d->cluster.find_node("l40s-01")), 4);
  bool named = false;
  for (const auto& w : d->warnings) named |= w.find("node 'l40s-01': its slices list 8 GPUs but its topo -m has 4") !=
                                             std::string::npos;
  EXPECT_TRUE(named);
}

// One GPU device in a slice of node n1, with the given attribute lines (YAML, 10 spaces in).
std::string one_slice(const std::string& attributes) {
  return "apiVersion: resource.k8s.io/v1\n"  // line 1
         "kind: ResourceSlice\n"
         "spec:\n"
         "  driver: gpu.nvidia.com\n"
         "  nodeName: n1\n"  // line 5
         "  devices:\n"
         "    - name: gpu-0\n"
         "      attributes:\n"
         "        type: {string: gpu}\n" +  // line 9
         attributes;
}

TEST(ResourceSlices, BadAttributesAreRefusedWhereTheyAre) {
  struct Case {
    std::string text;
    int line, column;
    std::string message;
  };
  const std::vector<Case> cases = {
      {one_slice("        resource.kubernetes.io/pciBusID: {string: \"1b:00.0\"}\n"), 10, 51, "expected a PCI bus id"},
      {one_slice("        resource.kubernetes.io/pciBusID: {string: \"0000:1b:00.9\"}\n"), 10, 51,
       "expected a PCI bus id"},
      {one_slice("        resource.kubernetes.io/pcieRoot: {string: \"0000:00\"}\n"), 10, 51,
       "expected a PCIe root complex"},
      {one_slice("        resource.kubernetes.io/numaNode: {int: -1}\n"), 10, 48, "numaNode"},
      {one_slice("        uuid: {string: GPU-1}\n"
                 "    - name: gpu-1\n"
                 "      attributes:\n"
                 "        uuid: {string: GPU-1}\n"),
       13, 24, "GPU uuid 'GPU-1' is listed twice (first at line 10, column 24)"},
      {one_slice("        resource.kubernetes.io/pciBusID: {string: \"0000:1b:00.0\"}\n"
                 "    - name: gpu-1\n"
                 "      attributes:\n"
                 "        resource.kubernetes.io/pciBusID: {string: \"0000:1B:00.0\"}\n"),
       13, 51, "PCI bus id '0000:1B:00.0' is listed twice on this node"},
  };
  for (const auto& c : cases) {
    auto t = read_resource_slices(c.text, "bad.yaml");
    ASSERT_FALSE(t) << c.text;
    EXPECT_EQ(t.error().where.file, "bad.yaml");
    EXPECT_EQ(t.error().where.line, c.line) << c.text << t.error().to_string();
    EXPECT_EQ(t.error().where.column, c.column) << c.text << t.error().to_string();
    EXPECT_NE(t.error().message.find(c.message), std::string::npos) << t.error().to_string();
  }
}

TEST(ResourceSlices, GpusWithoutBusIdsKeepNoLayoutAndAreNamed) {
  auto t = read_resource_slices(one_slice("        productName: {string: NVIDIA H100 80GB HBM3}\n"), "old.yaml");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 1u);
  EXPECT_EQ(t->nodes[0].pcie, nullptr);
  ASSERT_FALSE(t->warnings.empty());
  EXPECT_NE(t->warnings[0].find("without resource.kubernetes.io/pciBusID"), std::string::npos) << t->warnings[0];
  EXPECT_NE(t->warnings[0].find("n1"), std::string::npos);
}

}  // namespace
}  // namespace toposched
