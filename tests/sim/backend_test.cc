// The simulator on the real placement engine and cost model: every registered policy
// runs a generated mix; the cost-model runtime stretch; determinism of the whole run; the
// report built from it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "formats/html_page.h"
#include "sim/backend.h"
#include "sim/generator.h"
#include "sim/report.h"
#include "sim/simulate.h"
#include "topology/presets.h"

namespace toposched::sim {
namespace {

Cluster dgx(int nodes) {
  auto c = build_preset("dgx-h100?nodes=" + std::to_string(nodes) + "&su_size=4");
  EXPECT_TRUE(c) << c.error().to_string();
  return std::move(*c);
}

TEST(Backend, JobShapes) {
  SimJob j;
  j.gpus = 64;
  j.tp = 8;
  j.pp = 2;
  j.dp = 4;
  j.ep = 2;
  j.kind = "llm-moe";
  JobShape s = job_shape(j, 8);
  EXPECT_EQ(s.workload_class, "llm-moe");
  EXPECT_EQ(s.plan.gpus(), 64);
  EXPECT_EQ(s.plan.ep, 2);
  EXPECT_EQ(s.plan.dp, 2);  // dp as the cost model's: 64 / (tp 8 x pp 2 x ep 2)
  SimJob plain;
  plain.gpus = 16;
  JobShape v = job_shape(plain, 8);
  EXPECT_EQ(v.workload_class, "dp-vision");
  EXPECT_EQ(v.plan.dp, 16);
  SimJob llm;
  llm.gpus = 4;
  llm.kind = "llm-dense";
  JobShape l = job_shape(llm, 8);
  EXPECT_EQ(l.plan.tp, 4);
  // Bigger model-parallel groups compute less per GPU per step.
  JobShape a{"llm-dense", {}}, b{"llm-dense", {}};
  a.plan.tp = 8;
  b.plan.tp = 8;
  b.plan.pp = 4;
  EXPECT_GT(compute_us_per_step(a, "H100-SXM5"), compute_us_per_step(b, "H100-SXM5"));
  EXPECT_GT(compute_us_per_step(a, "V100"), compute_us_per_step(a, "H100-SXM5"));
}

TEST(Backend, EveryPolicyPlacesAndReleases) {
  Cluster c = dgx(8);
  auto names = placer_names();
  ASSERT_GE(names.size(), 2u);
  for (const auto& name : names) {
    auto p = make_placer(c, name, 1);
    ASSERT_TRUE(p) << name << ": " << p.error().to_string();
    SimJob j;
    j.id = "x";
    j.gpus = 16;
    j.tp = 8;
    j.pp = 1;
    j.dp = 2;
    j.kind = "llm-dense";
    auto g = (*p)->place(j, 0);
    ASSERT_TRUE(g) << name << ": " << g.error().to_string();
    EXPECT_EQ(g->size(), 16u);
    j.gpus = 64;
    j.dp = 8;
    auto full = (*p)->place(j, 1);  // 48 free GPUs left
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().code, ErrorCode::kInfeasible) << name;
    (*p)->release(0);
    auto again = (*p)->place(j, 1);
    EXPECT_TRUE(again) << name;
  }
  EXPECT_FALSE(make_placer(c, "no-such-policy", 1));
}

TEST(Backend, ReservationsFollowThePolicyAndLeaveTheStateAlone) {
  Cluster c = dgx(2);  // 16 GPUs
  auto p = make_placer(c, "topo", 1);
  ASSERT_TRUE(p);
  Placer& topo = **p;
  ASSERT_TRUE(topo.plans_reservations());
  SimJob small;
  small.gpus = 4;
  small.kind = "llm-dense";  // TP 4: one node
  SimJob big;
  big.gpus = 8;
  big.tp = 8;
  big.kind = "llm-dense";  // TP 8: a whole node
  // Four 4-GPU jobs fill both nodes (best fit: two per node); ending one per node leaves
  // 8 GPUs free by count, but no whole node for a TP-8 group.
  for (std::uint32_t j = 0; j < 4; ++j) ASSERT_TRUE(topo.place(small, j));
  topo.release(1);
  topo.release(3);
  EXPECT_FALSE(topo.place(big, 9));
  std::vector<std::uint32_t> by_end = {2, 0};
  auto r = topo.reserve(big, 9, by_end, 1);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->finished, 1u);  // job 2 ending frees its node
  ASSERT_EQ(r->gpus.size(), 8u);
  EXPECT_EQ(r->gpus_free_now, 4u);
  EXPECT_EQ(c.gpu_node(r->gpus.front()), c.gpu_node(r->gpus.back()));
  // The state is unchanged: the 4-GPU holes are still there, and job 2 still runs.
  EXPECT_FALSE(topo.place(big, 9));
  // A 4-GPU job placed around the reservation takes the other node's half.
  auto around = topo.place_around(small, 4, r->gpus, 1);
  ASSERT_TRUE(around);
  EXPECT_NE(c.gpu_node(around->front()), c.gpu_node(r->gpus.front()));
  // With nothing left outside the reservation, placing around it fails, placing does not.
  EXPECT_FALSE(topo.place_around(small, 5, r->gpus, 1));
  EXPECT_TRUE(topo.place(small, 5));
}

TEST(Backend, SpreadPlacementIsSlowerThanPacked) {
  Cluster c = dgx(8);
  auto comm = make_comm_model(c);
  SimJob j;
  j.gpus = 16;
  j.tp = 8;
  j.pp = 1;
  j.dp = 2;
  j.kind = "llm-dense";
  std::vector<GpuId> packed, spread;
  for (int k = 0; k < 16; ++k) packed.push_back(c.node_gpu(NodeId(k / 8), k % 8));
  // Each TP group split over two nodes in different scalable units.
  for (int k = 0; k < 16; ++k) spread.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>((k % 2) * 4 + k / 8)), (k / 2) % 8));
  CommEstimate a = comm->estimate(j, packed), b = comm->estimate(j, spread);
  EXPECT_GE(a.slowdown, 1.0);
  EXPECT_GT(b.slowdown, a.slowdown);
  EXPECT_FALSE(b.uplinks.empty());
  std::vector<GpuId> one_node(packed.begin(), packed.begin() + 8);
  j.gpus = 8;
  j.dp = 1;
  EXPECT_TRUE(comm->estimate(j, one_node).uplinks.empty());
}

// Issue 32, acceptance 3: the simulator's estimate carries the step's parts: a pipelined job
// has a bubble, and every kind it runs has communication, of which the step waits for a
// part (DP mostly hidden behind the last micro-batch, TP not at all).
TEST(Backend, TheEstimateBreaksTheStepIntoBubbleAndCommunicationPerKind) {
  Cluster c = dgx(8);
  auto comm = make_comm_model(c);
  SimJob j;
  j.gpus = 64;
  j.tp = 8;
  j.pp = 4;
  j.dp = 2;
  j.kind = "llm-dense";
  std::vector<GpuId> gpus;
  for (int k = 0; k < 64; ++k) gpus.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(k / 8)), k % 8));
  const StepBreakdown b = comm->estimate(j, gpus).step;
  EXPECT_GT(b.bubble, 0.0);
  EXPECT_LT(b.bubble, 0.5);
  for (std::size_t k : {std::size_t{0}, std::size_t{3}, std::size_t{4}}) EXPECT_GT(b.comm[k], 0.0) << kParallelKinds[k];
  EXPECT_DOUBLE_EQ(b.comm[1], 0.0);  // no CP, no EP
  EXPECT_DOUBLE_EQ(b.comm[2], 0.0);
  EXPECT_DOUBLE_EQ(b.exposed[0], b.comm[0]);  // TP: inside the layer
  EXPECT_LT(b.exposed[3], b.comm[3]);         // DP: behind the last micro-batch
  EXPECT_LT(b.exposed[4], b.comm[4]);         // PP: only fill and drain
  double parts = b.bubble;
  for (double e : b.exposed) parts += e;
  EXPECT_LT(parts, 1.0);  // compute is the rest
  // A one-GPU job: nothing to break down but compute.
  j.gpus = 1;
  j.tp = j.pp = j.dp = 1;
  const StepBreakdown one = comm->estimate(j, std::vector<GpuId>{gpus.front()}).step;
  EXPECT_DOUBLE_EQ(one.bubble, 0.0);
  for (double x : one.comm) EXPECT_DOUBLE_EQ(x, 0.0);
}

TEST(Backend, PoliciesSideBySideAreDeterministic) {
  Cluster c = dgx(16);
  GeneratorParams gp;
  gp.jobs = 150;
  gp.max_gpus = 64;
  gp.arrival_rate_per_hour = 40;
  Trace t = generate_trace(gp);
  auto comm = make_comm_model(c);
  std::vector<std::string> policies = placer_names();
  EngineOptions eo;
  eo.discipline = Discipline::kEasyBackfill;
  auto a = simulate_policies(c, t, policies, *comm, eo);
  auto b = simulate_policies(c, t, policies, *comm, eo);
  ASSERT_TRUE(a) << a.error().to_string();
  ASSERT_TRUE(b);
  RunInfo info;
  info.cluster = c.name();
  info.seed = 1;
  std::vector<PolicyRun> ra, rb;
  for (const auto& r : *a) ra.push_back({r.summary, &r.result});
  for (const auto& r : *b) rb.push_back({r.summary, &r.result});
  std::string ja = report_json(info, ra).value();
  EXPECT_EQ(ja, report_json(info, rb).value());
  auto j = nlohmann::json::parse(ja);
  for (const auto& p : policies) {
    ASSERT_TRUE(j["policies"].contains(p)) << p;
    const auto& s = j["policies"][p];
    for (const char* key : {"jobs", "jct_mean_s", "jct_p50_s", "jct_p99_s", "wait_mean_s", "utilization", "comm_slowdown_mean", "makespan_s"})
      EXPECT_TRUE(s.contains(key)) << p << " " << key;
    EXPECT_EQ(s["jobs"].get<int>() + s["never_placed"].get<int>(), 150) << p;
    EXPECT_GE(s["comm_slowdown_mean"].get<double>(), 1.0);
    // The step's parts over the run (issue 32, acceptance 3): hidden shares are shares.
    const auto& b = s["step_breakdown"];
    EXPECT_GE(b["gpu_hours_bubble"].get<double>(), 0.0) << p;
    for (const auto& [kind, k] : b["kinds"].items()) {
      EXPECT_GE(k["hidden_share"].get<double>(), 0.0) << p << " " << kind;
      EXPECT_LE(k["hidden_share"].get<double>(), 1.0) << p << " " << kind;
      EXPECT_LE(k["gpu_hours_exposed"].get<double>(), k["gpu_hours"].get<double>() + 1e-3) << p << " " << kind;
    }
    EXPECT_GT(s["utilization"].get<double>(), 0.0);
    EXPECT_LE(s["utilization"].get<double>(), 1.0);
  }
  // The HTML holds one chart container per chart and the inlined libraries.
  std::string html = report_html(info, t, ra).value();
  for (const char* id : {"chart-jct-cdf", "chart-utilisation", "chart-queue", "chart-slowdown", "chart-summary", "chart-fragmentation"})
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(html.find("vegaEmbed"), std::string::npos);
  EXPECT_GT(html.size(), html::vega_js().size() + html::vega_lite_js().size());
  EXPECT_EQ(html.find("<script src="), std::string::npos);  // self-contained
  std::string table = report_table(info, ra);
  for (const auto& p : policies) {
    EXPECT_NE(table.find(p), std::string::npos);
  }
}

}  // namespace
}  // namespace toposched::sim
