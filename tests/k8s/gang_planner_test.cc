// The gang planner on a DGX H100 preset: whole-group planning at the first member's filter,
// rank order, reservations held from filter time and released on expiry (injected clock),
// no partial placement, pass-through and error answers, preemption, and the pod mapping.
#include <map>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "k8s/extender.h"
#include "k8s/gang_planner.h"
#include "k8s/pod_request.h"
#include "topology/presets.h"

namespace toposched::k8s {
namespace {

Pod gpu_pod(std::string name, int gpus, std::string group = {}, int size = 0) {
  Pod p;
  p.name = std::move(name);
  p.namespace_name = "ml";
  p.uid = "uid-" + p.name;
  Container c;
  c.name = "main";
  if (gpus > 0) c.limits["nvidia.com/gpu"] = std::to_string(gpus);
  p.containers.push_back(c);
  if (!group.empty()) {
    p.labels["scheduling.x-k8s.io/pod-group"] = group;
    p.annotations["scheduling.x-k8s.io/min-member"] = std::to_string(size);
  }
  return p;
}

std::vector<std::string> all_names(const Cluster& c) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < c.node_count(); ++i) out.push_back(c.node_name(NodeId(static_cast<std::uint32_t>(i))));
  return out;
}

struct GangPlannerTest : ::testing::Test {
  Cluster cluster = *build_preset("dgx-h100?nodes=8");
  EngineLedger ledger{cluster};
  std::int64_t now = 1000;
  GangPlanner planner{ledger, [this] { return now; }, PlannerOptions{"topo", 300'000}};

  std::string n(int i) const { return cluster.node_name(NodeId(static_cast<std::uint32_t>(i))); }

  ExtenderFilterResult filter(const Pod& p, std::optional<std::vector<std::string>> names = std::nullopt) {
    ExtenderArgs a;
    a.pod = p;
    a.node_names = names ? *names : all_names(cluster);
    return planner.filter(a);
  }
};

// Two 4-GPU members with TP 4 share one 8-GPU node (their DP traffic stays on NVLink): each
// member's filter answers that node, and each member holds its own rank block there.
TEST_F(GangPlannerTest, MembersOfFourGpusShareAnEightGpuNode) {
  std::set<std::string> nodes;
  for (int i = 0; i < 2; ++i) {
    Pod p = gpu_pod("pair-" + std::to_string(i), 4, "pair", 2);
    p.annotations["toposched.io/tp"] = "4";
    auto r = filter(p);
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.node_names && r.node_names->size() == 1u);
    nodes.insert(r.node_names->front());
  }
  EXPECT_EQ(nodes.size(), 1u);
  auto groups = planner.groups();
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_EQ(groups[0].members.size(), 2u);
  EXPECT_EQ(groups[0].members[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(groups[0].members[1].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(groups[0].members[0].node, groups[0].members[1].node);
  std::set<int> gpus(groups[0].members[0].gpus.begin(), groups[0].members[0].gpus.end());
  gpus.insert(groups[0].members[1].gpus.begin(), groups[0].members[1].gpus.end());
  EXPECT_EQ(gpus.size(), 8u);
}

TEST_F(GangPlannerTest, GroupIsPlannedWholeAtTheFirstFilterAndEachMemberGetsItsNode) {
  std::set<std::string> nodes;
  for (int i = 3; i >= 0; --i) {  // arrive out of order: rank comes from the name ordinal
    Pod p = gpu_pod("train-" + std::to_string(i), 8, "train", 4);
    p.annotations["toposched.io/tp"] = "8";
    p.annotations["toposched.io/pp"] = "2";
    auto r = filter(p);
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.node_names);
    ASSERT_EQ(r.node_names->size(), 1u);
    nodes.insert(r.node_names->front());
    EXPECT_FALSE(r.failed_nodes);  // the other nodes are left out, not listed
    // The whole group is held from the first filter on.
    EXPECT_EQ(ledger.snapshot().job_gpus("k8s:ml:train").size(), 32u);
  }
  EXPECT_EQ(nodes.size(), 4u);
  auto groups = planner.groups();
  ASSERT_EQ(groups.size(), 1u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(groups[0].members[i].pod, "ml/train-" + std::to_string(i));
    EXPECT_EQ(groups[0].members[i].ranks.front(), 8 * i);
  }
  // A retry of a member gets the same node.
  auto again = filter(gpu_pod("train-2", 8, "train", 4));
  EXPECT_EQ(again.node_names->front(), groups[0].members[2].node);
}

TEST_F(GangPlannerTest, TooLargeGroupGetsNoNodeAndHoldsNothing) {
  auto r = filter(gpu_pod("big-0", 8, "big", 9));  // 72 GPUs on a 64-GPU cluster
  EXPECT_TRUE(r.error.empty());
  EXPECT_FALSE(r.node_names);
  ASSERT_TRUE(r.failed_nodes);
  EXPECT_EQ(r.failed_nodes->size(), 8u);
  EXPECT_NE(r.failed_nodes->begin()->second.find("cannot be placed whole"), std::string::npos);
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 64);
  EXPECT_TRUE(planner.groups().empty());
}

TEST_F(GangPlannerTest, ReservationsExpireUnlessBound) {
  filter(gpu_pod("a-0", 8, "a", 2));
  filter(gpu_pod("b-0", 8, "b", 2));
  auto bplan = planner.prepare_bind({"b-0", "ml", "uid-b-0", planner.groups()[1].members[0].node});
  ASSERT_TRUE(bplan) << bplan.error().message;
  EXPECT_EQ(bplan->annotations.at("toposched.io/gpus"), "0,1,2,3,4,5,6,7");
  planner.finish_bind(*bplan, true);
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 32);
  now += 299'999;
  EXPECT_TRUE(planner.expire().empty());
  now += 1;
  EXPECT_EQ(planner.expire(), std::vector<std::string>{"k8s:ml:a"});
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 48);  // b keeps its GPUs: a member is bound
}

TEST_F(GangPlannerTest, MemberOfAnswersThePodsGroupAsPlanned) {
  filter(gpu_pod("g-0", 8, "g", 2));
  filter(gpu_pod("g-1", 8, "g", 2));
  auto m = planner.member_of({"g-1", "ml", "uid-g-1", ""});
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->job_id, "k8s:ml:g");
  EXPECT_EQ(m->size, 2);
  EXPECT_EQ(m->bound, 0);
  EXPECT_EQ(m->slot, 1);
  EXPECT_EQ(m->node, planner.groups()[0].members[1].node);
  EXPECT_EQ(m->gpus, planner.groups()[0].members[1].gpus);  // what the plugin pins DRA claims to
  EXPECT_EQ(m->gpus.size(), 8u);
  auto plan = planner.prepare_bind({"g-0", "ml", "uid-g-0", planner.groups()[0].members[0].node});
  ASSERT_TRUE(plan);
  planner.finish_bind(*plan, true);
  EXPECT_EQ(planner.member_of({"g-1", "ml", "uid-g-1", ""})->bound, 1);
  auto unknown = planner.member_of({"other", "ml", "uid-other", ""});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
}

TEST_F(GangPlannerTest, UnreserveBeforeAnyBindReleasesTheWholeGroup) {
  filter(gpu_pod("u-0", 8, "u", 3));
  filter(gpu_pod("u-1", 8, "u", 3));
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 40);
  EXPECT_EQ(planner.unreserve({"u-1", "ml", "uid-u-1", ""}), "k8s:ml:u");
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 64);
  EXPECT_TRUE(planner.groups().empty());
  EXPECT_FALSE(planner.member_of({"u-0", "ml", "uid-u-0", ""}));  // the sibling's slot went too
  EXPECT_EQ(planner.unreserve({"u-0", "ml", "uid-u-0", ""}), "");  // nothing left: a no-op
}

TEST_F(GangPlannerTest, UnreserveAfterABindKeepsTheGroupAndFreesOnlyThePodsSlot) {
  filter(gpu_pod("k-0", 8, "k", 2));
  filter(gpu_pod("k-1", 8, "k", 2));
  auto plan = planner.prepare_bind({"k-0", "ml", "uid-k-0", planner.groups()[0].members[0].node});
  ASSERT_TRUE(plan);
  planner.finish_bind(*plan, true);
  EXPECT_EQ(planner.unreserve({"k-1", "ml", "uid-k-1", ""}), "");
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 48);  // both slots' GPUs stay held
  EXPECT_FALSE(planner.member_of({"k-1", "ml", "uid-k-1", ""}));
  auto g = planner.groups();
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].members[1].pod, "");
  // A new pod for the freed slot (the member recreated) takes it.
  auto r = filter(gpu_pod("k-1", 8, "k", 2));
  ASSERT_TRUE(r.node_names);
  EXPECT_EQ(r.node_names->front(), g[0].members[1].node);
}

TEST_F(GangPlannerTest, BindToAnotherNodeIsRefused) {
  filter(gpu_pod("solo", 2));
  auto g = planner.groups();
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].job_id, "k8s:ml:pod:solo");
  const std::string other = g[0].members[0].node == n(0) ? n(1) : n(0);
  auto bad = planner.prepare_bind({"solo", "ml", "uid-solo", other});
  EXPECT_FALSE(bad);
}

TEST_F(GangPlannerTest, PodsWithoutGpusPassThroughAndUnknownNodesAreUnresolvable) {
  auto names = all_names(cluster);
  names.push_back("cpu-node-1");
  auto r = filter(gpu_pod("web", 0), names);
  ASSERT_TRUE(r.node_names);
  EXPECT_EQ(r.node_names->size(), 9u);
  auto g = filter(gpu_pod("g", 1), names);
  ASSERT_TRUE(g.node_names);
  EXPECT_EQ(g.node_names->size(), 1u);
  EXPECT_NE(g.node_names->front(), "cpu-node-1");
  auto none = filter(gpu_pod("h-0", 8, "h", 9), names);  // cannot fit: every node says why
  ASSERT_TRUE(none.failed_and_unresolvable_nodes);
  EXPECT_EQ(none.failed_and_unresolvable_nodes->count("cpu-node-1"), 1u);
  EXPECT_EQ(none.failed_nodes->size(), 8u);
}

TEST_F(GangPlannerTest, MalformedPodsGetTheErrorField) {
  Pod p = gpu_pod("x", 0);
  p.containers[0].limits["nvidia.com/gpu"] = "1.5";
  EXPECT_NE(filter(p).error.find("not a whole number"), std::string::npos);
  Pod q = gpu_pod("y", 8, "grp", 2);
  q.annotations["toposched.io/tp"] = "zero";
  EXPECT_NE(filter(q).error.find("toposched.io/tp"), std::string::npos);
  Pod r = gpu_pod("z", 8);
  r.labels["kueue.x-k8s.io/pod-group-name"] = "k";
  EXPECT_NE(filter(r).error.find("pod-group-total-count"), std::string::npos);
  ExtenderArgs none;
  EXPECT_FALSE(planner.filter(none).error.empty());
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 64);
}

TEST_F(GangPlannerTest, OnlyOfferedNodesAreUsed) {
  std::vector<std::string> offered = {n(4), n(5)};
  auto r = filter(gpu_pod("pair-0", 8, "pair", 2), offered);
  ASSERT_TRUE(r.node_names);
  EXPECT_TRUE(r.node_names->front() == n(4) || r.node_names->front() == n(5));
  auto too_few = filter(gpu_pod("trio-0", 8, "trio", 3), std::vector<std::string>{n(0), n(1)});
  EXPECT_FALSE(too_few.node_names);
}

TEST_F(GangPlannerTest, PrioritizeScoresThePlannedNode) {
  filter(gpu_pod("p", 4));
  ExtenderArgs a;
  a.pod = gpu_pod("p", 4);
  a.node_names = all_names(cluster);
  auto scores = planner.prioritize(a);
  ASSERT_TRUE(scores);
  int tens = 0;
  for (const auto& h : *scores) tens += h.score == 10;
  EXPECT_EQ(tens, 1);
  EXPECT_EQ(scores->size(), 8u);
}

TEST_F(GangPlannerTest, PreemptFreesAWholePlacementAtLeastCost) {
  // Fill the cluster with eight single-node jobs, bound.
  for (int i = 0; i < 8; ++i) {
    auto r = filter(gpu_pod("filler-" + std::to_string(i), 8));
    ASSERT_TRUE(r.node_names);
    auto plan = planner.prepare_bind({"filler-" + std::to_string(i), "ml", "uid-filler-" + std::to_string(i),
                                      r.node_names->front()});
    planner.finish_bind(*plan, true);
  }
  Pod pre = gpu_pod("hi-0", 8, "hi", 2);
  ExtenderPreemptionArgs args;
  args.pod = pre;
  args.node_name_to_meta_victims.emplace();
  for (const auto& g : planner.groups()) {
    const int pdb = g.members[0].node == n(0) ? 1 : 0;  // costlier
    (*args.node_name_to_meta_victims)[g.members[0].node] =
        MetaVictims{{MetaPod{"uid-" + g.members[0].pod.substr(3)}}, pdb};
  }
  // kube-scheduler preempts for one member on one node per attempt: one node per answer,
  // never the costlier n(0).
  auto out = planner.preempt(args);
  ASSERT_TRUE(out.node_name_to_meta_victims);
  ASSERT_EQ(out.node_name_to_meta_victims->size(), 1u);
  const std::string first = out.node_name_to_meta_victims->begin()->first;
  EXPECT_NE(first, n(0));
  // The same member asking again gets the same node.
  auto again = planner.preempt(args);
  ASSERT_TRUE(again.node_name_to_meta_victims);
  EXPECT_EQ(again.node_name_to_meta_victims->begin()->first, first);
  // The second member gets the other node of the same placement (kube-scheduler no longer
  // offers the first one: it is nominated for the sibling).
  args.pod = gpu_pod("hi-1", 8, "hi", 2);
  args.node_name_to_meta_victims->erase(first);
  auto second = planner.preempt(args);
  ASSERT_TRUE(second.node_name_to_meta_victims);
  ASSERT_EQ(second.node_name_to_meta_victims->size(), 1u);
  const std::string other = second.node_name_to_meta_victims->begin()->first;
  EXPECT_NE(other, first);
  EXPECT_NE(other, n(0));
  // Nothing was changed for real.
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 0);
  // A group larger than the cluster gets no victims.
  args.pod = gpu_pod("huge-0", 8, "huge", 9);
  EXPECT_FALSE(planner.preempt(args).node_name_to_meta_victims);
}

// What kube-scheduler does after preempting for a group of 2: each member's offer holds only
// its own nominated node (the sibling's nominated pod counts as running on the other). The
// group is planned on both nodes, each member bound on its own.
TEST_F(GangPlannerTest, NodesNominatedForSiblingsCountAsOfferedWhenPlanningTheGroup) {
  Pod a = gpu_pod("pair-0", 8, "pair", 2);
  Pod b = gpu_pod("pair-1", 8, "pair", 2);
  a.nominated_node_name = n(3);
  b.nominated_node_name = n(6);
  // b's attempt comes first and is turned down: a's nomination is not known yet.
  EXPECT_FALSE(filter(b, std::vector<std::string>{n(6)}).node_names);
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 64);
  auto ra = filter(a, std::vector<std::string>{n(3)});
  ASSERT_TRUE(ra.node_names) << (ra.failed_nodes ? ra.failed_nodes->begin()->second : "");
  EXPECT_EQ(ra.node_names->front(), n(3));
  auto rb = filter(b, std::vector<std::string>{n(6)});
  ASSERT_TRUE(rb.node_names);
  EXPECT_EQ(rb.node_names->front(), n(6));
  EXPECT_EQ(ledger.snapshot().job_gpus("k8s:ml:pair").size(), 16u);
  // Without a nomination a member's offer is all that is used.
  Pod c = gpu_pod("trio-0", 8, "trio", 3);
  EXPECT_FALSE(filter(c, std::vector<std::string>{n(0), n(1)}).node_names);
}

// The nominations of a group that is never planned are forgotten with the reservation timeout.
TEST_F(GangPlannerTest, SiblingNominationsExpire) {
  Pod a = gpu_pod("pair-0", 8, "pair", 2);
  a.nominated_node_name = n(3);
  EXPECT_FALSE(filter(a, std::vector<std::string>{n(4)}).node_names);  // n(3) is not offered to a
  now += 300'001;
  Pod b = gpu_pod("pair-1", 8, "pair", 2);
  EXPECT_FALSE(filter(b, std::vector<std::string>{n(6)}).node_names);
  EXPECT_EQ(ledger.snapshot().total_free_gpus(), 64);
}

TEST(PodRequest, GpusRanksAndGangs) {
  Pod p;
  p.name = "job-worker-12";
  Container a, b, init;
  a.requests["nvidia.com/gpu"] = "2";
  a.limits["nvidia.com/gpu"] = "2";
  b.limits["nvidia.com/gpu"] = "4000m";
  init.limits["nvidia.com/gpu"] = "8";
  p.containers = {a, b};
  EXPECT_EQ(*pod_gpu_count(p), 6);
  p.init_containers = {init};
  EXPECT_EQ(*pod_gpu_count(p), 8);
  EXPECT_EQ(pod_rank(p), 12);
  p.labels["batch.kubernetes.io/job-completion-index"] = "3";
  EXPECT_EQ(pod_rank(p), 3);
  p.annotations["kueue.x-k8s.io/pod-group-name"] = "kg";
  p.annotations["kueue.x-k8s.io/pod-group-total-count"] = "4";
  auto g = pod_gang(p);
  ASSERT_TRUE(g && *g);
  EXPECT_EQ((*g)->source, "kueue");
  EXPECT_EQ((*g)->size, 4);
  Pod v;
  v.annotations["scheduling.k8s.io/group-name"] = "vg";
  EXPECT_FALSE(pod_gang(v));
  v.annotations["toposched.io/group-size"] = "2";
  EXPECT_EQ((*pod_gang(v))->source, "volcano");
  auto r = job_request_for(p, *build_preset("dgx-h100?nodes=8"), "j", 4, 8);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gpus, 32);
  EXPECT_EQ(r->gpus_per_pod, 8);  // a group: pods of 8 GPUs, several to a node allowed
  EXPECT_EQ(r->gpus_per_node, 0);
  auto single = job_request_for(p, *build_preset("dgx-h100?nodes=8"), "j", 1, 8);
  ASSERT_TRUE(single);
  EXPECT_EQ(single->gpus_per_node, 8);
  EXPECT_EQ(single->gpus_per_pod, 0);
}

// Kueue's TAS annotations on the pods (what Kueue's PodSet asked for) become the request's
// tiers and slices; levels are named by node label, as in the Topology `export --to kueue`
// writes; the multi-layer JSON form sets the slice and its layers.
TEST(PodRequest, KueueTopologyAnnotationsAreTheRequestsTiersAndSlices) {
  const Cluster c = *build_preset("llama3-24k?pods=2&racks=4&servers_per_rack=2");  // rack, pod, aggregation
  Pod p;
  p.name = "w-0";
  p.namespace_name = "ml";
  p.annotations["kueue.x-k8s.io/podset-preferred-topology"] = "fabric.topograph.run/tier-1";
  p.annotations["kueue.x-k8s.io/podset-slice-required-topology-constraints"] =
      R"([{"topology": "fabric.topograph.run/tier-0", "size": 2}, {"topology": "kubernetes.io/hostname", "size": 1}])";
  auto r = job_request_for(p, c, "j", 4, 8);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->slice_tier, "fabric.topograph.run/tier-0");
  EXPECT_EQ(r->slice_size, 2);
  auto n = normalize(*r, c);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(n->preferred_tier_index, 1);
  EXPECT_EQ(n->slice_tier_index, 0);
  ASSERT_EQ(n->inner_slices.size(), 1u);
  EXPECT_EQ(n->inner_slices[0].tier_index, kNodeTier);
  EXPECT_EQ(n->inner_slices[0].size, 1);

  Pod q = p;
  q.annotations.clear();
  q.annotations["kueue.x-k8s.io/podset-required-topology"] = "network.topology.nvidia.com/spine";
  q.annotations["kueue.x-k8s.io/podset-slice-required-topology"] = "kubernetes.io/hostname";
  q.annotations["kueue.x-k8s.io/podset-slice-size"] = "1";
  n = normalize(*job_request_for(q, c, "j", 4, 8), c);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(n->required_tier_index, 1);
  EXPECT_EQ(n->slice_tier_index, kNodeTier);
  // GKE's block label names tier 1 too (a Kueue Topology on GKE levels by it).
  q.annotations["kueue.x-k8s.io/podset-required-topology"] = "cloud.google.com/gce-topology-block";
  n = normalize(*job_request_for(q, c, "j", 4, 8), c);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(n->required_tier_index, 1);
  q.annotations["kueue.x-k8s.io/podset-unconstrained-topology"] = "true";
  EXPECT_FALSE(normalize(*job_request_for(q, c, "j", 4, 8), c));  // unconstrained excludes a required tier

  // An NVLink-domain level is refused by name; an unknown label lists what is accepted.
  Pod d = p;
  d.annotations.clear();
  d.annotations["kueue.x-k8s.io/podset-required-topology"] = "accelerator.topograph.run/domain";
  auto bad = normalize(*job_request_for(d, c, "j", 4, 8), c);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("NVLink-domain level"), std::string::npos) << bad.error().message;
  d.annotations["kueue.x-k8s.io/podset-required-topology"] = "topology.k8s.aws/ultraserver-id";
  bad = normalize(*job_request_for(d, c, "j", 4, 8), c);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("NVLink-domain level"), std::string::npos) << bad.error().message;
  d.annotations["kueue.x-k8s.io/podset-required-topology"] = "fabric.topograph.run/tier-7";
  bad = normalize(*job_request_for(d, c, "j", 4, 8), c);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("kubernetes.io/hostname"), std::string::npos) << bad.error().message;

  // The multi-layer form: strict JSON, 1 to 3 entries, not together with the two-level pair.
  for (std::string text : {"[]", "{\"topology\": \"x\"}", R"([{"topology": "x", "size": 0}])",
                           R"([{"topology": "x", "size": 1, "extra": 1}])", "[{", R"([{"topology": "x", "size": 1, "size": 2}])"}) {
    Pod m = p;
    m.annotations["kueue.x-k8s.io/podset-slice-required-topology-constraints"] = text;
    auto e = job_request_for(m, c, "j", 4, 8);
    ASSERT_FALSE(e) << text;
    EXPECT_NE(e.error().message.find("podset-slice-required-topology-constraints"), std::string::npos) << e.error().message;
  }
  Pod both = p;
  both.annotations["kueue.x-k8s.io/podset-slice-size"] = "2";
  EXPECT_FALSE(job_request_for(both, c, "j", 4, 8));
}

// Volcano's pod annotations name a HyperNode tier as `export --to volcano` numbers them
// (llama3-24k has no NVLink domains: tier 1 = rack, 2 = pod, 3 = aggregation; GB200 racks
// are a tier of their own below the leaves: 1 = accelerator-domain, 2 = leaf).
TEST(PodRequest, VolcanoNetworkTopologyAnnotationsAreTheRequestsTier) {
  const Cluster c = *build_preset("llama3-24k?pods=2&racks=4&servers_per_rack=2");
  ASSERT_EQ(c.tiers().size(), 3u);
  const std::string mode = "volcano.sh/network-topology-mode", tier = "volcano.sh/network-topology-highest-tier";
  auto normalized = [&](std::map<std::string, std::string> annotations, const Cluster& on) {
    Pod p;
    p.name = "w-0";
    p.namespace_name = "ml";
    p.annotations = std::move(annotations);
    const int gpus_per_pod = on.node_gpu_count(NodeId(0));  // a whole node each
    auto r = job_request_for(p, on, "j", 4, gpus_per_pod);
    return r ? normalize(*r, on) : r;
  };
  auto says = [](const Result<JobRequest>& r, const std::string& text) {
    return !r && r.error().message.find(text) != std::string::npos;
  };
  auto hard2 = normalized({{mode, "hard"}, {tier, "2"}}, c);
  ASSERT_TRUE(hard2) << hard2.error().message;
  EXPECT_EQ(hard2->required_tier, c.tiers()[1].name);
  EXPECT_EQ(hard2->required_tier_index, 1);
  EXPECT_FALSE(hard2->preferred_tier_index);
  // The mode defaults to hard, and is read case-insensitively, as Volcano's controller does.
  auto hard1 = normalized({{tier, "1"}}, c);
  ASSERT_TRUE(hard1) << hard1.error().message;
  EXPECT_EQ(hard1->required_tier_index, 0);
  auto hard3 = normalized({{mode, "Hard"}, {tier, "3"}}, c);
  ASSERT_TRUE(hard3) << hard3.error().message;
  EXPECT_EQ(hard3->required_tier_index, 2);
  auto soft = normalized({{mode, "soft"}, {tier, "1"}}, c);
  ASSERT_TRUE(soft) << soft.error().message;
  EXPECT_FALSE(soft->required_tier_index);
  EXPECT_EQ(soft->preferred_tier_index, 0);
  // No tier, or one above every HyperNode: no limit, as in Volcano.
  for (auto annotations : std::vector<std::map<std::string, std::string>>{{{mode, "hard"}}, {{tier, "4"}}}) {
    auto none = normalized(annotations, c);
    ASSERT_TRUE(none) << none.error().message;
    EXPECT_FALSE(none->required_tier_index);
    EXPECT_FALSE(none->preferred_tier_index);
  }
  // Bad values name the annotation, the value and what is accepted.
  const std::string levels = "1 (" + c.tiers()[0].name + "), 2 (" + c.tiers()[1].name + "), 3 (";
  for (std::string value : {"0", "-1", "leaf", "2x", ""}) {
    auto bad = normalized({{tier, value}}, c);
    EXPECT_TRUE(says(bad, tier + "='" + value + "'")) << value;
    EXPECT_TRUE(says(bad, levels)) << (bad ? "accepted" : bad.error().message);
  }
  auto bad_mode = normalized({{mode, "strict"}, {tier, "1"}}, c);
  EXPECT_TRUE(says(bad_mode, "'strict' must be hard or soft")) << (bad_mode ? "accepted" : bad_mode.error().message);

  const Cluster gb = *build_preset("gb200-nvl72?racks=2");
  auto leaf = normalized({{tier, "2"}}, gb);
  ASSERT_TRUE(leaf) << leaf.error().message;
  EXPECT_EQ(leaf->required_tier_index, 0);
  auto domain = normalized({{tier, "1"}}, gb);
  EXPECT_TRUE(says(domain, "accelerator-domain level")) << (domain ? "accepted" : domain.error().message);
  // The same level by its tierName (what highestTierName says), as `place --required-tier`.
  JobRequest by_name;
  by_name.gpus = 8;
  by_name.required_tier = "accelerator-domain";
  auto named = normalize(by_name, gb);
  EXPECT_TRUE(says(named, "NVLink-domain level")) << (named ? "accepted" : named.error().message);

  // One scheduler's annotations per pod.
  auto two = normalized({{tier, "1"}, {"kueue.x-k8s.io/podset-required-topology", "fabric.topograph.run/tier-0"}}, c);
  EXPECT_TRUE(says(two, "kueue.x-k8s.io/podset-required-topology (Kueue) and " + tier + " (Volcano)"))
      << (two ? "accepted" : two.error().message);
}

// KAI-Scheduler's placement annotations name levels by node label, as the KAI Topology
// `export --to kai` writes them.
TEST(PodRequest, KaiTopologyPlacementAnnotationsAreTheRequestsTiers) {
  const Cluster c = *build_preset("llama3-24k?pods=2&racks=4&servers_per_rack=2");
  Pod p;
  p.name = "w-0";
  p.namespace_name = "ml";
  p.annotations["kai.scheduler/topology"] = "cluster-topology";
  p.annotations["kai.scheduler/topology-required-placement"] = "fabric.topograph.run/tier-1";
  p.annotations["kai.scheduler/topology-preferred-placement"] = "fabric.topograph.run/tier-0";
  auto r = job_request_for(p, c, "j", 4, 8);
  ASSERT_TRUE(r) << r.error().message;
  auto n = normalize(*r, c);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(n->required_tier_index, 1);
  EXPECT_EQ(n->preferred_tier_index, 0);

  Pod domain = p;
  domain.annotations["kai.scheduler/topology-required-placement"] = "accelerator.topograph.run/domain";
  auto bad = normalize(*job_request_for(domain, c, "j", 4, 8), c);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("NVLink-domain level"), std::string::npos) << bad.error().message;

  Pod mixed = p;
  mixed.annotations["volcano.sh/network-topology-mode"] = "soft";
  auto two = job_request_for(mixed, c, "j", 4, 8);
  ASSERT_FALSE(two);
  EXPECT_NE(two.error().message.find("(KAI-Scheduler) and volcano.sh/network-topology-mode (Volcano)"),
            std::string::npos)
      << two.error().message;
}

// The planner obeys a Volcano group's hard tier: 4 x 8 GPUs offered 3 nodes in each of two
// leaves fit across the leaves (tier 2, the spine) but not in one leaf (tier 1); soft mode
// only prefers the leaf, so the group is placed.
TEST(GangPlannerVolcano, AHardHighestTierKeepsTheGroupInOneHyperNodeOfThatTier) {
  const Cluster cluster = *build_preset("dgx-h100?nodes=64");  // leaves of 32 nodes under one spine
  ASSERT_EQ(cluster.tiers().size(), 2u);
  std::vector<std::string> offered;
  for (int i : {0, 1, 2, 32, 33, 34}) offered.push_back(cluster.node_name(NodeId(static_cast<std::uint32_t>(i))));
  auto plan = [&](std::string group, std::string mode, std::string tier) {
    EngineLedger ledger{cluster};
    GangPlanner planner{ledger, [] { return std::int64_t{1000}; }, PlannerOptions{"topo", 300'000}};
    Pod p = gpu_pod(group + "-0", 8);
    p.annotations["scheduling.k8s.io/group-name"] = group;
    p.annotations["toposched.io/group-size"] = "4";
    p.annotations["volcano.sh/network-topology-mode"] = mode;
    p.annotations["volcano.sh/network-topology-highest-tier"] = tier;
    ExtenderArgs a;
    a.pod = p;
    a.node_names = offered;
    auto r = planner.filter(a);
    EXPECT_TRUE(r.error.empty()) << r.error;
    return std::make_pair(r.node_names.has_value(), ledger.snapshot().job_gpus("k8s:ml:" + group).size());
  };
  EXPECT_EQ(plan("leaf", "hard", "1"), std::make_pair(false, std::size_t{0}));
  EXPECT_EQ(plan("spine", "hard", "2"), std::make_pair(true, std::size_t{32}));
  EXPECT_EQ(plan("soft", "soft", "1"), std::make_pair(true, std::size_t{32}));
}

// What a Volcano partitionPolicy (or equal KAI subgroups) asks for, said with Kueue's slice
// annotations next to Volcano's keys (docs/kubernetes.md): 2 partitions of 2 pods, each in
// one leaf, the group under the spine (tier 2). Offered 3 nodes in each of two leaves, each
// leaf takes one whole partition.
TEST(GangPlannerVolcano, PartitionsAsKueueSlicesEachStayInOneLeaf) {
  const Cluster cluster = *build_preset("dgx-h100?nodes=64");
  std::vector<std::string> offered;
  for (int i : {0, 1, 2, 32, 33, 34}) offered.push_back(cluster.node_name(NodeId(static_cast<std::uint32_t>(i))));
  EngineLedger ledger{cluster};
  GangPlanner planner{ledger, [] { return std::int64_t{1000}; }, PlannerOptions{"topo", 300'000}};
  Pod p = gpu_pod("part-0", 8);
  p.annotations["scheduling.k8s.io/group-name"] = "part";
  p.annotations["toposched.io/group-size"] = "4";
  p.annotations["toposched.io/policy"] = "kueue-bestfit";
  p.annotations["volcano.sh/network-topology-highest-tier"] = "2";
  p.annotations["kueue.x-k8s.io/podset-slice-size"] = "2";
  p.annotations["kueue.x-k8s.io/podset-slice-required-topology"] = "leaf";
  ExtenderArgs a;
  a.pod = p;
  a.node_names = offered;
  auto r = planner.filter(a);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(r.node_names);
  std::map<std::uint32_t, std::set<std::uint32_t>> nodes_by_leaf;
  const AllocationState held = ledger.snapshot();
  for (GpuId g : held.job_gpus("k8s:ml:part"))
    nodes_by_leaf[cluster.node_switch(cluster.gpu_node(g)).value].insert(cluster.gpu_node(g).value);
  ASSERT_EQ(nodes_by_leaf.size(), 2u);
  for (const auto& [leaf, nodes] : nodes_by_leaf) EXPECT_EQ(nodes.size(), 2u) << "leaf " << leaf;
}

TEST(PodRequest, KaiPodGroupNameIsAGangKey) {
  Pod k;
  k.annotations["pod-group-name"] = "pg-train";
  EXPECT_FALSE(pod_gang(k));  // KAI keeps minMember in the PodGroup: the size must be said
  k.annotations["toposched.io/group-size"] = "4";
  auto g = pod_gang(k);
  ASSERT_TRUE(g && *g);
  EXPECT_EQ((*g)->source, "kai");
  EXPECT_EQ((*g)->size, 4);
}

TEST(PodRequest, KubernetesPodGroupIsAGangKey) {
  Pod k;
  k.annotations["toposched.io/pod-group"] = "train";
  auto none = pod_gang(k);
  ASSERT_FALSE(none);  // the size must be said (the plugin writes the gang's minCount)
  EXPECT_NE(none.error().message.find("toposched.io/group-size"), std::string::npos) << none.error().message;
  k.annotations["toposched.io/group-size"] = "3";
  auto g = pod_gang(k);
  ASSERT_TRUE(g && *g);
  EXPECT_EQ((*g)->source, "kubernetes");
  EXPECT_EQ((*g)->name, "train");
  EXPECT_EQ((*g)->size, 3);
}

}  // namespace
}  // namespace toposched::k8s

namespace toposched::k8s {
namespace {
TEST_F(GangPlannerTest, AJobReleasedThroughTheApiIsPlannedAfresh) {
  auto first = filter(gpu_pod("r-0", 8, "r", 2));
  ASSERT_TRUE(first.node_names);
  ASSERT_TRUE(ledger.release("k8s:ml:r"));
  auto again = filter(gpu_pod("r-1", 8, "r", 2));
  ASSERT_TRUE(again.node_names);
  EXPECT_EQ(ledger.snapshot().job_gpus("k8s:ml:r").size(), 16u);
  EXPECT_EQ(planner.groups()[0].members[1].pod, "ml/r-1");
}
}  // namespace
}  // namespace toposched::k8s
