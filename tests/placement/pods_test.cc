// Jobs that come as pods (JobRequest::gpus_per_pod): every policy keeps each pod's ranks on
// one node and may put several pods on a node; check_placement refuses a pod split over
// nodes; normalize refuses shapes that cannot be whole pods.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

JobRequest pods_job(int pods, int gpus_per_pod, int tp = 1) {
  JobRequest r;
  r.gpus = pods * gpus_per_pod;
  r.gpus_per_pod = gpus_per_pod;
  r.tp = tp;
  return r;
}

// Each rank block [k*G, (k+1)*G) on one node; returns the number of distinct nodes.
std::size_t expect_whole_pods(const Cluster& c, const std::vector<GpuId>& gpus, int per_pod, std::string_view what) {
  std::map<std::uint32_t, int> per_node;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    ++per_node[c.gpu_node(gpus[i]).value];
    EXPECT_EQ(c.gpu_node(gpus[i]), c.gpu_node(gpus[i - i % static_cast<std::size_t>(per_pod)]))
        << what << ": rank " << i << " is not on its pod's node";
  }
  for (auto [node, count] : per_node) EXPECT_EQ(count % per_pod, 0) << what << ": node " << node << " holds " << count;
  return per_node.size();
}

// Every node has 6 free GPUs (2 held): a node holds one 4-GPU pod, not 6 GPUs of the job.
TEST(Pods, EveryPolicyKeepsEachPodOnOneNode) {
  Cluster c = preset("dgx-h100?nodes=16");
  AllocationState s(c);
  for (std::uint32_t n = 0; n < 16; ++n)
    ASSERT_TRUE(
        s.allocate("two" + std::to_string(n), std::vector<GpuId>{c.node_gpu(NodeId(n), 0), c.node_gpu(NodeId(n), 1)}));
  for (const PlacementPolicy* p : placement_policies()) {
    for (int tp : {1, 2, 4}) {
      const std::string what = fmt::format("{} tp={}", p->name(), tp);
      JobRequest r = *normalize(pods_job(4, 4, tp), c);
      auto placed = place(s, r, *p);
      ASSERT_TRUE(placed) << what << ": " << placed.error().message;
      ASSERT_EQ(placed->gpus_by_rank.size(), 16u) << what;
      EXPECT_EQ(expect_whole_pods(c, placed->gpus_by_rank, 4, what), 4u) << what;
      // The same job without pods takes 6 GPUs of a node where it can (first-fit does).
      if (p->name() == "first-fit") {
        JobRequest loose = pods_job(4, 4, tp);
        loose.gpus_per_pod = 0;
        auto any = place(s, *normalize(loose, c), *p);
        ASSERT_TRUE(any);
        EXPECT_EQ(c.gpu_node(any->gpus_by_rank[5]), c.gpu_node(any->gpus_by_rank[0])) << what;
      }
    }
  }
}

// The DGX SuperPOD case of the plugin comparison (docs/performance.md): two 4-GPU pods with
// TP 4 fit one 8-GPU node, and topo puts them there (the DP all-reduce stays on NVLink);
// gpus_per_node = 4 still means exactly 4 on each node, so two nodes.
TEST(Pods, TopoPacksTwoPodsOnOneNodeUnlikeGpusPerNode) {
  Cluster c = preset("dgx-h100?nodes=8");
  AllocationState s(c);
  const PlacementPolicy& topo = **find_policy("topo");
  auto pods = place(s, *normalize(pods_job(2, 4, 4), c), topo);
  ASSERT_TRUE(pods) << pods.error().message;
  EXPECT_EQ(pods->node_count, 1);
  EXPECT_EQ(expect_whole_pods(c, pods->gpus_by_rank, 4, "pods"), 1u);
  JobRequest per_node = pods_job(2, 4, 4);
  per_node.gpus_per_pod = 0;
  per_node.gpus_per_node = 4;
  auto fixed = place(s, *normalize(per_node, c), topo);
  ASSERT_TRUE(fixed) << fixed.error().message;
  EXPECT_EQ(fixed->node_count, 2);
  ASSERT_TRUE(pods->predicted_comm_us && fixed->predicted_comm_us);
  EXPECT_LT(*pods->predicted_comm_us, *fixed->predicted_comm_us);
}

// Pods with pipeline stages whose size is not a whole number of pods (tp 2, pp 3, pods of 4:
// 12 GPUs, stages of 4 GPUs = one pod each; and pods of 6: stages cut inside a pod) on
// nodes with 5 free GPUs: still whole pods.
TEST(Pods, TopoStagesAndOddFreeCountsStayWholePods) {
  Cluster c = preset("dgx-h100?nodes=8");
  AllocationState s(c);
  for (std::uint32_t n = 0; n < 8; ++n) {
    std::vector<GpuId> held;
    for (int l = 0; l < 3; ++l) held.push_back(c.node_gpu(NodeId(n), l));
    ASSERT_TRUE(s.allocate("three" + std::to_string(n), held));
  }
  const PlacementPolicy& topo = **find_policy("topo");
  for (int per_pod : {4, 2}) {
    JobRequest r = pods_job(12 / per_pod, per_pod, 2);
    r.pp = 3;
    auto placed = place(s, *normalize(r, c), topo);
    ASSERT_TRUE(placed) << per_pod << ": " << placed.error().message;
    expect_whole_pods(c, placed->gpus_by_rank, per_pod, fmt::format("pods of {}", per_pod));
  }
}

// NVL72 racks of 4-GPU trays: TP 8 groups span two trays of a rack, each tray one pod.
TEST(Pods, TpGroupsOverTraysAreWholePods) {
  Cluster c = preset("gb200-nvl72?racks=2&racks_per_su=2");
  AllocationState s(c);
  auto placed = place(s, *normalize(pods_job(4, 4, 8), c), **find_policy("topo"));
  ASSERT_TRUE(placed) << placed.error().message;
  EXPECT_EQ(expect_whole_pods(c, placed->gpus_by_rank, 4, "trays"), 4u);
  // A TP group of 6 over trays cannot be cut into whole pods of 4 GPUs: refused with the reason.
  JobRequest odd = pods_job(3, 4, 6);
  auto refused = place(s, *normalize(odd, c), **find_policy("topo"));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("whole pods of 4"), std::string::npos) << refused.error().message;
}

TEST(Pods, CheckPlacementRefusesAPodSplitOverNodes) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  auto gpus_of = [&](std::initializer_list<std::pair<std::uint32_t, int>> list) {
    std::vector<GpuId> out;
    for (auto [n, l] : list) out.push_back(c.node_gpu(NodeId(n), l));
    return out;
  };
  JobRequest r = *normalize(pods_job(2, 4), c);
  // Both pods on node 0: several pods to a node.
  EXPECT_TRUE(check_placement(s, r, gpus_of({{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}, {0, 6}, {0, 7}})));
  EXPECT_TRUE(check_placement(s, r, gpus_of({{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 4}, {1, 5}, {1, 6}, {1, 7}})));
  // Four GPUs on each node, but each pod's ranks on two nodes.
  auto split = check_placement(s, r, gpus_of({{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}}));
  ASSERT_FALSE(split);
  EXPECT_NE(split.error().message.find("pod 0"), std::string::npos) << split.error().message;
  // Six on one node, two on another.
  EXPECT_FALSE(check_placement(s, r, gpus_of({{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}, {1, 0}, {1, 1}})));
}

TEST(Pods, NormalizeRefusesShapesThatAreNotWholePods) {
  Cluster c = preset("dgx-h100?nodes=4");
  JobRequest r = pods_job(1, 4);
  r.gpus = 10;  // not a multiple of 4
  auto bad = normalize(r, c);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("pods of 4"), std::string::npos) << bad.error().message;
  r = pods_job(2, 4);
  r.gpus_per_node = 6;
  r.gpus = 12;
  EXPECT_FALSE(normalize(r, c));  // 6 per node is not whole pods of 4
  r.gpus_per_node = 8;
  r.gpus = 16;
  EXPECT_TRUE(normalize(r, c));
  EXPECT_FALSE(normalize(pods_job(1, 16), c));  // larger than any node
  JobRequest neg = pods_job(1, 4);
  neg.gpus_per_pod = -1;
  EXPECT_FALSE(normalize(neg, c));
}

}  // namespace
}  // namespace toposched
