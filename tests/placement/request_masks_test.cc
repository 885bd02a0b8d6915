// The GPU-level options of a place request that place_job honours: blocked GPUs (the GPU
// mask beside the node mask) and Slurm alignment (the GPUs Slurm's cons_tres will allocate).
// Both leave the state as it was: no pseudo job is left behind.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "placement/engine.h"
#include "placement/slurm_alignment.h"
#include "topology/presets.h"

namespace toposched {
namespace {

PlaceRequest first_fit(int gpus) {
  PlaceRequest r;
  r.job.gpus = gpus;
  r.policy = "first-fit";
  return r;
}

TEST(RequestMasks, BlockedGpusAreNeverChosen) {
  auto c = build_preset("dgx-h100?nodes=2");
  ASSERT_TRUE(c);
  AllocationState state(*c);
  PlaceRequest r = first_fit(8);
  // Without a mask first-fit takes node 0 whole; with its GPU 3 blocked it cannot.
  auto plain = place_job(state, r, false);
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->gpus_by_rank.front(), c->node_gpu(NodeId(0), 0));
  r.blocked_gpus = {c->node_gpu(NodeId(0), 3)};
  auto masked = place_job(state, r, true);
  ASSERT_TRUE(masked) << masked.error().message;
  for (GpuId g : masked->gpus_by_rank) EXPECT_NE(g, c->node_gpu(NodeId(0), 3));
  // The blocked GPU is still free and no other job appeared.
  EXPECT_TRUE(state.gpu_free(c->node_gpu(NodeId(0), 3)));
  EXPECT_EQ(state.job_count(), 1u);
  EXPECT_TRUE(state.check_invariants());
  // Every GPU blocked (held ones and a repeat included): nothing is left.
  PlaceRequest all = first_fit(1);
  for (int local = 0; local < 8; ++local) {
    all.blocked_gpus.push_back(c->node_gpu(NodeId(0), local));
    all.blocked_gpus.push_back(c->node_gpu(NodeId(1), local));
  }
  all.blocked_gpus.push_back(c->node_gpu(NodeId(1), 0));
  auto none = place_job(state, all, false);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kInfeasible) << none.error().message;
  // A blocked GPU the cluster does not have is the caller's error.
  PlaceRequest bad = first_fit(1);
  bad.blocked_gpus = {GpuId(static_cast<std::uint32_t>(c->gpu_count()))};
  auto refused = place_job(state, bad, false);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

// On nodes whose GPUs 0-1 are held, Slurm gives a k-GPU share indices 2..k+1: an aligned
// request gets exactly those, whatever the policy picked.
TEST(RequestMasks, SlurmAlignedTakesTheLowestFreeIndices) {
  auto c = build_preset("dgx-h100?nodes=4");
  ASSERT_TRUE(c);
  AllocationState state(*c);
  for (std::uint32_t n = 0; n < c->node_count(); ++n)
    ASSERT_TRUE(state.allocate("slurm-job:" + std::to_string(n),
                               std::vector<GpuId>{c->node_gpu(NodeId(n), 0), c->node_gpu(NodeId(n), 1)}));
  for (const char* policy : {"topo", "first-fit", "random", "slurm-tree"}) {
    PlaceRequest r;
    r.job.gpus = 4;
    r.policy = policy;
    r.slurm_aligned = true;
    auto p = place_job(state, r, false);
    ASSERT_TRUE(p) << policy << ": " << p.error().message;
    // On each node it uses, the job has the node's lowest free indices: 2, 3, ...
    std::map<std::uint32_t, std::set<int>> locals;
    for (GpuId g : p->gpus_by_rank) locals[c->gpu_node(g).index()].insert(c->gpu_local_index(g));
    for (const auto& [node, indices] : locals) {
      std::set<int> lowest;
      for (int i = 0; i < static_cast<int>(indices.size()); ++i) lowest.insert(2 + i);
      EXPECT_EQ(indices, lowest) << policy << " on node " << node;
    }
    EXPECT_EQ(p->policy, policy);
  }
  EXPECT_EQ(state.job_count(), c->node_count());
}

TEST(RequestMasks, AlignmentKeepsTheRankPatternOrFallsBackToAscending) {
  auto c = build_preset("dgx-h100?nodes=2");
  ASSERT_TRUE(c);
  AllocationState state(*c);
  ASSERT_TRUE(state.allocate("busy", std::vector<GpuId>{c->node_gpu(NodeId(0), 0)}));
  // Ranks on GPUs 5, 2 of node 0: the lowest free are 1, 2; the higher planned GPU (5) gets
  // the higher free one (2), so the pattern "second rank lower" is kept.
  auto aligned = align_to_slurm(state, {c->node_gpu(NodeId(0), 5), c->node_gpu(NodeId(0), 2)});
  EXPECT_EQ(local_sequences(*c, aligned), (std::vector<std::vector<int>>{{2, 1}}));
  // Two nodes whose aligned lists differ and one is not ascending: ascending on both.
  auto mixed = align_to_slurm(state, {c->node_gpu(NodeId(0), 5), c->node_gpu(NodeId(0), 2), c->node_gpu(NodeId(1), 0),
                                      c->node_gpu(NodeId(1), 1)});
  EXPECT_EQ(local_sequences(*c, mixed), (std::vector<std::vector<int>>{{1, 2}, {0, 1}}));
}

// Through the engine: a dry run with both options, node marks honoured too.
TEST(RequestMasks, EngineDryRunHonoursBoth) {
  auto c = build_preset("dgx-h100?nodes=2");
  ASSERT_TRUE(c);
  Engine engine(*c, AllocationState(*c));
  Command mark;
  mark.kind = Command::Kind::kSetNodeAvailability;
  mark.availability = {c->node_name(NodeId(1)), "slurm", false, "drain"};
  ASSERT_TRUE(engine.decide_one(mark, {}));
  Command cmd;
  cmd.kind = Command::Kind::kPlace;
  cmd.dry_run = true;
  cmd.place = first_fit(2);
  cmd.place.slurm_aligned = true;
  cmd.place.blocked_gpus = {c->node_gpu(NodeId(0), 0)};
  auto d = engine.decide_one(cmd, {});
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->gpus_by_rank, (std::vector<GpuId>{c->node_gpu(NodeId(0), 1), c->node_gpu(NodeId(0), 2)}));
  EXPECT_EQ(engine.job_count(), 0u);
  cmd.place.job.gpus = 8;  // node 0 has 7 usable GPUs, node 1 is drained
  EXPECT_FALSE(engine.decide_one(cmd, {}));
}

}  // namespace
}  // namespace toposched
