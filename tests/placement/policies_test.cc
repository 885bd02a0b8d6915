// Placement policies: property tests over random request sequences on every preset, and
// the behaviour each policy promises (docs/placement.md).
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "placement/fragmentation.h"
#include "placement/placement.h"
#include "placement/select_util.h"
#include "topology/presets.h"
#include "support/two_leaf_cluster.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

JobRequest gpus_job(int gpus, int tp = 1, int pp = 1) {
  JobRequest r;
  r.gpus = gpus;
  r.tp = tp;
  r.pp = pp;
  return r;
}

std::vector<GpuId> place_or_die(const AllocationState& s, JobRequest r, std::string_view policy) {
  r = *normalize(r, s.cluster());
  auto p = place(s, r, **find_policy(policy));
  EXPECT_TRUE(p) << policy << ": " << (p ? "" : p.error().message);
  return p ? p->gpus_by_rank : std::vector<GpuId>{};
}

// A small instance of every preset (property tests run under the sanitizers).
const std::map<std::string, std::string> kSmallPresets = {
    {"dgx-a100", "dgx-a100?nodes=40"},
    {"dgx-h100", "dgx-h100?nodes=64"},
    {"hgx-h200", "hgx-h200?nodes=40&su_size=16"},
    {"gb200-nvl72", "gb200-nvl72?racks=4&racks_per_su=2"},
    {"pcie-l40s", "pcie-l40s?nodes=16"},
    {"llama3-24k", "llama3-24k?pods=2&racks=8"},
    {"synthetic", "synthetic?nodes=48&fanout=8,3"},
};

// Independent re-check of what every placement must satisfy.
void expect_valid(const AllocationState& s, const JobRequest& r, const std::vector<GpuId>& gpus,
                  std::string_view what) {
  const Cluster& c = s.cluster();
  ASSERT_EQ(static_cast<int>(gpus.size()), r.total_gpus) << what;
  std::set<std::uint32_t> seen;
  std::map<std::uint32_t, int> per_node;
  for (GpuId g : gpus) {
    ASSERT_TRUE(seen.insert(g.value).second) << what << ": GPU twice";
    ASSERT_TRUE(s.gpu_free(g)) << what << ": GPU already owned";
    ++per_node[c.gpu_node(g).value];
  }
  std::set<std::uint32_t> leaves;
  for (auto [n, k] : per_node) {
    if (r.exclusive) {
      EXPECT_TRUE(s.node_whole_free(NodeId(n))) << what;
      EXPECT_EQ(k, c.node_gpu_count(NodeId(n))) << what;
    }
    if (r.gpus_per_node) {
      EXPECT_EQ(k, r.gpus_per_node) << what;
    }
    leaves.insert(c.node_switch(NodeId(n)).value);
  }
  if (r.required_tier_index && *r.required_tier_index >= 0) {
    std::set<std::uint32_t> tops;
    for (auto [n, k] : per_node) tops.insert(ancestor_at_tier(s, NodeId(n), *r.required_tier_index).value);
    EXPECT_EQ(tops.size(), 1u) << what << ": required tier not honoured";
  }
  if (r.max_switches) {
    EXPECT_LE(static_cast<int>(leaves.size()), r.max_switches) << what;
  }
}

TEST(PolicyProperties, RandomSequencesOnEveryPreset) {
  for (const PresetInfo& info : preset_catalog()) {
    auto spec = kSmallPresets.find(info.name);
    ASSERT_NE(spec, kSmallPresets.end()) << "add a small instance of preset " << info.name << " to kSmallPresets";
    Cluster c = preset(spec->second);
    const int node_gpus = c.node_gpu_count(NodeId(0));
    for (const PlacementPolicy* policy : placement_policies()) {
      SCOPED_TRACE(spec->second + " / " + std::string(policy->name()));
      std::mt19937 rng(1234);
      AllocationState s(c);
      std::vector<std::pair<std::string, AllocationState>> stack;  // job, state before it
      int placed = 0, refused = 0;
      for (int step = 0; step < 40; ++step) {
        if (!stack.empty() && rng() % 3 == 0) {
          // Release the newest job: counters must be exactly those before it was placed.
          auto [job, before] = std::move(stack.back());
          stack.pop_back();
          ASSERT_TRUE(s.release(job));
          ASSERT_TRUE(s.same_counters(before)) << "release of " << job << " did not restore the counters";
          continue;
        }
        JobRequest r;
        r.job_id = "j" + std::to_string(step);
        r.seed = step;
        switch (rng() % 6) {
          case 4:
            r.gpus = 2 * (1 + static_cast<int>(rng() % 8));
            r.workload = WorkloadKind::kInference;
            r.replica_gpus = 2;
            break;
          case 5:
            r.gpus = 2 * node_gpus;
            r.workload = WorkloadKind::kInferencePD;
            r.replica_gpus = node_gpus;
            break;
          case 0:
            r.nodes = 1 + static_cast<int>(rng() % 4);
            break;
          case 1:
            r.gpus = node_gpus * (1 + static_cast<int>(rng() % 3));
            r.tp = node_gpus;
            break;
          case 2:
            r.gpus = 1 << (rng() % 6);
            break;
          default:
            r.gpus = 2 * node_gpus;
            r.gpus_per_node = node_gpus / 2;
            break;
        }
        if (rng() % 5 == 0 && !c.tiers().empty()) r.required_tier = c.tiers()[0].name;
        if (rng() % 7 == 0) r.max_switches = 1;
        auto norm = normalize(r, c);
        if (!norm) continue;  // e.g. more GPUs than the cluster has
        AllocationState before = s.snapshot();
        auto p = place(s, *norm, *policy);
        if (!p) {
          ++refused;
          EXPECT_TRUE(p.error().code == ErrorCode::kInfeasible || p.error().code == ErrorCode::kUnsupported)
              << p.error().message;
          EXPECT_FALSE(p.error().message.empty());
          EXPECT_TRUE(s.same_counters(before));
          continue;
        }
        ++placed;
        expect_valid(s, *norm, p->gpus_by_rank, r.job_id);
        ASSERT_TRUE(s.allocate(r.job_id, p->gpus_by_rank));
        ASSERT_TRUE(s.check_invariants());
        stack.emplace_back(r.job_id, std::move(before));
      }
      EXPECT_GT(placed, 5) << "too few placements to mean anything (" << refused << " refused)";
    }
  }
}

// DGX-1 (V100) hybrid cube-mesh: two fully NVLinked quads {0-3} and {4-7}, plus i <-> i+4.
Cluster dgx1() {
  static const char* kTopo[8][8] = {
      {"X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"}, {"NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"},
      {"NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"}, {"NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"},
      {"NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"}, {"SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"},
      {"SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"}, {"SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"}};
  NodeType t;
  t.name = "dgx-1v";
  t.gpu_model = "V100-SXM2";
  t.gpu_memory_gb = 32;
  t.gpu_count = 8;
  t.nvlink_GBps_per_link = 25;
  t.pcie_GBps = 16;
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) t.gpu_links.push_back(*parse_link_cell(kTopo[a][b]));
  ClusterBuilder b("dgx1");
  NodeTypeId type = b.add_node_type(t);
  b.add_node("dgx1-01", type);
  auto c = std::move(b).build();
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return std::move(*c);
}

bool fully_nvlinked(const Cluster& c, const std::vector<GpuId>& gpus) {
  for (std::size_t i = 0; i < gpus.size(); ++i)
    for (std::size_t j = i + 1; j < gpus.size(); ++j)
      if (c.path(gpus[i], gpus[j]).level != PathLevel::kNVLink) return false;
  return true;
}

TEST(Topo, HybridCubeMeshGetsAFullyNvlinkedQuad) {
  Cluster c = dgx1();
  AllocationState s(c);
  // GPU 1 is busy: the only fully NVLinked quad left is {4,5,6,7}; first-fit takes {0,2,3,4}.
  ASSERT_TRUE(s.allocate("busy", std::vector<GpuId>{c.node_gpu(NodeId(0), 1)}));
  auto topo = place_or_die(s, gpus_job(4), "topo");
  EXPECT_TRUE(fully_nvlinked(c, topo));
  std::set<int> locals;
  for (GpuId g : topo) locals.insert(c.gpu_local_index(g));
  EXPECT_EQ(locals, (std::set<int>{4, 5, 6, 7}));
  EXPECT_FALSE(fully_nvlinked(c, place_or_die(s, gpus_job(4), "first-fit")));
  // On the empty node too, and TP pairs inside a quad are NVLinked.
  AllocationState empty(c);
  EXPECT_TRUE(fully_nvlinked(c, place_or_die(empty, gpus_job(4), "topo")));
  auto pairs = place_or_die(empty, gpus_job(8, 2), "topo");
  for (std::size_t i = 0; i < pairs.size(); i += 2) EXPECT_EQ(c.path(pairs[i], pairs[i + 1]).level, PathLevel::kNVLink);
}

// TP 8 is larger than a GB200 tray (4 GPUs): groups live in NVL72 racks (9 per rack). With
// 4 stages of 4 groups, filling racks in rank order would split stage 2 over both racks and
// send its DP all-reduce over InfiniBand; each stage must stay inside one rack.
TEST(Topo, PipelineStagesStayInsideOneNvlinkDomain) {
  Cluster c = preset("gb200-nvl72?racks=2");
  AllocationState s(c);
  JobRequest r = *normalize(gpus_job(128, 8, 4), c);
  auto p = place(s, r, **find_policy("topo"));
  ASSERT_TRUE(p) << p.error().message;
  const auto& g = p->gpus_by_rank;
  ASSERT_EQ(g.size(), 128u);
  for (std::size_t stage = 0; stage < 4; ++stage) {
    std::set<std::uint32_t> domains;
    for (std::size_t i = stage * 32; i < (stage + 1) * 32; ++i) domains.insert(c.node_domain(c.gpu_node(g[i])).value);
    EXPECT_EQ(domains.size(), 1u) << "stage " << stage;
  }
  for (std::size_t t = 0; t < 128; t += 8) {
    std::set<std::uint32_t> trays;
    for (std::size_t k = 0; k < 8; ++k) trays.insert(c.gpu_node(g[t + k]).value);
    EXPECT_EQ(trays.size(), 2u) << "TP group " << t / 8 << " spans more trays than it needs";
  }
  expect_valid(s, r, g, "topo gb200");
}

// On NVL72 racks a TP group split over two trays of one rack is still on NVLink: with every
// tray half busy, no tray holds a TP 4 group, and topo places the job inside one rack instead
// of leaving it to wait (it refused before: "only 0 such group(s) are free").
TEST(Topo, TpGroupsSpanTraysOfOneNvlinkDomainWhenNoTrayHoldsOne) {
  Cluster c = preset("gb200-nvl72?racks=2");
  AllocationState s(c);
  for (std::size_t n = 0; n < c.node_count(); ++n) {
    const NodeId node(static_cast<std::uint32_t>(n));
    ASSERT_TRUE(s.allocate(fmt::format("busy-{}", n), std::vector<GpuId>{c.node_gpu(node, 0), c.node_gpu(node, 1)}));
  }
  JobRequest r = *normalize(gpus_job(16, 4, 2), c);
  auto p = place(s, r, **find_policy("topo"));
  ASSERT_TRUE(p) << p.error().message;
  const auto& g = p->gpus_by_rank;
  ASSERT_EQ(g.size(), 16u);
  for (std::size_t t = 0; t < 16; t += 4) {
    std::set<std::uint32_t> domains;
    for (std::size_t k = 0; k < 4; ++k) domains.insert(c.node_domain(c.gpu_node(g[t + k])).value);
    EXPECT_EQ(domains.size(), 1u) << "TP group " << t / 4 << " left its NVLink domain";
  }
  expect_valid(s, r, g, "topo gb200 split trays");
  // Where the cluster has no multi-node NVLink domain, the TP group still waits for a node.
  Cluster h = preset("dgx-h100?nodes=2");
  AllocationState busy(h);
  for (std::size_t n = 0; n < h.node_count(); ++n) {
    const NodeId node(static_cast<std::uint32_t>(n));
    std::vector<GpuId> half;
    for (int k = 0; k < 6; ++k) half.push_back(h.node_gpu(node, k));
    ASSERT_TRUE(busy.allocate(fmt::format("busy-{}", n), half));
  }
  EXPECT_FALSE(place(busy, *normalize(gpus_job(4, 4), h), **find_policy("topo")));
}

TEST(Topo, PcieOnlyServerGetsASameSocketPair) {
  Cluster c = preset("pcie-l40s?nodes=1");
  AllocationState s(c);
  // Busy GPUs 0 and 2 leave {1,3} (same socket, NODE), {4,5} (PIX): topo takes the PIX pair.
  ASSERT_TRUE(s.allocate("busy", std::vector<GpuId>{c.node_gpu(NodeId(0), 0), c.node_gpu(NodeId(0), 2)}));
  auto pair = place_or_die(s, gpus_job(2), "topo");
  ASSERT_EQ(pair.size(), 2u);
  const NodeType& t = c.node_type(NodeId(0));
  EXPECT_EQ(t.gpu_numa[static_cast<std::size_t>(c.gpu_local_index(pair[0]))],
            t.gpu_numa[static_cast<std::size_t>(c.gpu_local_index(pair[1]))]);
  EXPECT_EQ(c.path(pair[0], pair[1]).level, PathLevel::kPciePix);
  // Leave one GPU per PCIe switch on socket 0 and one pair across sockets: same socket wins over SYS.
  AllocationState s2(c);
  ASSERT_TRUE(s2.allocate(
      "busy", std::vector<GpuId>{c.node_gpu(NodeId(0), 0), c.node_gpu(NodeId(0), 2), c.node_gpu(NodeId(0), 5),
                                 c.node_gpu(NodeId(0), 6), c.node_gpu(NodeId(0), 7)}));
  auto pair2 = place_or_die(s2, gpus_job(2), "topo");  // free: 1, 3 (socket 0), 4 (socket 1)
  std::set<int> l2 = {c.gpu_local_index(pair2[0]), c.gpu_local_index(pair2[1])};
  EXPECT_EQ(l2, (std::set<int>{1, 3}));
}

TEST(Topo, TrainingJobKeepsTpGroupsOnNodesAndStagesUnderOneLeaf) {
  Cluster c = preset("dgx-h100?nodes=64");
  AllocationState s(c);
  JobRequest r = gpus_job(256, 8, 4);
  r = *normalize(r, c);
  auto p = place(s, r, **find_policy("topo"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->tp_groups_split, 0);
  EXPECT_EQ(p->max_stage_leaves, 1);
  EXPECT_EQ(p->leaf_switch_count, 1);
  for (std::size_t g = 0; g < 256; g += 8)
    for (std::size_t k = 1; k < 8; ++k) EXPECT_EQ(c.gpu_node(p->gpus_by_rank[g]), c.gpu_node(p->gpus_by_rank[g + k]));
}

TEST(Topo, InferenceReplicasPackIntoPartlyUsedNodes) {
  Cluster c = preset("dgx-h100?nodes=8");
  AllocationState s(c);
  // Nodes 2 and 5 are half used; replicas of 2 GPUs should go there, not to whole nodes.
  std::vector<GpuId> busy;
  for (int l = 0; l < 4; ++l) {
    busy.push_back(c.node_gpu(NodeId(2), l));
    busy.push_back(c.node_gpu(NodeId(5), l));
  }
  ASSERT_TRUE(s.allocate("busy", busy));
  JobRequest r;
  r.gpus = 8;
  r.workload = WorkloadKind::kInference;
  r.replica_gpus = 2;
  auto gpus = place_or_die(s, r, "topo");
  std::set<std::uint32_t> nodes;
  for (GpuId g : gpus) nodes.insert(c.gpu_node(g).value);
  EXPECT_EQ(nodes, (std::set<std::uint32_t>{2, 5}));
  AllocationState after = s;
  ASSERT_TRUE(after.allocate("inf", gpus));
  EXPECT_EQ(after.total_free_nodes(), 6);  // every whole node still whole
}

// Uses the GPUs of `owner` on node n (local indices 0..count-1) in state s.
void occupy(AllocationState& s, std::string owner, std::uint32_t node, int count) {
  std::vector<GpuId> gpus;
  for (int l = 0; l < count; ++l) gpus.push_back(s.cluster().node_gpu(NodeId(node), l));
  ASSERT_TRUE(s.allocate(std::move(owner), gpus));
}

std::set<std::uint32_t> nodes_of(const Cluster& c, const std::vector<GpuId>& gpus) {
  std::set<std::uint32_t> nodes;
  for (GpuId g : gpus) nodes.insert(c.gpu_node(g).value);
  return nodes;
}

TEST(Topo, SingleNodeJobTakesTheNodeWithTheFewestFreeGpusNotOnlyUnits) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  occupy(s, "one", 1, 1);   // node 1: 7 free, one TP group of 4
  occupy(s, "four", 2, 4);  // node 2: 4 free, one TP group of 4
  // Both hold exactly one group of 4; node 1 would strand 3 GPUs, node 2 none.
  EXPECT_EQ(nodes_of(c, place_or_die(s, gpus_job(4, 4), "topo")), (std::set<std::uint32_t>{2}));
}

TEST(Topo, OneGpuJobLeavesAUsablePairRatherThanTheTightestNode) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  occupy(s, "six", 1, 6);   // node 1: 2 free
  occupy(s, "five", 2, 5);  // node 2: 3 free
  // Best fit would take node 1's pair apart (1 + 1 stranded for 2-GPU jobs); with the
  // default mix, taking from node 2 leaves 2 + 2 free, usable by 1- and 2-GPU jobs.
  const auto gpus = place_or_die(s, gpus_job(1), "topo");
  EXPECT_EQ(nodes_of(c, gpus), (std::set<std::uint32_t>{2}));
  AllocationState after = s;
  ASSERT_TRUE(after.allocate("job", gpus));
  EXPECT_LT(fragmentation(after, default_job_sizes()).expected_unusable_gpus,
            fragmentation(s, default_job_sizes()).expected_unusable_gpus);
}

TEST(Topo, InfeasibleTpGroupSaysWhy) {
  Cluster c = preset("gb200-nvl72?racks=2");
  AllocationState s(c);
  // Take 2 trays (8 GPUs) of every rack: the largest free NVLink domain has 64 GPUs.
  std::vector<GpuId> busy;
  for (std::uint32_t n : {0u, 1u, 18u, 19u})
    for (int l = 0; l < 4; ++l) busy.push_back(c.node_gpu(NodeId(n), l));
  ASSERT_TRUE(s.allocate("busy", busy));
  JobRequest r = gpus_job(72, 72);
  r = *normalize(r, c);
  auto p = place(s, r, **find_policy("topo"));
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kInfeasible);
  EXPECT_NE(p.error().message.find("needs 72 GPUs in one NVLink domain; the largest free one has 64"),
            std::string::npos)
      << p.error().message;
  // 64 fits, inside one rack.
  auto ok = place_or_die(s, gpus_job(64, 64), "topo");
  std::set<std::uint32_t> domains;
  for (GpuId g : ok) domains.insert(c.node_domain(c.gpu_node(g)).value);
  EXPECT_EQ(domains.size(), 1u);
}

// The free-GPU index changes how topo finds nodes, not what it picks: on random states of
// every small preset, a request with no node mask (the indexed search) and the same request
// with a mask allowing every node (which forces the scan of every node) get the same GPUs in
// the same rank order, or the same error.
TEST(Topo, IndexedSearchMatchesTheFullScan) {
  const PlacementPolicy& topo = **find_policy("topo");
  for (const auto& [name, spec] : kSmallPresets) {
    Cluster c = preset(spec);
    AllocationState s(c);
    const NodeMask every(c.node_count(), true);
    std::mt19937 rng(20261206);
    std::vector<std::string> live;
    int placed = 0, refused = 0;
    for (int step = 0; step < 400; ++step) {
      JobRequest r;
      const int kind = static_cast<int>(rng() % 4);
      if (kind == 0) {  // inference replicas
        r.workload = WorkloadKind::kInference;
        r.replica_gpus = 1 << (rng() % 3);
        r.gpus = r.replica_gpus * static_cast<int>(1 + rng() % 6);
      } else {  // training: tp x pp x dp
        r.tp = 1 << (rng() % 4);
        r.pp = 1 << (rng() % 3);
        r.gpus = r.tp * r.pp * static_cast<int>(1 << (rng() % (kind == 1 ? 2 : 5)));
        if (kind == 3) r.gpus = static_cast<int>(1 + rng() % 7);
        if (kind == 3) r.tp = r.pp = 1;
      }
      auto n = normalize(r, c);
      if (!n) continue;
      auto indexed = topo.select(s, *n, {});
      auto scanned = topo.select(s, *n, every);
      const std::string what = fmt::format("{} step {}: {} GPUs tp {} pp {}", name, step, n->total_gpus, n->tp, n->pp);
      ASSERT_EQ(indexed.has_value(), scanned.has_value()) << what;
      if (!indexed) {
        EXPECT_EQ(indexed.error().message, scanned.error().message) << what;
        ++refused;
      } else {
        ASSERT_EQ(*indexed, *scanned) << what;
        ++placed;
        if (rng() % 4 != 0) {
          const std::string id = fmt::format("j{}", step);
          ASSERT_TRUE(s.allocate(id, *indexed)) << what;
          live.push_back(id);
        }
      }
      if (!live.empty() && rng() % 3 == 0) {
        const std::size_t k = rng() % live.size();
        ASSERT_TRUE(s.release(live[k]));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    ASSERT_TRUE(s.check_invariants()) << name;
    EXPECT_GT(placed, 100) << name;
    EXPECT_GT(refused, 0) << name << ": the states never got full enough to refuse";
  }
}

TEST(SlurmTree, PicksTheTightestLeafThatFits) {
  Cluster c = preset("synthetic?nodes=12&gpus_per_node=4&fanout=4");  // leaves of 4 nodes, one spine
  AllocationState s(c);
  // Leaf 0: 1 node busy (3 free); leaf 1: 2 busy (2 free); leaf 2: all 4 free.
  for (std::uint32_t n : {0u, 4u, 5u})
    ASSERT_TRUE(s.allocate("b" + std::to_string(n), std::vector<GpuId>{c.node_gpu(NodeId(n), 0)}));
  JobRequest r;
  r.nodes = 2;
  auto gpus = place_or_die(s, r, "slurm-tree");
  std::set<std::uint32_t> nodes;
  for (GpuId g : gpus) nodes.insert(c.gpu_node(g).value);
  EXPECT_EQ(nodes, (std::set<std::uint32_t>{6, 7}));  // leaf 1 has exactly 2 whole nodes
  r.nodes = 5;  // no leaf fits: the one with the most nodes first (leaf 2), then the tightest for the rest (leaf 1)
  gpus = place_or_die(s, r, "slurm-tree");
  nodes.clear();
  for (GpuId g : gpus) nodes.insert(c.gpu_node(g).value);
  EXPECT_EQ(nodes, (std::set<std::uint32_t>{6, 8, 9, 10, 11}));
}

TEST(KueueBestFit, RequiredTierFailsWithReasonAndPreferredFallsBack) {
  Cluster c = preset("dgx-h100?nodes=64");  // 2 leaves
  AllocationState s(c);
  std::vector<GpuId> busy;
  for (std::uint32_t n = 0; n < 4; ++n)
    for (int l = 0; l < 8; ++l) busy.push_back(c.node_gpu(NodeId(n), l));
  ASSERT_TRUE(s.allocate("busy", busy));  // leaf 0: 224 free, leaf 1: 256 free
  JobRequest r = gpus_job(240);
  r.required_tier = "leaf";
  r = *normalize(r, c);
  auto p = place(s, r, **find_policy("kueue-bestfit"));
  ASSERT_TRUE(p);
  for (GpuId g : p->gpus_by_rank) EXPECT_GE(c.gpu_node(g).value, 32u);  // only leaf 1 holds 240
  r = gpus_job(300);
  r.required_tier = "leaf";
  r = *normalize(r, c);
  p = place(s, r, **find_policy("kueue-bestfit"));
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("allows to fit only 256 out of 300 pod(s) in one leaf"), std::string::npos)
      << p.error().message;
  r.required_tier.clear();
  r.required_tier_index.reset();
  r.preferred_tier = "leaf";
  r = *normalize(r, c);
  EXPECT_TRUE(place(s, r, **find_policy("kueue-bestfit")));
  // Tight fit: a 200-GPU job goes to leaf 0 (224 free), not the emptier leaf 1.
  r = gpus_job(200);
  r.required_tier = "leaf";
  r = *normalize(r, c);
  p = place(s, r, **find_policy("kueue-bestfit"));
  ASSERT_TRUE(p);
  for (GpuId g : p->gpus_by_rank) EXPECT_LT(c.gpu_node(g).value, 32u);
}

// Two blocks under one root tier: b1 holds two 2-GPU nodes, b2 one 3-GPU node.
Cluster two_blocks_2_2_3() {
  ClusterBuilder b("blocks");
  NodeType t2 = testing::h100_node_type();
  NodeType t3 = t2;
  for (auto [t, n] : {std::pair{&t2, 2}, std::pair{&t3, 3}}) {
    t->name = fmt::format("gpu{}", n);
    t->gpu_count = n;
    t->gpu_links = NodeType::full_nvlink_mesh(n, 18);
    t->nics.clear();
  }
  NodeTypeId id2 = b.add_node_type(t2), id3 = b.add_node_type(t3);
  int block = b.add_tier(Tier{"block", 0, 0.5, 1.0});
  SwitchId b1 = b.add_switch("b1", block), b2 = b.add_switch("b2", block);
  b.attach(b.add_node("n3", id3), b2);  // listed first: the answer may not depend on it
  b.attach(b.add_node("n1", id2), b1);
  b.attach(b.add_node("n2", id2), b1);
  auto c = std::move(b).build();
  EXPECT_TRUE(c) << c.error().message;
  return std::move(*c);
}

std::vector<std::pair<std::string, int>> gpus_per_node(const Cluster& c, const std::vector<GpuId>& gpus) {
  std::vector<std::pair<std::string, int>> out;
  for (GpuId g : gpus) {
    const std::string& n = c.node_name(c.gpu_node(g));
    if (out.empty() || out.back().first != n) out.emplace_back(n, 0);
    ++out.back().second;
  }
  return out;
}

// Issue 19's example: below the level where the job fits, Kueue pools the children of every
// chosen domain and spreads the whole count over them (n3 first, the most capacity), rather
// than splitting each block's share among its own nodes (which gave n1:2, n2:2, n3:2).
TEST(KueueBestFit, PoolsTheChildrenOfTheChosenDomains) {
  Cluster c = two_blocks_2_2_3();
  AllocationState s(c);
  JobRequest r = gpus_job(6);
  r.preferred_tier = "block";
  auto gpus = place_or_die(s, r, "kueue-bestfit");
  using V = std::vector<std::pair<std::string, int>>;
  EXPECT_EQ(gpus_per_node(c, gpus), (V{{"n1", 2}, {"n2", 1}, {"n3", 3}}));  // ranks in name order
}

// Unconstrained (no tier, or --unconstrained): LeastFreeCapacity from the node level, never a
// move up. 3 GPUs go to n3, the only node that holds them all; then 2 to n1 (n3 is full, the
// rest tie and n1 sorts first); 5 on an empty cluster fill the least free nodes first: n1, n2,
// then one GPU of n3.
TEST(KueueBestFit, UnconstrainedFillsTheLeastFreeNodesFirst) {
  Cluster c = two_blocks_2_2_3();
  AllocationState s(c);
  using V = std::vector<std::pair<std::string, int>>;
  std::vector<GpuId> first = place_or_die(s, gpus_job(3), "kueue-bestfit");
  EXPECT_EQ(gpus_per_node(c, first), (V{{"n3", 3}}));
  ASSERT_TRUE(s.allocate("first", first));
  JobRequest r = gpus_job(2);
  r.unconstrained = true;
  EXPECT_EQ(gpus_per_node(c, place_or_die(s, r, "kueue-bestfit")), (V{{"n1", 2}}));
  AllocationState empty(c);
  EXPECT_EQ(gpus_per_node(c, place_or_die(empty, gpus_job(5), "kueue-bestfit")), (V{{"n1", 2}, {"n2", 2}, {"n3", 1}}));
}

// Slices: 2 slices of 2 pods, each slice on one node: n3 holds one slice (and a GPU beside it),
// n1 and n2 one each. BestFit at the block level picks b1 (2 slices, 4 GPUs) over the whole
// cluster; with a required block and 3 slices nothing fits.
TEST(KueueBestFit, SlicesStayInsideTheirTier) {
  Cluster c = two_blocks_2_2_3();
  AllocationState s(c);
  using V = std::vector<std::pair<std::string, int>>;
  JobRequest r = gpus_job(4);
  r.required_tier = "block";
  r.slice_size = 2;
  r.slice_tier = "node";
  EXPECT_EQ(gpus_per_node(c, place_or_die(s, r, "kueue-bestfit")), (V{{"n1", 2}, {"n2", 2}}));
  r = gpus_job(6);
  r.slice_size = 2;
  r.slice_tier = "node";
  EXPECT_EQ(gpus_per_node(c, place_or_die(s, r, "kueue-bestfit")), (V{{"n1", 2}, {"n2", 2}, {"n3", 2}}));
  r.required_tier = "block";
  auto norm = normalize(r, c);
  ASSERT_TRUE(norm);
  auto p = place(s, *norm, **find_policy("kueue-bestfit"));
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("allows to fit only 2 out of 3 slice(s) in one block"), std::string::npos)
      << p.error().message;
}

TEST(KueueBestFit, SliceAndUnconstrainedRequestsAreValidated) {
  Cluster c = two_blocks_2_2_3();
  auto invalid = [&](JobRequest r, std::string_view text) {
    auto n = normalize(r, c);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(n.error().message.find(text), std::string::npos) << n.error().message;
  };
  JobRequest r = gpus_job(4);
  r.slice_size = 2;
  invalid(r, "--slice-size needs --slice-tier");
  r.slice_size = 0;
  r.slice_tier = "node";
  invalid(r, "--slice-tier needs --slice-size");
  r.slice_size = 3;
  invalid(r, "cannot be cut into slices of 3");
  r.slice_size = 2;
  r.slice_tier = "rack";
  invalid(r, "slice tier 'rack' is not a tier");
  r.slice_tier = "block";
  r.required_tier = "node";
  invalid(r, "slice tier 'block' is above the required tier 'node'");
  r = gpus_job(4);
  r.unconstrained = true;
  r.preferred_tier = "block";
  invalid(r, "--unconstrained excludes");
  // Other policies refuse slices rather than ignore them.
  r = gpus_job(4);
  r.slice_size = 2;
  r.slice_tier = "node";
  AllocationState s(c);
  auto p = place(s, *normalize(r, c), **find_policy("topo"));
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kUnsupported);
}

TEST(SlurmBlock, SmallestBlockLevelThenSegments) {
  Cluster c = preset("gb200-nvl72?racks=4&racks_per_su=4");  // base blocks = 4 racks of 18 trays
  AllocationState s(c);
  std::vector<GpuId> busy;
  for (std::uint32_t n = 0; n < 10; ++n)
    for (int l = 0; l < 4; ++l) busy.push_back(c.node_gpu(NodeId(n), l));
  ASSERT_TRUE(s.allocate("busy", busy));  // rack 0 has 8 whole trays left
  JobRequest r;
  r.nodes = 8;
  auto gpus = place_or_die(s, r, "slurm-block");
  std::set<std::uint32_t> domains;
  for (GpuId g : gpus) domains.insert(c.node_domain(c.gpu_node(g)).value);
  EXPECT_EQ(domains, (std::set<std::uint32_t>{0}));  // best fit: the fullest block that fits
  r.nodes = 24;
  r.segment = 6;
  gpus = place_or_die(s, r, "slurm-block");
  std::map<std::uint32_t, int> per_domain;
  for (GpuId g : gpus) ++per_domain[c.node_domain(c.gpu_node(g)).value];
  for (auto [d, k] : per_domain) EXPECT_EQ(k % (6 * 4), 0) << "segment split across blocks";
  // Other policies refuse --segment instead of ignoring it.
  r = *normalize(r, c);
  auto p = place(s, r, **find_policy("first-fit"));
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kUnsupported);
}

TEST(Policies, RandomIsReproducibleFromItsSeed) {
  Cluster c = preset("dgx-h100?nodes=16");
  AllocationState s(c);
  JobRequest r = gpus_job(24);
  r.seed = 7;
  auto a = place_or_die(s, r, "random");
  auto b = place_or_die(s, r, "random");
  EXPECT_EQ(a, b);
  r.seed = 8;
  EXPECT_NE(place_or_die(s, r, "random"), a);
}

// A policy that says any free GPUs fit must place every job that fits by count, on a
// scattered state; topo says no (a TP-8 group needs a whole node) and indeed refuses one.
TEST(Policies, FitsAnyFreeGpusMeansCountingIsEnough) {
  Cluster c = preset("dgx-h100?nodes=8");
  AllocationState s(c);
  // Every node half full: 32 GPUs free, none of the nodes whole.
  for (int n = 0; n < 8; ++n) {
    std::vector<GpuId> half;
    for (int l = 0; l < 4; ++l) half.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(n)), l));
    ASSERT_TRUE(s.allocate("half" + std::to_string(n), half));
  }
  int claiming = 0;
  for (const PlacementPolicy* p : placement_policies()) {
    JobRequest r = *normalize(gpus_job(32, 8), c);
    auto got = place(s, r, *p);
    if (p->fits_any_free_gpus()) {
      ++claiming;
      for (int gpus : {1, 5, 17, 32}) {
        JobRequest any = *normalize(gpus_job(gpus), c);
        EXPECT_TRUE(place(s, any, *p)) << p->name() << " " << gpus;
      }
      EXPECT_TRUE(got) << p->name();
    }
    if (p->name() == "topo") {
      EXPECT_FALSE(p->fits_any_free_gpus());
      EXPECT_FALSE(got);
    }
  }
  EXPECT_EQ(claiming, 2);  // first-fit and random
}

TEST(Policies, UnknownPolicyListsTheKnownOnes) {
  auto p = find_policy("best");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("topo"), std::string::npos);
  EXPECT_NE(p.error().message.find("slurm-tree"), std::string::npos);
}

TEST(Requests, NormalizeRejectsInconsistentShapes) {
  Cluster c = preset("dgx-h100?nodes=4");
  JobRequest r = gpus_job(24, 8, 4);  // 24 is not a multiple of 32
  EXPECT_FALSE(normalize(r, c));
  r = gpus_job(16);
  r.nodes = 2;
  EXPECT_FALSE(normalize(r, c));
  r = gpus_job(16);
  r.required_tier = "rack";
  auto n = normalize(r, c);
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message.find("leaf"), std::string::npos);
  r = gpus_job(8);
  r.gpu_model = "A100";
  EXPECT_FALSE(normalize(r, c));
  r.gpu_model = "h100";
  EXPECT_TRUE(normalize(r, c));
}

TEST(Fragmentation, CountsWholeUnitsAndUnusableGpus) {
  Cluster c = preset("dgx-h100?nodes=64");
  AllocationState s(c);
  std::vector<GpuId> busy;
  for (std::uint32_t n = 0; n < 32; ++n) busy.push_back(c.node_gpu(NodeId(n), 0));  // 7 free on every node of leaf 0
  ASSERT_TRUE(s.allocate("busy", busy));
  FragmentationReport f = fragmentation(s, {{8, 1.0}});
  EXPECT_EQ(f.free_whole_nodes, 32);
  EXPECT_EQ(f.free_whole_leaves, 1);
  EXPECT_EQ(f.partially_used_nodes, 32);
  EXPECT_DOUBLE_EQ(f.expected_unusable_gpus, 32 * 7);  // an 8-GPU job fits none of the 7-free nodes
  f = fragmentation(s, {{4, 1.0}});
  EXPECT_DOUBLE_EQ(f.expected_unusable_gpus, 0);
  ASSERT_GE(f.levels.size(), 2u);
  EXPECT_EQ(f.levels[0].level, "node");
  EXPECT_EQ(f.levels[0].largest_free_gpus, 8);
  EXPECT_EQ(f.levels[1].largest_free_gpus, 256);
  EXPECT_FALSE(parse_job_sizes("8:1,x"));
  EXPECT_TRUE(parse_job_sizes("1:0.5,8:0.5"));
}

}  // namespace
}  // namespace toposched

namespace toposched {
namespace {

TEST(CheckPlacement, RejectsEveryBrokenConstraint) {
  Cluster c = preset("dgx-h100?nodes=64");
  AllocationState s(c);
  ASSERT_TRUE(s.allocate("busy", std::vector<GpuId>{c.node_gpu(NodeId(0), 0)}));
  auto gpus_of = [&](std::initializer_list<std::pair<std::uint32_t, int>> list) {
    std::vector<GpuId> out;
    for (auto [n, l] : list) out.push_back(c.node_gpu(NodeId(n), l));
    return out;
  };
  JobRequest two = *normalize(gpus_job(2), c);
  EXPECT_TRUE(check_placement(s, two, gpus_of({{1, 0}, {1, 1}})));
  EXPECT_FALSE(check_placement(s, two, gpus_of({{1, 0}})));          // too few
  EXPECT_FALSE(check_placement(s, two, gpus_of({{1, 0}, {1, 0}})));  // twice
  EXPECT_FALSE(check_placement(s, two, gpus_of({{0, 0}, {1, 0}})));  // owned
  JobRequest whole;
  whole.nodes = 1;
  whole = *normalize(whole, c);
  std::vector<GpuId> node0;
  for (int l = 0; l < 8; ++l) node0.push_back(c.node_gpu(NodeId(0), l));
  std::vector<GpuId> node2;
  for (int l = 0; l < 8; ++l) node2.push_back(c.node_gpu(NodeId(2), l));
  EXPECT_FALSE(check_placement(s, whole, node0));  // node 0 is not wholly free
  EXPECT_TRUE(check_placement(s, whole, node2));
  JobRequest per_node = gpus_job(4);
  per_node.gpus_per_node = 2;
  per_node = *normalize(per_node, c);
  EXPECT_FALSE(check_placement(s, per_node, gpus_of({{1, 0}, {1, 1}, {1, 2}, {2, 0}})));
  EXPECT_TRUE(check_placement(s, per_node, gpus_of({{1, 0}, {1, 1}, {2, 0}, {2, 1}})));
  JobRequest in_leaf = gpus_job(2);
  in_leaf.required_tier = "leaf";
  in_leaf = *normalize(in_leaf, c);
  EXPECT_FALSE(check_placement(s, in_leaf, gpus_of({{1, 0}, {40, 0}})));  // nodes 2 and 41 are in different leaves
  EXPECT_TRUE(check_placement(s, in_leaf, gpus_of({{1, 0}, {20, 0}})));
  JobRequest one_switch = gpus_job(2);
  one_switch.max_switches = 1;
  one_switch = *normalize(one_switch, c);
  EXPECT_FALSE(check_placement(s, one_switch, gpus_of({{1, 0}, {40, 0}})));
  JobRequest a100 = gpus_job(2);
  a100.gpu_model = "H100";
  a100 = *normalize(a100, c);
  a100.gpu_model = "A100";  // normalize would refuse it; check_placement must too
  EXPECT_FALSE(check_placement(s, a100, gpus_of({{1, 0}, {1, 1}})));
}

}  // namespace
}  // namespace toposched
