// --score-model (sim/score_model.h): the spec's grammar and positioned errors, the perturbed
// cluster's paths (only the terms' tiers change, ids stay the same), and a simulation whose
// placers decide on the perturbed copy while the engine times jobs on the original.
#include <gtest/gtest.h>

#include "sim/backend.h"
#include "sim/generator.h"
#include "sim/score_model.h"
#include "sim/simulate.h"
#include "placement/placement.h"
#include "topology/presets.h"

namespace toposched::sim {
namespace {

Cluster dgx(int nodes) {
  auto c = build_preset("dgx-h100?nodes=" + std::to_string(nodes) + "&su_size=4");
  EXPECT_TRUE(c) << c.error().to_string();
  return std::move(*c);
}

// "--score-model:1:COL: ..." of a spec that must fail.
std::string error_of(std::string_view spec) {
  auto m = parse_score_model(spec);
  EXPECT_FALSE(m) << spec;
  return m ? std::string() : m.error().to_string();
}

TEST(ScoreModel, ParsesTermsFactorsAndPercentages) {
  auto m = parse_score_model("bw:spine=-30%,lat:all=1.5,hop-us=2,bw:nvlink=+10%");
  ASSERT_TRUE(m) << m.error().to_string();
  ASSERT_EQ(m->terms.size(), 4u);
  EXPECT_EQ(m->terms[0].kind, ScoreModelTerm::Kind::kBandwidth);
  EXPECT_EQ(m->terms[0].target, "spine");
  EXPECT_DOUBLE_EQ(m->terms[0].value, 0.7);
  EXPECT_EQ(m->terms[0].column, 1);
  EXPECT_EQ(m->terms[1].kind, ScoreModelTerm::Kind::kLatency);
  EXPECT_DOUBLE_EQ(m->terms[1].value, 1.5);
  EXPECT_EQ(m->terms[1].column, 15);
  EXPECT_EQ(m->terms[2].kind, ScoreModelTerm::Kind::kHopUs);
  EXPECT_DOUBLE_EQ(m->terms[2].value, 2);
  EXPECT_DOUBLE_EQ(m->terms[3].value, 1.1);
  auto none = parse_score_model("none");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->identity());
}

TEST(ScoreModel, ErrorsNameTheColumn) {
  EXPECT_EQ(error_of("bw:spine=abc"), "--score-model:1:10: bw:spine: expected a factor > 0 (0.7) or a percentage above -100% (-30%), got 'abc'");
  EXPECT_EQ(error_of("bw:spine=0.7,,hop-us=1"), "--score-model:1:14: empty term (two commas, or a comma at an end)");
  EXPECT_EQ(error_of("bw:spine=0.7,speed=2"), "--score-model:1:14: unknown term 'speed'; expected bw:TIER=F, lat:TIER=F, hop-us=X or none");
  EXPECT_EQ(error_of("lat:leaf=-100%").substr(0, 19), "--score-model:1:10:");
  EXPECT_EQ(error_of("hop-us=-1").substr(0, 18), "--score-model:1:8:");
  EXPECT_EQ(error_of("bw:=2"), "--score-model:1:1: 'bw:=2': no tier named (a tier of the cluster, or all)");
  EXPECT_EQ(error_of("spine"), "--score-model:1:1: 'spine': expected bw:TIER=F, lat:TIER=F, hop-us=X or none");
  EXPECT_EQ(error_of("none,hop-us=1"), "--score-model:1:1: 'none' cannot be combined with other terms");
  EXPECT_EQ(error_of(""), "--score-model:1:1: empty score model; expected e.g. 'bw:spine=-30%', 'lat:all=1.3', 'hop-us=1' or 'none'");
}

TEST(ScoreModel, UnknownTierIsPositionedAtItsTerm) {
  const Cluster c = dgx(64);
  auto m = parse_score_model("hop-us=1,bw:spin=0.7");
  ASSERT_TRUE(m);
  auto p = perturbed_cluster(c, *m);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().to_string(),
            "--score-model:1:10: cluster dgx-h100-64n has no tier 'spin' (its tiers: leaf, spine, core, all, nvlink)");
}

TEST(ScoreModel, OnlyThePathsOfTheNamedTierChange) {
  const Cluster c = dgx(64);  // 4 nodes per leaf, 4 leaves per spine, one core
  auto m = parse_score_model("bw:spine=-30%,lat:core=2");
  ASSERT_TRUE(m);
  auto p = perturbed_cluster(c, *m);
  ASSERT_TRUE(p) << p.error().to_string();
  ASSERT_EQ(p->gpu_count(), c.gpu_count());
  ASSERT_EQ(p->switch_count(), c.switch_count());
  for (std::size_t n = 0; n < c.node_count(); ++n) {
    const NodeId id(static_cast<std::uint32_t>(n));
    EXPECT_EQ(p->node_name(id), c.node_name(id));
    EXPECT_EQ(p->node_switch(id), c.node_switch(id));
  }
  const GpuId a = c.node_gpu(NodeId(0), 0);
  struct Case {
    GpuId b;
    std::string level;
    double bw, lat;
  };
  for (const Case& k : {Case{c.node_gpu(NodeId(0), 1), "nvlink", 1, 1}, Case{c.node_gpu(NodeId(1), 0), "tier:leaf", 1, 1},
                        Case{c.node_gpu(NodeId(4), 0), "tier:spine", 0.7, 1}, Case{c.node_gpu(NodeId(16), 0), "tier:core", 1, 2}}) {
    const Path truth = c.path(a, k.b), seen = p->path(a, k.b);
    ASSERT_EQ(c.level_name(truth), k.level);
    EXPECT_EQ(p->level_name(seen), k.level);
    EXPECT_NEAR(seen.bandwidth_GBps, k.bw * truth.bandwidth_GBps, 1e-9) << k.level;
    EXPECT_NEAR(seen.latency_us, k.lat * truth.latency_us, 1e-9) << k.level;
  }
}

TEST(ScoreModel, HopLatencyGrowsWithTheSwitchesCrossed) {
  const Cluster c = dgx(64);
  auto p = perturbed_cluster(c, *parse_score_model("hop-us=1"));
  ASSERT_TRUE(p);
  const GpuId a = c.node_gpu(NodeId(0), 0);
  // Joined at tier k: 2k + 1 switches.
  EXPECT_NEAR(p->path(a, c.node_gpu(NodeId(1), 0)).latency_us - c.path(a, c.node_gpu(NodeId(1), 0)).latency_us, 1, 1e-9);
  EXPECT_NEAR(p->path(a, c.node_gpu(NodeId(4), 0)).latency_us - c.path(a, c.node_gpu(NodeId(4), 0)).latency_us, 3, 1e-9);
  EXPECT_NEAR(p->path(a, c.node_gpu(NodeId(16), 0)).latency_us - c.path(a, c.node_gpu(NodeId(16), 0)).latency_us, 5, 1e-9);
  auto nv = perturbed_cluster(c, *parse_score_model("bw:nvlink=0.5"));
  ASSERT_TRUE(nv);
  EXPECT_NEAR(nv->path(a, c.node_gpu(NodeId(0), 1)).bandwidth_GBps, 0.5 * c.path(a, c.node_gpu(NodeId(0), 1)).bandwidth_GBps, 1e-9);
}

// Placers on the perturbed copy, runtimes on the original: a factor-1 copy changes nothing
// (the ids mean the same GPUs), and the cost the policies rank candidates by is the
// perturbed one.
TEST(ScoreModel, PoliciesDecideOnThePerturbedModel) {
  const Cluster c = dgx(16);
  GeneratorParams g;
  g.jobs = 150;
  g.max_gpus = 64;
  g.arrival_rate_per_hour = 30;
  g.seed = 3;
  const Trace trace = generate_trace(g);
  auto comm = make_comm_model(c);
  EngineOptions eo;
  eo.discipline = Discipline::kEasyBackfill;
  auto run = [&](const Cluster* scored) {
    PlacerFactory make;
    if (scored) make = [scored](const Cluster&, const std::string& p, std::uint64_t seed) { return make_placer(*scored, p, seed); };
    auto r = simulate_policies(c, trace, {"topo"}, *comm, eo, make);
    EXPECT_TRUE(r) << r.error().to_string();
    return std::move(r->front());
  };
  const PolicyOutcome truth = run(nullptr);
  const Cluster same = *perturbed_cluster(c, *parse_score_model("bw:all=1"));
  const PolicyOutcome copy = run(&same);
  EXPECT_EQ(copy.summary.jct_mean_s, truth.summary.jct_mean_s);
  EXPECT_EQ(copy.summary.gpu_hours_lost_comm, truth.summary.gpu_hours_lost_comm);
  // What the policies score with is the perturbed model: a 16-GPU TP-8 job on two nodes of
  // different leaves costs more per step on the copy with slower spine paths.
  const Cluster slow = *perturbed_cluster(c, *parse_score_model("bw:spine=-30%"));
  std::vector<GpuId> gpus;
  for (NodeId n : {NodeId(0), NodeId(4)})
    for (int l = 0; l < 8; ++l) gpus.push_back(c.node_gpu(n, l));
  JobRequest r;
  r.gpus = 16;
  r.tp = 8;
  r.dp = 2;
  auto truth_pred = predict_comm(c, gpus, r), slow_pred = predict_comm(slow, gpus, r);
  ASSERT_TRUE(truth_pred && slow_pred);
  EXPECT_GT(slow_pred->step_comm_us, truth_pred->step_comm_us * 1.05);
}

}  // namespace
}  // namespace toposched::sim
