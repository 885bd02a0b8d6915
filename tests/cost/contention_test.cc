// Max-min fair sharing of uplinks between running jobs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cost/contention.h"
#include "cost/job_comm.h"
#include "cost/selection.h"
#include "support/two_leaf_cluster.h"
#include "topology/presets.h"

namespace toposched {
namespace {

using testing::two_leaves;

std::vector<GpuId> sel(const Cluster& c, std::string_view s) { return *parse_gpu_selection(c, s); }

TEST(Contention, JobsCrossingAnOversubscribedUplinkShareItFairly) {
  Cluster c = two_leaves(4.0);
  // Each leaf's uplink carries 4 nodes x 8 x 50 GB/s x 64/66 / 4 = one node's worth.
  auto a = sel(c, "n00,n10");
  auto b = sel(c, "n01,n11");
  auto local = sel(c, "n02,n03");  // inside leaf 0: no uplink
  std::vector<JobTraffic> jobs = {{a, 0}, {b, 0}, {local, 0}};
  auto r = network_shares(c, jobs);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->share.size(), 3u);
  EXPECT_NEAR(r->share[0], 0.5, 1e-9);
  EXPECT_NEAR(r->share[1], 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(r->share[2], 1.0);
  ASSERT_EQ(r->uplinks.size(), 2u);
  for (const auto& u : r->uplinks) {
    EXPECT_EQ(u.jobs, 2);
    EXPECT_NEAR(u.used_GBps, u.capacity_GBps, 1e-6);
  }
}

TEST(Contention, AloneOnAFullBisectionFabricAJobGetsEverything) {
  Cluster c = two_leaves(1.0);
  auto a = sel(c, "n00,n10");
  auto b = sel(c, "n01,n11");
  std::vector<JobTraffic> jobs = {{a, 0}, {b, 0}};
  auto r = network_shares(c, jobs);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->share[0], 1.0);
  EXPECT_DOUBLE_EQ(r->share[1], 1.0);
}

TEST(Contention, MaxMinGivesSmallDemandsInFull) {
  Cluster c = two_leaves(4.0);
  auto a = sel(c, "n00,n10");
  auto b = sel(c, "n01,n11");
  const double node = 8 * 50 * 64.0 / 66.0;
  // Job a asks for a tenth of the uplink; b gets the rest.
  std::vector<JobTraffic> jobs = {{a, node / 10}, {b, 0}};
  auto r = network_shares(c, jobs);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->share[0], 1.0);
  EXPECT_NEAR(r->share[1], 0.9, 1e-9);
}

TEST(Contention, JobsInsideOneNodeOrDomainUseNoUplink) {
  auto c = build_preset("gb200-nvl72?racks=2&racks_per_su=1");
  ASSERT_TRUE(c.has_value());
  auto rack = parse_gpu_selection(*c, "gb200-r01-n[01-18]");
  auto node = parse_gpu_selection(*c, "gb200-r02-n01");
  ASSERT_TRUE(rack && node);
  std::vector<JobTraffic> jobs = {{*rack, 0}, {*node, 0}};
  auto r = network_shares(*c, jobs);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->share[0], 1.0);
  EXPECT_DOUBLE_EQ(r->share[1], 1.0);
  EXPECT_TRUE(r->uplinks.empty());
}

TEST(Contention, BadInputIsAnError) {
  Cluster c = two_leaves(2.0);
  std::vector<GpuId> none;
  std::vector<GpuId> bad = {GpuId(9999)};
  auto ok = sel(c, "n00");
  EXPECT_FALSE(network_shares(c, std::vector<JobTraffic>{{none, 0}}).has_value());
  EXPECT_FALSE(network_shares(c, std::vector<JobTraffic>{{bad, 0}}).has_value());
  EXPECT_FALSE(network_shares(c, std::vector<JobTraffic>{{ok, -1}}).has_value());
  auto empty = network_shares(c, {});
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->share.empty());
}

}  // namespace
}  // namespace toposched

namespace toposched {
namespace {

TEST(Contention, RunningJobsSlowEachOtherOnSharedUplinks) {
  Cluster c = two_leaves(4.0);
  ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 2;
  WorkloadModel model = *workload_class("llm-dense");
  auto a = sel(c, "n00,n10");
  auto b = sel(c, "n01,n11");
  std::vector<RunningJob> alone = {{a, &plan, &model}};
  std::vector<RunningJob> both = {{a, &plan, &model}, {b, &plan, &model}};
  auto one = estimate_running_jobs(c, alone);
  auto two = estimate_running_jobs(c, both);
  ASSERT_TRUE(one.has_value()) << one.error().message;
  ASSERT_TRUE(two.has_value()) << two.error().message;
  ASSERT_EQ(two->size(), 2u);
  EXPECT_GT((*two)[0].step_comm_us, (*one)[0].step_comm_us);
  EXPECT_GT((*two)[0].slowdown, (*one)[0].slowdown);
  EXPECT_DOUBLE_EQ((*two)[0].step_comm_us, (*two)[1].step_comm_us);  // symmetric
  std::vector<RunningJob> broken = {{a, nullptr, &model}};
  EXPECT_FALSE(estimate_running_jobs(c, broken).has_value());
}

}  // namespace
}  // namespace toposched

namespace toposched {
namespace {

TEST(Contention, SharesReplaceTheStaticOversubscriptionWorstCase) {
  Cluster c = two_leaves(4.0);
  ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 2;
  WorkloadModel model = *workload_class("llm-dense");
  auto a = sel(c, "n00,n10");
  auto b = sel(c, "n01,n11");
  auto d = sel(c, "n02,n12");
  auto e = sel(c, "n03,n13");
  // Static model: every node under the 4:1 leaf sends at once.
  auto fixed = estimate_job_comm(c, a, plan, model);
  ASSERT_TRUE(fixed.has_value());
  std::vector<RunningJob> alone = {{a, &plan, &model}};
  std::vector<RunningJob> four = {{a, &plan, &model}, {b, &plan, &model}, {d, &plan, &model}, {e, &plan, &model}};
  auto one = estimate_running_jobs(c, alone);
  auto all = estimate_running_jobs(c, four);
  ASSERT_TRUE(one && all);
  // Alone, the job gets the whole uplink: faster than the worst case.
  EXPECT_LT((*one)[0].step_comm_us, fixed->step_comm_us);
  // With every node of both leaves crossing, contention reaches the worst case exactly.
  for (const auto& est : *all) EXPECT_NEAR(est.step_comm_us, fixed->step_comm_us, 1e-6 * fixed->step_comm_us);
}

TEST(MaxMinRates, LeftoverCapacityGoesToJobsNotHeldElsewhere) {
  // Jobs 0, 2, 3 share link 0; jobs 0 and 1 share link 1; job 4 crosses nothing.
  std::vector<double> demand = {1, 1, 1, 1, 0.7};
  std::vector<double> capacity = {1, 1};
  std::vector<std::vector<std::size_t>> link_jobs = {{0, 2, 3}, {0, 1}};
  auto rate = max_min_rates(demand, capacity, link_jobs);
  EXPECT_NEAR(rate[0], 1.0 / 3, 1e-12);
  EXPECT_NEAR(rate[2], 1.0 / 3, 1e-12);
  EXPECT_NEAR(rate[1], 2.0 / 3, 1e-12);  // a worst-link split would give it 1/2
  EXPECT_DOUBLE_EQ(rate[4], 0.7);
  // A job whose demand is below its fair share keeps its demand; the rest is shared.
  demand = {0.1, 1, 1, 1, 0};
  rate = max_min_rates(demand, capacity, link_jobs);
  EXPECT_NEAR(rate[0], 0.1, 1e-12);
  EXPECT_NEAR(rate[2], 0.45, 1e-12);
  EXPECT_NEAR(rate[1], 0.9, 1e-12);
}

}  // namespace
}  // namespace toposched
