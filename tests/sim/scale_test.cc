// `toposched scale`'s library (sim/scale.h): the GPT-3-175B-like curve on a 512-node DGX
// H100 cluster (issue 17's acceptance), input errors, a given allocation state, and the
// report's JSON and HTML.
#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cost/job_file.h"
#include "placement/state_file.h"
#include "sim/backend.h"
#include "sim/scale.h"
#include "topology/presets.h"

namespace toposched::sim {
namespace {

JobSpec gpt3_plan() {
  auto spec = read_job_file(std::string(TOPOSCHED_SOURCE_DIR) + "/examples/gpt3-175b-tp8-pp8.yaml");
  EXPECT_TRUE(spec) << spec.error().to_string();
  return *spec;
}

Cluster dgx_h100(int nodes) {
  auto c = build_preset("dgx-h100?nodes=" + std::to_string(nodes));
  EXPECT_TRUE(c) << c.error().to_string();
  return std::move(*c);
}

const ScaleCurve& curve_of(const ScaleResult& r, std::string_view policy) {
  for (const ScaleCurve& c : r.curves)
    if (c.policy == policy) return c;
  ADD_FAILURE() << "no curve for " << policy;
  return r.curves.front();
}

// Issue 17, acceptance 2: 64 .. 4,096 GPUs of a 4,096-GPU cluster, every policy. On an
// empty cluster the deterministic policies all pack the job into consecutive nodes, so
// their curves coincide with topo's (topo ties for the highest). `random` is the exception
// the acceptance cannot hold for: its smallest size is scattered (its own baseline is poor)
// and at 4,096 GPUs it holds the whole cluster, so its own-baseline efficiency rises above 1;
// against the common ideal baseline it never beats topo.
TEST(Scale, Gpt3CurveFallsFromOneAndTopoEndsHighest) {
  Cluster c = dgx_h100(512);
  AllocationState empty(c);
  ScaleOptions o;
  o.policies = placer_names();
  o.gpu_counts = {64, 128, 256, 512, 1024, 2048, 4096};
  auto r = scale_job(c, empty, gpt3_plan(), o);
  ASSERT_TRUE(r) << r.error().to_string();
  ASSERT_EQ(r->curves.size(), o.policies.size());
  const ScaleCurve& topo = curve_of(*r, "topo");
  double topo_last = topo.points.back().efficiency;
  for (const ScaleCurve& curve : r->curves) {
    ASSERT_EQ(curve.points.size(), o.gpu_counts.size()) << curve.policy;
    for (const ScalePoint& p : curve.points) ASSERT_TRUE(p.placed) << curve.policy << " " << p.gpus << ": " << p.why_not;
    EXPECT_DOUBLE_EQ(curve.points.front().efficiency, 1.0) << curve.policy;
    EXPECT_DOUBLE_EQ(curve.points.front().speedup, 1.0) << curve.policy;
    for (std::size_t i = 0; i < curve.points.size(); ++i) {
      EXPECT_EQ(curve.points[i].dp, curve.points[i].gpus / 64);
      // topo's placement is never slower than any other policy's, at any size.
      EXPECT_LE(curve.points[i].efficiency_vs_ideal, topo.points[i].efficiency_vs_ideal + 1e-12) << curve.policy << " at " << curve.points[i].gpus;
      if (i == 0) continue;
      EXPECT_GT(curve.points[i].speedup, curve.points[i - 1].speedup) << curve.policy << " at " << curve.points[i].gpus;
      if (curve.policy == "random") continue;
      EXPECT_LE(curve.points[i].efficiency, curve.points[i - 1].efficiency + 1e-12) << curve.policy << " at " << curve.points[i].gpus;
    }
    EXPECT_FALSE(curve.breaks.empty());
    if (curve.policy == "random") continue;
    EXPECT_LT(curve.points.back().efficiency, 1.0) << curve.policy;  // communication costs something at 4,096 GPUs
    EXPECT_LE(curve.points.back().efficiency, topo_last + 1e-12) << curve.policy;
  }
  // Strictly better than a placement that ignores the topology, wherever it has a choice.
  const ScaleCurve& random = curve_of(*r, "random");
  for (std::size_t i = 0; i + 1 < random.points.size(); ++i) EXPECT_GT(topo.points[i].efficiency_vs_ideal, random.points[i].efficiency_vs_ideal);
  EXPECT_GT(random.points.back().efficiency, 1.0);  // the artefact described above
  EXPECT_DOUBLE_EQ(topo.points.front().efficiency_vs_ideal, 1.0);  // topo's smallest placement is the ideal one
  if (HasFailure()) std::printf("%s", scale_table(*r).c_str());
  // Weak scaling: per-replica compute is the same at every size.
  EXPECT_DOUBLE_EQ(topo.points.front().compute_s, topo.points.back().compute_s);
  // Each PP stage (dp nodes) is placed whole in one leaf (32 nodes) while it fits, so the
  // DP all-reduce leaves the leaf only at 4,096 GPUs (64 nodes per stage).
  EXPECT_NE(topo.breaks.find("dp allreduce"), std::string::npos) << topo.breaks;
  EXPECT_NE(topo.breaks.find("leaves tier:leaf at 4096 GPUs"), std::string::npos) << topo.breaks;
}

TEST(Scale, TheBreakNamesTheGroupAndTheLevelItReaches) {
  Cluster c = dgx_h100(64);  // 32 nodes per leaf (scalable unit) by default: 256 GPUs per leaf
  AllocationState empty(c);
  ScaleOptions o;
  o.policies = {"topo"};
  o.gpu_counts = {64, 128, 256, 512};
  auto r = scale_job(c, empty, gpt3_plan(), o);
  ASSERT_TRUE(r) << r.error().to_string();
  const ScaleCurve& curve = r->curves.front();
  EXPECT_NE(curve.breaks.find("dp allreduce"), std::string::npos) << curve.breaks;
  EXPECT_NE(curve.breaks.find("efficiency"), std::string::npos) << curve.breaks;
  EXPECT_EQ(curve.points.front().widest_level, "tier:leaf");  // 8 nodes of one leaf
}

TEST(Scale, RejectsSizesAndPoliciesItCannotUse) {
  Cluster c = dgx_h100(16);
  AllocationState empty(c);
  ScaleOptions o;
  o.policies = {"topo"};
  o.gpu_counts = {64, 96};
  auto bad = scale_job(c, empty, gpt3_plan(), o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("not a multiple"), std::string::npos) << bad.error().message;
  o.gpu_counts = {128, 64};
  auto order = scale_job(c, empty, gpt3_plan(), o);
  ASSERT_FALSE(order);
  EXPECT_NE(order.error().message.find("ascending"), std::string::npos) << order.error().message;
  o.gpu_counts = {64};
  o.policies = {"no-such-policy"};
  EXPECT_FALSE(scale_job(c, empty, gpt3_plan(), o));
}

TEST(Scale, AGivenStateLeavesLessRoomAndASizeThatNoLongerFitsIsReported) {
  Cluster c = dgx_h100(16);  // 128 GPUs
  AllocationState busy(c);
  std::vector<GpuId> held;
  for (std::uint32_t g = 0; g < 64; ++g) held.push_back(GpuId(g));
  ASSERT_TRUE(busy.allocate("other", held));
  ScaleOptions o;
  o.policies = {"first-fit"};
  o.gpu_counts = {64, 128};
  auto r = scale_job(c, busy, gpt3_plan(), o);
  ASSERT_TRUE(r) << r.error().to_string();
  const ScaleCurve& curve = r->curves.front();
  EXPECT_TRUE(curve.points[0].placed);
  EXPECT_FALSE(curve.points[1].placed);
  EXPECT_FALSE(curve.points[1].why_not.empty());
  EXPECT_DOUBLE_EQ(curve.points[0].efficiency, 1.0);
  EXPECT_TRUE(busy.has_job("other"));  // the state given is not changed
  auto j = nlohmann::json::parse(*scale_json(*r));
  EXPECT_TRUE(j["policies"]["first-fit"][1]["efficiency"].is_null());
  EXPECT_FALSE(j["policies"]["first-fit"][1]["placed"].get<bool>());
}

TEST(Scale, JsonHasTheContractKeysAndTheHtmlItsCharts) {
  Cluster c = dgx_h100(16);
  AllocationState empty(c);
  ScaleOptions o;
  o.policies = {"first-fit", "topo"};
  o.gpu_counts = {64, 128};
  auto r = scale_job(c, empty, gpt3_plan(), o);
  ASSERT_TRUE(r) << r.error().to_string();
  auto j = nlohmann::json::parse(*scale_json(*r));
  for (const char* policy : {"first-fit", "topo"}) {
    ASSERT_TRUE(j["policies"].contains(policy));
    for (const auto& p : j["policies"][policy])
      for (const char* key : {"gpus", "step_time_s", "speedup", "efficiency"}) EXPECT_TRUE(p.contains(key)) << key;
    EXPECT_TRUE(j["breaks"][policy].is_string());
  }
  EXPECT_EQ(*scale_json(*r), *scale_json(*r));
  std::string page = scale_html(*r);
  EXPECT_NE(page.find("chart-efficiency"), std::string::npos);
  EXPECT_NE(page.find("chart-step-time"), std::string::npos);
}

}  // namespace
}  // namespace toposched::sim
