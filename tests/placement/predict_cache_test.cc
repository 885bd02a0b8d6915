// predict_comm on a state (the ideal side of the estimate cached per thread for the state's
// cluster_key()) against predict_comm on the cluster (recomputed every call): the same
// numbers, exactly, and a new cluster (even one built at the same address) never answered
// from the old one's entries. Also the policies' per-cluster caches (kueue-bestfit's domain
// tree, slurm-block's block table) across a cluster replaced at the same address.
#include <thread>

#include <gtest/gtest.h>

#include "placement/placement.h"
#include "placement/policies/policies.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

JobRequest training(int gpus, int tp, int pp) {
  JobRequest r;
  r.gpus = gpus;
  r.tp = tp;
  r.pp = pp;
  return r;
}

void expect_same(const std::optional<CommPrediction>& a, const std::optional<CommPrediction>& b) {
  ASSERT_EQ(a.has_value(), b.has_value());
  if (!a) return;
  EXPECT_EQ(a->step_comm_us, b->step_comm_us);
  EXPECT_EQ(a->ideal_step_comm_us, b->ideal_step_comm_us);
  EXPECT_EQ(a->step_compute_us, b->step_compute_us);
}

TEST(PredictCache, SameAsUncachedForEveryShapeAndPlacement) {
  const Cluster c = preset("dgx-h100?nodes=64&su_size=8");
  AllocationState s(c);
  const JobRequest shapes[] = {training(8, 8, 1), training(64, 8, 1), training(64, 8, 4), training(128, 4, 2),
                               training(16, 2, 1)};
  int predicted = 0;
  for (int round = 0; round < 2; ++round)  // the second round is answered from the cache
    for (const JobRequest& raw : shapes) {
      auto r = normalize(raw, c);
      ASSERT_TRUE(r) << r.error().message;
      // Packed, and spread one GPU per node (a different placement of the same shape).
      std::vector<GpuId> packed, spread;
      for (int g = 0; g < r->total_gpus; ++g) {
        packed.push_back(GpuId(static_cast<std::uint32_t>(g)));
        spread.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(g % 64)), g / 64));
      }
      for (const auto& gpus : {packed, spread}) {
        auto cached = predict_comm(s, gpus, *r);
        expect_same(cached, predict_comm(c, gpus, *r));
        predicted += cached.has_value();
      }
    }
  EXPECT_EQ(predicted, 20);
}

TEST(PredictCache, ANewClusterAtTheSameAddressIsNotAnsweredFromTheOldOne) {
  // Same GPU ids and shape, a slower network: the ideal differs.
  const Cluster fast = preset("dgx-h100?nodes=32&su_size=8&nic_gbit=400");
  const Cluster slow = preset("dgx-h100?nodes=32&su_size=8&nic_gbit=100");
  auto r = normalize(training(64, 8, 1), fast);
  ASSERT_TRUE(r);
  std::vector<GpuId> gpus;
  for (int g = 0; g < 64; ++g) gpus.push_back(GpuId(static_cast<std::uint32_t>(g)));
  const auto want_fast = predict_comm(fast, gpus, *r), want_slow = predict_comm(slow, gpus, *r);
  ASSERT_TRUE(want_fast && want_slow);
  ASSERT_NE(want_fast->ideal_step_comm_us, want_slow->ideal_step_comm_us);  // else this test shows nothing

  Cluster c = fast;
  {
    AllocationState s(c);
    expect_same(predict_comm(s, gpus, *r), want_fast);
    AllocationState copy = s.snapshot();  // a copy shares the key, and the answer
    EXPECT_EQ(copy.cluster_key(), s.cluster_key());
    expect_same(predict_comm(copy, gpus, *r), want_fast);
  }
  c = slow;  // the same object, other contents
  AllocationState s(c);
  expect_same(predict_comm(s, gpus, *r), want_slow);
}

// kueue-bestfit and slurm-block keep per-cluster data per thread; a cluster replaced at the
// same address must be read afresh: the decision equals the one a fresh thread makes.
TEST(PredictCache, PolicyCachesFollowTheCluster) {
  const Cluster one = preset("dgx-h100?nodes=32&su_size=8");
  const Cluster two = preset("gb200-nvl72?racks=4");
  JobRequest raw;
  raw.gpus = 16;
  for (const PlacementPolicy* p : {&kueue_bestfit_policy(), &slurm_block_policy()}) {
    auto r = normalize(raw, two);
    ASSERT_TRUE(r);
    std::optional<Result<std::vector<GpuId>>> fresh;
    std::thread([&] {
      AllocationState s(two);
      fresh = choose_gpus(s, *r, *p);
    }).join();
    ASSERT_TRUE(fresh && *fresh) << p->name();
    Cluster c = one;
    {
      AllocationState s(c);
      auto r1 = normalize(raw, c);
      ASSERT_TRUE(r1);
      ASSERT_TRUE(choose_gpus(s, *r1, *p)) << p->name();  // fills the caches for `one`
    }
    c = two;
    AllocationState s(c);
    auto got = choose_gpus(s, *r, *p);
    ASSERT_TRUE(got) << p->name() << ": " << got.error().message;
    EXPECT_EQ(*got, **fresh) << p->name();
  }
}

}  // namespace
}  // namespace toposched
