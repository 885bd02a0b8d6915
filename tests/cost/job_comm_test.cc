// The job communication model: rank order and groups, per-group times on the real GPUs,
// the ideal placement and the slowdown.
#include <random>

#include <gtest/gtest.h>

#include "cost/job_comm.h"
#include "cost/selection.h"
#include "topology/presets.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

const GroupComm* group(const JobCommEstimate& e, std::string_view kind) {
  for (const auto& g : e.groups)
    if (g.kind == kind) return &g;
  return nullptr;
}

TEST(JobComm, MegatronOrderBeatsScrambledOrderOnTheSameGpus) {
  // Acceptance 3: TP=8 x DP=4 on 4 nodes.
  Cluster c = preset("dgx-h100?nodes=4");
  ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 4;
  auto model = workload_class("llm-dense");
  ASSERT_TRUE(model.has_value());
  std::vector<GpuId> megatron, scrambled;
  for (int r = 0; r < 32; ++r) megatron.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(r / 8)), r % 8));
  // Same 32 GPUs, rank r on node r % 4: every TP group spans all four nodes.
  for (int r = 0; r < 32; ++r) scrambled.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(r % 4)), r / 4));
  auto good = estimate_job_comm(c, megatron, plan, *model);
  auto bad = estimate_job_comm(c, scrambled, plan, *model);
  ASSERT_TRUE(good.has_value()) << good.error().message;
  ASSERT_TRUE(bad.has_value()) << bad.error().message;
  const GroupComm* tp_good = group(*good, "tp");
  const GroupComm* tp_bad = group(*bad, "tp");
  ASSERT_TRUE(tp_good && tp_bad);
  EXPECT_EQ(tp_good->groups, 4);
  EXPECT_EQ(tp_good->group_size, 8);
  EXPECT_NE(tp_good->time_us, tp_bad->time_us);
  EXPECT_GT(tp_bad->time_us, 2 * tp_good->time_us);  // NVLink vs the network
  EXPECT_GT(bad->step_comm_us, good->step_comm_us);
  EXPECT_DOUBLE_EQ(good->slowdown, 1.0);
  EXPECT_GT(bad->slowdown, 1.5);
  // No compute time given: nothing to hide behind, every kind is exposed in full.
  EXPECT_NEAR(bad->exposed_comm_us, bad->step_comm_us, 1e-6 * bad->step_comm_us);
  // One fraction given: it applies to every kind alike.
  WorkloadModel uniform = *model;
  uniform.overlap = 0.3;
  auto u = estimate_job_comm(c, scrambled, plan, uniform);
  ASSERT_TRUE(u.has_value());
  EXPECT_NEAR(u->exposed_comm_us, u->step_comm_us * 0.7, 1e-6 * u->step_comm_us);
}

TEST(JobComm, SplittingTensorParallelAcrossNodesIsSlower) {
  Cluster c = preset("dgx-h100?nodes=2");
  ParallelPlan plan;
  plan.tp = 8;
  auto model = *workload_class("inference");
  auto whole = parse_gpu_selection(c, "dgx-h100-001");
  auto split = parse_gpu_selection(c, "dgx-h100-001:0-3,dgx-h100-002:0-3");
  ASSERT_TRUE(whole && split);
  auto a = estimate_job_comm(c, *whole, plan, model);
  auto b = estimate_job_comm(c, *split, plan, model);
  ASSERT_TRUE(a && b);
  EXPECT_GT(group(*b, "tp")->time_us, group(*a, "tp")->time_us);
  EXPECT_GT(b->slowdown, 1.0);
  EXPECT_DOUBLE_EQ(a->slowdown, 1.0);
}

TEST(JobComm, RankOrderDefinesTheGroups) {
  ParallelPlan p;
  p.tp = 2;
  p.dp = 2;
  p.pp = 2;
  EXPECT_EQ(p.gpus(), 8);
  // Default order tp-cp-ep-dp-pp: rank = tp + 2 dp + 4 pp.
  EXPECT_EQ(*group_of_rank(p, "tp", 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(*group_of_rank(p, "dp", 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(*group_of_rank(p, "pp", 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(*group_of_rank(p, "cp", 5), (std::vector<int>{5}));
  p.order = "dp-tp-cp-ep-pp";  // DP innermost
  EXPECT_EQ(*group_of_rank(p, "dp", 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(*group_of_rank(p, "tp", 5), (std::vector<int>{5, 7}));
  EXPECT_FALSE(group_of_rank(p, "xp", 0).has_value());
  EXPECT_FALSE(group_of_rank(p, "tp", 8).has_value());
}

TEST(JobComm, PlanAndModelValidation) {
  ParallelPlan p;
  EXPECT_TRUE(validate_plan(p).has_value());
  p.order = "tp-cp-ep-dp";
  EXPECT_FALSE(validate_plan(p).has_value());
  p.order = "tp-tp-ep-dp-pp";
  EXPECT_FALSE(validate_plan(p).has_value());
  p.order = "tp-cp-ep-dp-pp";
  p.tp = 0;
  EXPECT_FALSE(validate_plan(p).has_value());
  for (auto name : workload_class_names()) {
    auto m = workload_class(name);
    ASSERT_TRUE(m.has_value()) << name;
    EXPECT_TRUE(validate_workload(*m).has_value()) << name;
  }
  auto unknown = workload_class("llm-giant");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().message.find("llm-moe"), std::string::npos);
  WorkloadModel m = *workload_class("llm-dense");
  m.overlap = 1.0;
  EXPECT_FALSE(validate_workload(m).has_value());
}

TEST(JobComm, WrongGpuCountIsAnError) {
  Cluster c = preset("dgx-h100?nodes=2");
  ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 2;
  auto gpus = parse_gpu_selection(c, "dgx-h100-001");
  auto e = estimate_job_comm(c, *gpus, plan, *workload_class("llm-dense"));
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("16"), std::string::npos);
}

TEST(JobComm, MoeJobsPayForExpertAllToAll) {
  Cluster c = preset("dgx-h100?nodes=4");
  ParallelPlan plan;
  plan.tp = 4;
  plan.ep = 8;
  auto gpus = parse_gpu_selection(c, "dgx-h100-[001-004]");
  auto e = estimate_job_comm(c, *gpus, plan, *workload_class("llm-moe"));
  ASSERT_TRUE(e.has_value()) << e.error().message;
  const GroupComm* ep = group(*e, "ep");
  ASSERT_NE(ep, nullptr);
  EXPECT_EQ(ep->collective, "all-to-all");
  EXPECT_GT(ep->time_us, 0);
  // A dense model has no expert traffic even with ep > 1.
  auto dense = estimate_job_comm(c, *gpus, plan, *workload_class("llm-dense"));
  ASSERT_TRUE(dense.has_value());
  EXPECT_EQ(group(*dense, "ep")->time_us, 0);
}

TEST(JobComm, IdealPlacementPacksUnderOneLeaf) {
  Cluster c = preset("dgx-h100?nodes=128");
  auto ideal = ideal_placement(c, 64, c.node_gpu(NodeId(100), 0));
  ASSERT_TRUE(ideal.has_value());
  ASSERT_EQ(ideal->size(), 64u);
  SwitchId leaf = c.node_switch(c.gpu_node((*ideal)[0]));
  for (GpuId g : *ideal) EXPECT_EQ(c.node_switch(c.gpu_node(g)), leaf);
  EXPECT_EQ(c.gpu_local_index((*ideal)[9]), 1);
  EXPECT_FALSE(ideal_placement(c, 2000, c.node_gpu(NodeId(0), 0)).has_value());
}

TEST(JobComm, SlowdownIsAtLeastOneForAnyPlacement) {
  Cluster c = preset("dgx-h100?nodes=96");
  ParallelPlan plan;
  plan.tp = 4;
  plan.pp = 2;
  plan.dp = 4;
  auto model = *workload_class("llm-dense");
  std::mt19937 rng(42);
  std::vector<GpuId> all;
  for (std::uint32_t g = 0; g < c.gpu_count(); ++g) all.push_back(GpuId(g));
  for (int trial = 0; trial < 10; ++trial) {
    std::shuffle(all.begin(), all.end(), rng);
    std::span<const GpuId> gpus(all.data(), 32);
    auto e = estimate_job_comm(c, gpus, plan, model);
    ASSERT_TRUE(e.has_value());
    EXPECT_GE(e->slowdown, 1.0);
    EXPECT_LE(e->ideal_step_comm_us, e->step_comm_us);
    EXPECT_GE(e->step_slowdown, 1.0);
  }
}

TEST(JobComm, NetworkShareSlowsOnlyNetworkGroups) {
  Cluster c = preset("dgx-h100?nodes=4");
  ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 4;
  auto gpus = parse_gpu_selection(c, "dgx-h100-[001-004]");
  auto model = *workload_class("llm-dense");
  auto full = estimate_job_comm(c, *gpus, plan, model);
  auto half = estimate_job_comm(c, *gpus, plan, model, CostOptions{0.5});
  ASSERT_TRUE(full && half);
  EXPECT_DOUBLE_EQ(group(*half, "tp")->time_us, group(*full, "tp")->time_us);
  EXPECT_GT(group(*half, "dp")->time_us, 1.5 * group(*full, "dp")->time_us);
  EXPECT_GT(half->slowdown, 1.0);  // the ideal is the job alone
}

TEST(JobComm, ComputeTimeDilutesTheStepSlowdown) {
  Cluster c = preset("dgx-h100?nodes=4");
  ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 4;
  std::vector<GpuId> scrambled;
  for (int r = 0; r < 32; ++r) scrambled.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(r % 4)), r / 4));
  auto model = *workload_class("llm-dense");
  model.compute_us_per_step = 1e7;
  auto e = estimate_job_comm(c, scrambled, plan, model);
  ASSERT_TRUE(e.has_value());
  EXPECT_GT(e->step_slowdown, 1.0);
  EXPECT_LT(e->step_slowdown, e->slowdown);
  // Compute, bubble (none: pp 1) and the straggler lag are the same on both placements.
  EXPECT_DOUBLE_EQ(e->bubble_us, 0);
  EXPECT_GT(e->straggler_us, 0);
  const double fixed = 1e7 + e->straggler_us;
  double expected = (fixed + e->exposed_comm_us) / (fixed + e->ideal_exposed_comm_us);
  EXPECT_NEAR(e->step_slowdown, expected, 1e-12);
}

TEST(JobComm, SequenceParallelTpIsAnAllGatherAndAReduceScatter) {
  // One DGX H100 node, TP 8: with sequence parallelism each of the 4 per layer and micro-batch
  // is an all-gather plus a reduce-scatter of the micro-batch's activations; without it one
  // all-reduce of the same bytes, which NVLink SHARP makes the cheaper of the two.
  Cluster c = preset("dgx-h100?nodes=1");
  ParallelPlan plan;
  plan.tp = 8;
  std::vector<GpuId> gpus;
  for (int i = 0; i < 8; ++i) gpus.push_back(c.node_gpu(NodeId(0), i));
  auto model = *workload_class("llm-dense");
  const double act =
      static_cast<double>(model.sequence) * model.micro_batch * model.hidden * model.bytes_per_element;
  const int calls = 4 * model.layers * model.micro_batches;
  auto tp_of = [&](const WorkloadModel& m) {
    auto e = estimate_job_comm(c, gpus, plan, m);
    EXPECT_TRUE(e.has_value());
    return e->groups.at(0);
  };
  auto time_of = [&](Collective k) {
    return estimate_collective(c, gpus, k, act, Algorithm::kAuto, CostOptions{})->time_us;
  };
  model.sequence_parallel = true;
  const GroupComm sp = tp_of(model);
  EXPECT_EQ(sp.collective, "allgather+reduce-scatter");
  EXPECT_NEAR(sp.time_us, calls * (time_of(Collective::kAllGather) + time_of(Collective::kReduceScatter)),
              1e-6 * sp.time_us);
  model.sequence_parallel = false;
  const GroupComm ar = tp_of(model);
  EXPECT_EQ(ar.collective, "allreduce");
  EXPECT_NEAR(ar.time_us, calls * time_of(Collective::kAllReduce), 1e-6 * ar.time_us);
  EXPECT_GT(sp.time_us, ar.time_us);
  // Full recomputation runs the forward's two again: 6 per layer and micro-batch.
  model.recompute = Recompute::kFull;
  EXPECT_NEAR(tp_of(model).time_us, ar.time_us * 6 / 4, 1e-6 * ar.time_us);
}

}  // namespace
}  // namespace toposched

namespace toposched {
namespace {

TEST(JobComm, IdealPlacementPrefersOneNvlinkDomain) {
  auto c = build_preset("gb200-nvl72?racks=4&racks_per_su=4");
  ASSERT_TRUE(c.has_value());
  // 64 GPUs = 16 trays: one NVL72 rack holds them, so the ideal stays in one domain.
  auto ideal = ideal_placement(*c, 64, c->node_gpu(NodeId(40), 0));
  ASSERT_TRUE(ideal.has_value());
  DomainId d = c->node_domain(c->gpu_node((*ideal)[0]));
  ASSERT_TRUE(d.valid());
  for (GpuId g : *ideal) EXPECT_EQ(c->node_domain(c->gpu_node(g)), d);
}

TEST(JobComm, IdealPlacementKeepsEachPipelineStageInOneDomain) {
  auto c = build_preset("gb200-nvl72?racks=2");
  ASSERT_TRUE(c.has_value());
  // TP 8 x DP 4 x PP 4 = 128 GPUs, stages of 32 GPUs (8 trays); a rack has 18 trays.
  ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 4;
  plan.pp = 4;
  auto ideal = ideal_placement(*c, 128, c->node_gpu(NodeId(0), 0), 32);
  ASSERT_TRUE(ideal.has_value());
  for (std::size_t stage = 0; stage < 4; ++stage)
    for (std::size_t i = stage * 32; i < (stage + 1) * 32; ++i)
      EXPECT_EQ(c->node_domain(c->gpu_node((*ideal)[i])), c->node_domain(c->gpu_node((*ideal)[stage * 32]))) << i;
  // Packed in node order instead, stage 2 straddles the racks: its DP all-reduce crosses
  // the InfiniBand leaf, so that placement is slower than the ideal, not equal to it.
  auto packed = ideal_placement(*c, 128, c->node_gpu(NodeId(0), 0));
  ASSERT_TRUE(packed.has_value());
  EXPECT_NE(c->node_domain(c->gpu_node((*packed)[64])), c->node_domain(c->gpu_node((*packed)[95])));
  auto model = workload_class("llm-dense");
  ASSERT_TRUE(model.has_value());
  auto est = estimate_job_comm(*c, *packed, plan, *model);
  ASSERT_TRUE(est.has_value()) << est.error().message;
  EXPECT_GT(est->slowdown, 1.5);
  auto aligned = estimate_job_comm(*c, *ideal, plan, *model);
  ASSERT_TRUE(aligned.has_value());
  EXPECT_DOUBLE_EQ(aligned->slowdown, 1.0);
}

}  // namespace
}  // namespace toposched

namespace toposched {
namespace {

TEST(JobComm, PrecomputedIdealGivesTheSameEstimate) {
  Cluster c = *build_preset("dgx-h100?nodes=8");
  ParallelPlan plan;
  plan.tp = 8;
  plan.pp = 2;
  plan.dp = 2;
  auto model = *workload_class("llm-dense");
  std::vector<GpuId> gpus;
  for (int r = 0; r < 32; ++r) gpus.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(r % 8)), r / 8));
  auto ideal = ideal_job_comm(c, plan, model, gpus[0]);
  ASSERT_TRUE(ideal.has_value());
  auto direct = estimate_job_comm(c, gpus, plan, model);
  auto reused = estimate_job_comm(c, gpus, plan, model, CostOptions{}, *ideal);
  ASSERT_TRUE(direct && reused);
  EXPECT_DOUBLE_EQ(direct->step_comm_us, reused->step_comm_us);
  EXPECT_DOUBLE_EQ(direct->ideal_step_comm_us, reused->ideal_step_comm_us);
  EXPECT_DOUBLE_EQ(direct->slowdown, reused->slowdown);
  EXPECT_GT(direct->slowdown, 1.0);
  ParallelPlan other = plan;
  other.pp = 1;
  other.dp = 4;
  EXPECT_FALSE(estimate_job_comm(c, gpus, other, model, CostOptions{}, *ideal).has_value());
}

}  // namespace
}  // namespace toposched
