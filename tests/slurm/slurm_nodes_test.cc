// Slurm's node list as a discovery source (slurm/slurm_nodes.h): the outputs captured from
// real Slurm 22.05 daemons (tests/data/slurm/README.md), the field forms of later versions,
// bad values, and the merge with a topology.conf into one cluster.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "formats/discover.h"
#include "slurm/slurm_nodes.h"
#include "support/test_data.h"

namespace toposched::slurm {
namespace {

using toposched::testing::test_data_text;

const DiscoveredNode* find(const DiscoveredTopology& t, const std::string& name) {
  return toposched::testing::find_discovered_node(t, name);
}

TEST(SlurmNodes, CapturedScontrolAndSinfoSayTheSame) {
  for (const char* file : {"scontrol_show_node.txt", "sinfo.json"}) {
    auto t = read_slurm_nodes(test_data_text(std::string("slurm/") + file), file);
    ASSERT_TRUE(t) << t.error().to_string();
    ASSERT_EQ(t->nodes.size(), 4u) << file;  // gpu01..gpu04, Gres=gpu:h100:4, RealMemory=1024
    for (const auto& n : t->nodes) {
      EXPECT_EQ(n.gpu_count, 4) << file << " " << n.name;
      EXPECT_EQ(n.gpu_model, "h100") << file;
      EXPECT_EQ(n.host_memory_gb, 1) << file;  // 1024 MiB = 1.07 GB, rounded down
      EXPECT_TRUE(n.switch_name.empty());
    }
    EXPECT_TRUE(t->warnings.empty()) << t->warnings[0];
  }
}

TEST(SlurmNodes, RealMemoryIsMebibytes) {
  EXPECT_EQ(real_memory_gb(2063937), 2164);  // a DGX H100's MemTotal (2,113,442,596 KiB) as slurmd reports it
  EXPECT_EQ(real_memory_gb(0), 0);
}

TEST(SlurmNodes, CpuNodesAreSkippedAndUnknownGresTypesNamed) {
  const std::string text =
      "NodeName=login1 State=IDLE Gres=(null) RealMemory=64000\n"
      "NodeName=g1 State=IDLE Gres=gpu:a100:8(S:0-1),nic:2 RealMemory=1031000\n"
      "NodeName=g2 State=IDLE Gres=gpu:tesla_big:8 RealMemory=1031000\n"
      "NodeName=g3 State=IDLE Gres=gpu:2\n";
  auto t = read_slurm_nodes(text, "nodes.txt");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->nodes.size(), 3u);
  EXPECT_EQ(find(*t, "login1"), nullptr);
  EXPECT_EQ(find(*t, "g1")->gpu_model, "a100");
  EXPECT_EQ(find(*t, "g1")->host_memory_gb, 1081);
  EXPECT_EQ(find(*t, "g2")->gpu_model, "");  // a site's own type name: --gpu-model decides
  EXPECT_EQ(find(*t, "g3")->gpu_count, 2);
  EXPECT_EQ(find(*t, "g3")->host_memory_gb, 0);  // not reported: unknown
  ASSERT_EQ(t->warnings.size(), 2u);
  EXPECT_NE(t->warnings[0].find("login1"), std::string::npos);
  EXPECT_NE(t->warnings[1].find("g2 (tesla_big)"), std::string::npos);
}

TEST(SlurmNodes, LaterSinfoFormsAndBadValues) {
  // Slurm 23.11+ data parsers write some numbers as {"set", "infinite", "number"}.
  auto later = read_slurm_nodes(
      R"({"nodes": [{"name": "n1", "state": ["IDLE"], "gres": "gpu:h100:8", )"
      R"("real_memory": {"set": true, "infinite": false, "number": 2063937}},)"
      R"( {"name": "n2", "state": ["IDLE"], "gres": "gpu:h100:8", "real_memory": {"set": false, "number": 0}}]})",
      "sinfo.json");
  ASSERT_TRUE(later) << later.error().to_string();
  EXPECT_EQ(later->nodes[0].host_memory_gb, 2164);
  EXPECT_EQ(later->nodes[1].host_memory_gb, 0);
  auto bad_json = read_slurm_nodes(
      R"({"nodes": [{"name": "n1", "state": "idle", "gres": "gpu:8", "real_memory": "lots"}]})", "sinfo.json");
  ASSERT_FALSE(bad_json);
  EXPECT_NE(bad_json.error().message.find("real_memory"), std::string::npos) << bad_json.error().to_string();
  auto bad_line = read_slurm_nodes("NodeName=a State=IDLE Gres=gpu:8\nNodeName=b State=IDLE Gres=gpu:8 RealMemory=2T\n",
                                   "nodes.txt");
  ASSERT_FALSE(bad_line);
  EXPECT_EQ(bad_line.error().where.file, "nodes.txt");
  EXPECT_EQ(bad_line.error().where.line, 2);
  EXPECT_NE(bad_line.error().message.find("RealMemory"), std::string::npos) << bad_line.error().to_string();
  EXPECT_FALSE(read_slurm_nodes("NodeName=a State=IDLE Gres=gpu:8", "cut.txt"));  // truncated: no newline
  // The multi-line form (scontrol without -o): the line of the bad token.
  auto multi = read_slurm_nodes(
      "NodeName=a Arch=x86_64\n   Gres=gpu:h100:8\n   RealMemory=1024 State=IDLE\n\n"
      "NodeName=b Arch=x86_64\n   Gres=gpu:h100:8\n   AllocMem=0 RealMemory=lots\n   State=IDLE\n",
      "nodes.txt");
  ASSERT_FALSE(multi);
  EXPECT_EQ(multi.error().where.line, 7) << multi.error().to_string();
  auto fine = read_slurm_nodes("NodeName=a Arch=x86_64\n   Gres=gpu:h100:8\n   RealMemory=1024 State=IDLE\n\n"
                               "NodeName=b State=IDLE\n   Gres=gpu:4\n",
                               "nodes.txt");
  ASSERT_TRUE(fine) << fine.error().to_string();
  ASSERT_EQ(fine->nodes.size(), 2u);
  EXPECT_EQ(fine->nodes[0].host_memory_gb, 1);
  EXPECT_EQ(fine->nodes[1].gpu_count, 4);
}

TEST(SlurmNodes, WithTopologyConfTheNodesGetGpusAndHostMemory) {
  std::string nodes;
  for (int i = 1; i <= 16; ++i)
    nodes += fmt::format("NodeName=dgx{:02d} State=IDLE Gres=gpu:h100:8(S:0-1) RealMemory={}\n", i,
                         i <= 8 ? 2063937 : 1031968);
  DiscoverRequest r;
  r.slurm_topology = {std::string(TOPOSCHED_TEST_DATA) + "/discovery/slurm-tree.conf"};
  auto read = read_slurm_nodes(nodes, "nodes.txt");
  ASSERT_TRUE(read) << read.error().to_string();
  r.read_sources.push_back(std::move(*read));
  auto d = discover(r);
  ASSERT_TRUE(d) << d.error().to_string();
  const Cluster& c = d->cluster;
  ASSERT_EQ(c.node_count(), 16u);
  EXPECT_EQ(c.gpu_count(), 128u);
  // Half the nodes with half the memory: still one type (the same GPUs and links), whose
  // host memory is the smaller, so a share of it fits on every node.
  EXPECT_EQ(c.node_type_count(), 1u);
  EXPECT_EQ(c.node_type(*c.find_node("dgx01")).host_memory_gb, 1082);
  EXPECT_NE(c.node_type(*c.find_node("dgx01")).gpu_model.find("H100"), std::string::npos);
  EXPECT_TRUE(c.node_switch(*c.find_node("dgx01")).valid());
}

}  // namespace
}  // namespace toposched::slurm
