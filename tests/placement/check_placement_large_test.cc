// check_placement on large GPU lists (256 or more: the radix-sorted path, placement.cc): the
// same verdicts and the same first offending GPU as on small lists, whatever the rank order.
// A valid list is answered by one unsorted pass (per-thread stamps per GPU); any fault sends
// it to the sorted check, whose first offending GPU the messages below name.
#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "placement/allocation_state.h"
#include "placement/job_request.h"
#include "placement/placement.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

JobRequest gpus_request(int gpus, const Cluster& c) {
  JobRequest r;
  r.gpus = gpus;
  return *normalize(r, c);
}

TEST(CheckPlacementLarge, ShuffledRanksDuplicatesAndOwnedGpusOfThousandsOfGpus) {
  const Cluster c = preset("dgx-h100?nodes=600");  // 4,800 GPUs: ids need two radix passes
  AllocationState s(c);
  ASSERT_TRUE(s.allocate("busy", std::vector<GpuId>{c.node_gpu(NodeId(590), 3)}));
  std::vector<GpuId> gpus;
  for (std::uint32_t n = 50; n < 562; ++n)  // 512 nodes, 4,096 GPUs
    for (int l = 0; l < 8; ++l) gpus.push_back(c.node_gpu(NodeId(n), l));
  std::mt19937 rng(3);
  std::shuffle(gpus.begin(), gpus.end(), rng);
  const JobRequest r = gpus_request(4096, c);
  EXPECT_TRUE(check_placement(s, r, gpus));
  // Two duplicates: the error names the lower GPU id, as a sorted scan finds it first.
  std::vector<GpuId> twice = gpus;
  twice[100] = c.node_gpu(NodeId(400), 5);
  twice[3000] = c.node_gpu(NodeId(400), 5);
  twice[7] = c.node_gpu(NodeId(60), 1);
  twice[4000] = c.node_gpu(NodeId(60), 1);
  auto dup = check_placement(s, r, twice);
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find(fmt::format("GPU {} appears twice", c.node_gpu(NodeId(60), 1).value)),
            std::string::npos)
      << dup.error().message;
  // A GPU another job owns.
  std::vector<GpuId> owned = gpus;
  owned[2048] = c.node_gpu(NodeId(590), 3);
  auto busy = check_placement(s, r, owned);
  ASSERT_FALSE(busy);
  EXPECT_NE(busy.error().message.find("is not free"), std::string::npos) << busy.error().message;
  // A GPU outside the cluster (the largest id decides the number of passes).
  std::vector<GpuId> outside = gpus;
  outside[10] = GpuId(static_cast<std::uint32_t>(c.gpu_count()) + 70000);
  EXPECT_FALSE(check_placement(s, r, outside));
}

TEST(CheckPlacementLarge, TheOnePassCheckAnswersTheSameListAgainAndAgain) {
  const Cluster c = preset("dgx-h100?nodes=64");
  AllocationState s(c);
  std::vector<GpuId> gpus;
  for (std::uint32_t n = 0; n < 40; ++n)
    for (int l = 0; l < 8; ++l) gpus.push_back(c.node_gpu(NodeId(n), l));
  const JobRequest r = gpus_request(320, c);
  // The stamps of one check must not make the next see its GPUs as repeated.
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(check_placement(s, r, gpus)) << k;
  // A repeat right after a valid check of the same GPUs is still found.
  std::vector<GpuId> twice = gpus;
  twice.back() = twice.front();
  EXPECT_FALSE(check_placement(s, r, twice));
  EXPECT_TRUE(check_placement(s, r, gpus));
  // A model the nodes do not have.
  JobRequest other = r;
  other.gpu_model = "B200";
  auto wrong = check_placement(s, other, gpus);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("not 'B200'"), std::string::npos) << wrong.error().message;
}

// A GPU count per node (every multi-node slurm-block job): a valid list is answered by the
// one pass too, counting the job's GPUs per node; a node with another count goes to the
// sorted check, which names the lowest such node, whatever the rank order.
TEST(CheckPlacementLarge, GpusPerNodeCountedInTheOnePass) {
  const Cluster c = preset("dgx-h100?nodes=600");
  AllocationState s(c);
  JobRequest whole;
  whole.gpus = 4096;
  whole.gpus_per_node = 8;
  const JobRequest r = *normalize(whole, c);
  ASSERT_EQ(r.gpus_per_node, 8);
  std::vector<GpuId> gpus;
  for (std::uint32_t n = 50; n < 562; ++n)
    for (int l = 0; l < 8; ++l) gpus.push_back(c.node_gpu(NodeId(n), l));
  std::mt19937 rng(5);
  std::shuffle(gpus.begin(), gpus.end(), rng);
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(check_placement(s, r, gpus)) << k;
  // Node 300 gives one GPU to node 562: 7 and 1 GPUs, both refused; node 300 is named first.
  std::vector<GpuId> uneven = gpus;
  *std::find(uneven.begin(), uneven.end(), c.node_gpu(NodeId(300), 7)) = c.node_gpu(NodeId(562), 0);
  auto bad = check_placement(s, r, uneven);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, fmt::format("node {} holds 7 GPUs of the job, not 8", c.node_name(NodeId(300))));
  EXPECT_TRUE(check_placement(s, r, gpus));  // the counts of the failed check do not linger
  // Four per node: the same GPUs hold eight on each node.
  JobRequest four = r;
  four.gpus_per_node = 4;
  auto eight = check_placement(s, four, gpus);
  ASSERT_FALSE(eight);
  EXPECT_EQ(eight.error().message, fmt::format("node {} holds 8 GPUs of the job, not 4", c.node_name(NodeId(50))));
  // Four GPUs of each of the 600 nodes (alternate halves): valid for four per node.
  std::vector<GpuId> halves;
  for (std::uint32_t n = 0; n < 600; ++n)
    for (int l = 0; l < 4; ++l) halves.push_back(c.node_gpu(NodeId(n), l + 4 * static_cast<int>(n % 2)));
  four.total_gpus = four.gpus = static_cast<int>(halves.size());
  std::shuffle(halves.begin(), halves.end(), rng);
  EXPECT_TRUE(check_placement(s, four, halves));
}

}  // namespace
}  // namespace toposched
