// serve --slurm's reconciliation: outside jobs held, ended jobs released, the plugin's jobs
// followed through pending / running / ended, conflicts resolved in Slurm's favour.
#include <gtest/gtest.h>

#include <algorithm>

#include "formats/cluster_source.h"
#include "slurm/sync.h"
#include "topology/file_io.h"

namespace toposched::slurm {
namespace {

Cluster test_cluster() {
  auto c = load_cluster(std::string(TOPOSCHED_TEST_DATA) + "/slurm/cluster.yaml");
  EXPECT_TRUE(c) << (c ? "" : c.error().to_string());
  return std::move(*c);
}

SlurmLiveState captured() {
  auto sinfo = read_text_file(std::string(TOPOSCHED_TEST_DATA) + "/slurm/sinfo.json");
  auto squeue = read_text_file(std::string(TOPOSCHED_TEST_DATA) + "/slurm/squeue.json");
  return {*parse_sinfo_json(*sinfo), *parse_squeue_json(*squeue)};
}

std::vector<GpuId> gpus(const Cluster& c, const char* node, std::vector<int> idx) {
  std::vector<GpuId> out;
  for (int i : idx) out.push_back(c.node_gpu(*c.find_node(node), i));
  return out;
}

const SyncAction* find(const std::vector<SyncAction>& a, SyncAction::Kind k, const std::string& id) {
  auto it = std::find_if(a.begin(), a.end(), [&](const SyncAction& x) { return x.kind == k && x.job_id == id; });
  return it == a.end() ? nullptr : &*it;
}

const SyncAction* find_mark(const std::vector<SyncAction>& a, SyncAction::Kind k, const std::string& node) {
  auto it = std::find_if(a.begin(), a.end(), [&](const SyncAction& x) { return x.kind == k && x.node == node; });
  return it == a.end() ? nullptr : &*it;
}

// What the service holds after carrying out `actions` (as SlurmSync does through the engine).
struct Mirror {
  std::vector<HeldJob> held;
  std::vector<SlurmNodeMark> marks;
  void carry_out(const std::vector<SyncAction>& actions) {
    for (const SyncAction& a : actions) {
      auto job = std::find_if(held.begin(), held.end(), [&](const HeldJob& h) { return h.id == a.job_id; });
      auto mark = std::find_if(marks.begin(), marks.end(), [&](const SlurmNodeMark& m) { return m.node == a.node; });
      switch (a.kind) {
        case SyncAction::Kind::kRelease: held.erase(job); break;
        case SyncAction::Kind::kHold: held.push_back({a.job_id, a.gpus}); break;
        case SyncAction::Kind::kUnmarkNode: marks.erase(mark); break;
        case SyncAction::Kind::kMarkNode:
          if (mark != marks.end()) marks.erase(mark);
          marks.push_back({a.node, a.reason});
          break;
      }
    }
  }
};

TEST(SlurmSync, HoldsOutsideJobsAndMarksUnusableNodesFromScratch) {
  Cluster c = test_cluster();
  auto actions = reconcile(c, captured(), {});
  ASSERT_TRUE(actions) << actions.error().to_string();
  const SyncAction* j1 = find(*actions, SyncAction::Kind::kHold, "slurm-job:1");
  ASSERT_NE(j1, nullptr);
  EXPECT_EQ(j1->gpus, gpus(c, "gpu01", {0, 1}));
  ASSERT_NE(find(*actions, SyncAction::Kind::kHold, "slurm-job:2"), nullptr);
  EXPECT_EQ(find(*actions, SyncAction::Kind::kHold, "slurm-job:3"), nullptr);  // CPU only
  // Nodes Slurm cannot use are node marks of source "slurm", not pseudo jobs.
  const SyncAction* drained = find_mark(*actions, SyncAction::Kind::kMarkNode, "gpu04");
  ASSERT_NE(drained, nullptr);
  EXPECT_EQ(drained->reason, "Slurm state idle+DRAIN");
  const SyncAction* unknown = find_mark(*actions, SyncAction::Kind::kMarkNode, "gpu05");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->reason, "unknown to Slurm");
  ASSERT_NE(find_mark(*actions, SyncAction::Kind::kMarkNode, "gpu06"), nullptr);
  EXPECT_EQ(actions->size(), 5u);
  // Marks come before holds (releases first, as ever).
  EXPECT_EQ(actions->front().kind, SyncAction::Kind::kMarkNode);
}

TEST(SlurmSync, MarksFollowTheNodesAndOldPseudoJobsGo) {
  Cluster c = test_cluster();
  SlurmLiveState live = captured();
  Mirror service;
  // A service that ran an older toposched holds the drained node as a pseudo job.
  service.held.push_back({"slurm-unavailable:gpu04", gpus(c, "gpu04", {0, 1, 2, 3})});
  auto first = reconcile(c, live, service.held, service.marks);
  ASSERT_TRUE(first) << first.error().to_string();
  ASSERT_NE(find(*first, SyncAction::Kind::kRelease, "slurm-unavailable:gpu04"), nullptr);
  service.carry_out(*first);
  auto steady = reconcile(c, live, service.held, service.marks);
  ASSERT_TRUE(steady);
  EXPECT_TRUE(steady->empty());
  // gpu04 is resumed: its mark is lifted. gpu01 goes down: marked, its job kept.
  live.nodes[3].flags.clear();
  live.nodes[0].state = "down";
  auto changed = reconcile(c, live, service.held, service.marks);
  ASSERT_TRUE(changed);
  ASSERT_EQ(changed->size(), 2u);
  EXPECT_NE(find_mark(*changed, SyncAction::Kind::kUnmarkNode, "gpu04"), nullptr);
  const SyncAction* down = find_mark(*changed, SyncAction::Kind::kMarkNode, "gpu01");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->reason, "Slurm state down");
  EXPECT_EQ(changed->front().kind, SyncAction::Kind::kUnmarkNode);
  service.carry_out(*changed);
  // The same node drained as well: the mark's reason changes.
  live.nodes[0].flags = {"DRAIN"};
  auto reason = reconcile(c, live, service.held, service.marks);
  ASSERT_TRUE(reason);
  ASSERT_EQ(reason->size(), 1u);
  EXPECT_EQ((*reason)[0].reason, "Slurm state down+DRAIN");
  // Fewer GPUs configured in Slurm than in the spec: the rest is held, not the node marked.
  live.nodes[0] = live.nodes[1];
  live.nodes[0].name = "gpu01";
  live.nodes[0].gpus = 3;
  service.carry_out(*reason);
  auto fewer = reconcile(c, live, service.held, service.marks);
  ASSERT_TRUE(fewer);
  const SyncAction* beyond = find(*fewer, SyncAction::Kind::kHold, "slurm-unavailable:gpu01");
  ASSERT_NE(beyond, nullptr);
  EXPECT_EQ(beyond->gpus, gpus(c, "gpu01", {3}));
  EXPECT_NE(find_mark(*fewer, SyncAction::Kind::kUnmarkNode, "gpu01"), nullptr);
}

TEST(SlurmSync, InSyncMeansNothingToDoAndEndedJobsAreReleased) {
  Cluster c = test_cluster();
  SlurmLiveState live = captured();
  auto first = reconcile(c, live, {});
  ASSERT_TRUE(first);
  Mirror service;
  service.carry_out(*first);
  std::vector<HeldJob>& held = service.held;
  // Placed through the API on a GPU Slurm leaves free: left alone.
  held.push_back({"job-7", gpus(c, "gpu01", {3})});
  auto again = reconcile(c, live, held, service.marks);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty());
  // Job 2 ends (Slurm drops it from squeue).
  live.jobs.erase(std::remove_if(live.jobs.begin(), live.jobs.end(), [](const SlurmJob& j) { return j.id == "2"; }),
                  live.jobs.end());
  auto after = reconcile(c, live, held, service.marks);
  ASSERT_TRUE(after);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].kind, SyncAction::Kind::kRelease);
  EXPECT_EQ((*after)[0].job_id, "slurm-job:2");
}

TEST(SlurmSync, PluginJobsFollowSlurm) {
  Cluster c = test_cluster();
  SlurmLiveState live = captured();
  // The plugin placed "slurm-1-0-0001" on gpu01's free GPUs; Slurm keeps it pending: the
  // reservation stays.
  SlurmJob pending{"9", "PENDING", "train", "toposched:tp=2", "toposched-job=slurm-1-0-0001", {}};
  live.jobs.push_back(pending);
  auto initial = reconcile(c, live, {});
  ASSERT_TRUE(initial);
  Mirror service;
  service.carry_out(*initial);
  std::vector<HeldJob>& held = service.held;
  const std::vector<SlurmNodeMark>& marks = service.marks;
  held.push_back({"slurm-1-0-0001", gpus(c, "gpu01", {2, 3})});
  auto steady = reconcile(c, live, held, marks);
  ASSERT_TRUE(steady);
  EXPECT_TRUE(steady->empty());
  // It starts on other GPUs than planned: the service follows Slurm, same id.
  live.jobs.back().state = "RUNNING";
  live.jobs.back().nodes = {{"gpu02", {3}}, {"gpu03", {3}}};
  auto moved = reconcile(c, live, held, marks);
  ASSERT_TRUE(moved);
  ASSERT_NE(find(*moved, SyncAction::Kind::kRelease, "slurm-1-0-0001"), nullptr);
  const SyncAction* hold = find(*moved, SyncAction::Kind::kHold, "slurm-1-0-0001");
  ASSERT_NE(hold, nullptr);
  std::vector<GpuId> moved_to = gpus(c, "gpu02", {3});
  moved_to.push_back(gpus(c, "gpu03", {3})[0]);
  EXPECT_EQ(hold->gpus, moved_to);
  EXPECT_EQ(moved->front().kind, SyncAction::Kind::kRelease);  // releases come first
  // It ends: released.
  live.jobs.back().state = "COMPLETED";
  held.back().gpus = moved_to;
  auto ended = reconcile(c, live, held, marks);
  ASSERT_TRUE(ended);
  ASSERT_EQ(ended->size(), 1u);
  EXPECT_EQ((*ended)[0].job_id, "slurm-1-0-0001");
  EXPECT_FALSE((*ended)[0].slurm_may_not_know_yet);
  // Purged from Slurm's list: released too, but only after the caller's grace period.
  live.jobs.pop_back();
  auto purged = reconcile(c, live, held, marks);
  ASSERT_TRUE(purged);
  ASSERT_EQ(purged->size(), 1u);
  EXPECT_TRUE((*purged)[0].slurm_may_not_know_yet);
}

TEST(SlurmSync, SlurmWinsConflictsAndUnknownNodesAreErrors) {
  Cluster c = test_cluster();
  SlurmLiveState live = captured();
  std::vector<HeldJob> held{{"job-1", gpus(c, "gpu01", {1, 2})}};
  auto actions = reconcile(c, live, held);
  ASSERT_TRUE(actions);
  const SyncAction* r = find(*actions, SyncAction::Kind::kRelease, "job-1");
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->reason.find("gpu01:1"), std::string::npos) << r->reason;
  live.jobs[0].nodes[0].node = "ghost1";
  EXPECT_FALSE(reconcile(c, live, {}));
}

}  // namespace
}  // namespace toposched::slurm
