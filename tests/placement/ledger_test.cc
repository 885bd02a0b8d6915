// AllocationLedger: the simulator's state changes only by Mutation records; a failed apply
// changes nothing; place() decides as place_job does and holds what it decided.
#include <gtest/gtest.h>

#include "placement/engine.h"
#include "placement/ledger.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

PlaceRequest request(const std::string& id, int gpus, const std::string& policy = "topo") {
  PlaceRequest r;
  r.policy = policy;
  r.job.job_id = id;
  r.job.gpus = gpus;
  return r;
}

TEST(Ledger, AppliesPlaceAndReleaseRecords) {
  Cluster c = preset("dgx-h100?nodes=2");
  AllocationLedger l(c);
  const GpuId g0 = c.node_gpu(NodeId(0), 0), g1 = c.node_gpu(NodeId(0), 1);
  ASSERT_TRUE(l.apply({.kind = Mutation::Kind::kPlace, .job_id = "a", .gpus_by_rank = {g1, g0}}));
  ASSERT_TRUE(l.hold("b", std::vector<GpuId>{c.node_gpu(NodeId(1), 0)}));
  EXPECT_EQ(l.state().job_ids(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(std::vector<GpuId>(l.state().job_gpus("a").begin(), l.state().job_gpus("a").end()),
            (std::vector<GpuId>{g1, g0}));  // rank order kept
  ASSERT_TRUE(l.release_job("a"));
  EXPECT_TRUE(l.state().gpu_free(g0));
  EXPECT_EQ(l.state().total_free_gpus(), 15);
  // The inverse of that release (as the engine's undo builds it) puts a back first.
  ASSERT_TRUE(l.apply({.kind = Mutation::Kind::kPlace, .job_id = "a", .gpus_by_rank = {g1, g0}, .order = 1}));
  EXPECT_EQ(l.state().job_ids(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(l.state().check_invariants().has_value());
}

TEST(Ledger, AFailedApplyChangesNothing) {
  Cluster c = preset("dgx-h100?nodes=2");
  AllocationLedger l(c);
  const GpuId g0 = c.node_gpu(NodeId(0), 0), g1 = c.node_gpu(NodeId(0), 1);
  ASSERT_TRUE(l.hold("a", std::vector<GpuId>{g0}));
  const AllocationState before = l.state().snapshot();
  EXPECT_FALSE(l.hold("b", std::vector<GpuId>{g1, g0}));  // g0 is a's
  EXPECT_FALSE(l.hold("a", std::vector<GpuId>{g1}));      // a exists
  EXPECT_FALSE(l.release_job("nope"));
  auto mark = l.apply({.kind = Mutation::Kind::kMarkNode, .node = NodeId(1), .mark = NodeMark{"api", "x", 1}});
  ASSERT_FALSE(mark);
  EXPECT_EQ(mark.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(l.state().same_counters(before));
  EXPECT_EQ(l.state().job_ids(), before.job_ids());
  EXPECT_TRUE(l.state().gpu_free(g1));
}

TEST(Ledger, PlaceIsPlaceJobThatHolds) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationLedger l(c);
  AllocationState reference(c);
  for (auto [id, gpus, policy] : {std::tuple{"a", 12, "topo"}, {"b", 3, "first-fit"}, {"c", 16, "topo"}}) {
    auto mine = l.place(request(id, gpus, policy), PlaceDetail::kGpusOnly);
    auto theirs = place_job(reference, request(id, gpus, policy), true, PlaceDetail::kGpusOnly);
    ASSERT_TRUE(mine) << mine.error().message;
    ASSERT_TRUE(theirs);
    EXPECT_EQ(mine->gpus_by_rank, theirs->gpus_by_rank) << id;
  }
  EXPECT_TRUE(l.state().same_counters(reference));
  // decide() holds nothing; a copy is a snapshot the original does not see changes of.
  auto d = l.decide(request("d", 1), PlaceDetail::kGpusOnly);
  ASSERT_TRUE(d);
  EXPECT_FALSE(l.state().has_job("d"));
  AllocationLedger copy = l;
  ASSERT_TRUE(copy.release_job("a"));
  EXPECT_TRUE(l.state().has_job("a"));
  l.copy_from(copy);
  EXPECT_FALSE(l.state().has_job("a"));
  // A taken id is refused as place_job refuses it.
  auto dup = l.place(request("b", 1), PlaceDetail::kGpusOnly);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kConflict);
}

}  // namespace
}  // namespace toposched
