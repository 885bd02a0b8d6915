// The placement engine's placer keeps place_around's hold on the reserved GPUs between
// consecutive calls (sim/placement_backend.cc): every answer must be the one a placer that
// builds the hold afresh for each call gives, and nothing of the hold may leak into the
// other calls (place, reserve, fragmentation).
#include <algorithm>

#include <gtest/gtest.h>

#include "sim/backend.h"
#include "support/preset_cluster.h"

namespace toposched::sim {
namespace {

using toposched::testing::preset;

SimJob training(int gpus, int tp) {
  SimJob j;
  j.gpus = gpus;
  j.tp = tp;
  j.kind = "llm-dense";
  return j;
}

// The same start on two placers: jobs of 4 and 2 GPUs spread over the nodes, some ended.
void prepare(Placer& p) {
  for (std::uint32_t j = 0; j < 12; ++j) ASSERT_TRUE(p.place(training(j % 2 ? 4 : 2, j % 2 ? 4 : 2), j));
  for (std::uint32_t j : {1u, 4u, 7u, 10u}) p.release(j);
}

TEST(HoldReuse, ConsecutivePlaceAroundCallsAnswerAsFreshHoldsDo) {
  const Cluster c = preset("dgx-h100?nodes=8&su_size=4");  // 64 GPUs, two leaves
  auto kept = make_placer(c, "topo", 1);
  auto fresh = make_placer(c, "topo", 1);
  ASSERT_TRUE(kept && fresh);
  Placer& a = **kept;
  Placer& b = **fresh;
  prepare(a);
  prepare(b);
  // A reservation for a job of four whole nodes once the first running jobs end.
  const SimJob head = training(32, 8);
  const std::vector<std::uint32_t> by_end = {0, 2, 3, 5, 6, 8, 9, 11};
  auto ra = a.reserve(head, 99, by_end, 0);
  auto rb = b.reserve(head, 99, by_end, 0);
  ASSERT_TRUE(ra && rb);
  ASSERT_EQ(ra->gpus, rb->gpus);
  ASSERT_GT(ra->gpus_free_now, 0u);  // some reserved GPUs are free now: the hold is not empty
  const double frag_before = b.fragmentation();
  // A backfill pass: many jobs placed around the reservation in a row (some do not fit).
  int placed = 0;
  for (std::uint32_t j = 20; j < 34; ++j) {
    const SimJob job = training(j % 3 == 0 ? 8 : j % 3 == 1 ? 2 : 1, j % 3 == 0 ? 8 : j % 3 == 1 ? 2 : 1);
    auto ga = a.place_around(job, j, ra->gpus, 1);   // keeps the hold from the previous call
    auto gb = b.place_around(job, j, rb->gpus, 1);
    b.end_pass();                                 // drops it: the next call builds it again
    SCOPED_TRACE(::testing::Message() << "job " << j << " of " << job.gpus << " GPUs");
    ASSERT_EQ(ga.has_value(), gb.has_value());
    if (!ga) continue;
    ++placed;
    EXPECT_EQ(*ga, *gb);
    for (GpuId g : *ga) EXPECT_EQ(std::find(ra->gpus.begin(), ra->gpus.end(), g), ra->gpus.end()) << "took a reserved GPU";
  }
  EXPECT_GT(placed, 0);
  // Fragmentation while a hold is kept counts the held GPUs as free, as after the pass.
  const double frag_holding = a.fragmentation();
  a.end_pass();
  EXPECT_EQ(frag_holding, a.fragmentation());
  EXPECT_EQ(a.fragmentation(), b.fragmentation());
  EXPECT_NE(frag_before, b.fragmentation());
  // A plain place right after place_around (no end_pass between) sees the reserved GPUs
  // free again: the same answers as the placer that never kept a hold.
  auto around_a = a.place_around(training(1, 1), 50, ra->gpus, 1);
  auto around_b = b.place_around(training(1, 1), 50, rb->gpus, 1);
  ASSERT_EQ(around_a.has_value(), around_b.has_value());  // either way, `a` holds the reservation now
  if (around_a) {
    EXPECT_EQ(*around_a, *around_b);
  }
  for (std::uint32_t j = 51; j < 55; ++j) {
    auto pa = a.place(training(8, 8), j);
    auto pb = b.place(training(8, 8), j);
    ASSERT_EQ(pa.has_value(), pb.has_value());
    if (pa) {
      EXPECT_EQ(*pa, *pb);
    }
  }
  EXPECT_EQ(a.fragmentation(), b.fragmentation());
}

}  // namespace
}  // namespace toposched::sim
