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

TEST(SlurmSync, HoldsOutsideJobsAndUnusableNodesFromScratch) {
  Cluster c = test_cluster();
  auto actions = reconcile(c, captured(), {});
  ASSERT_TRUE(actions) << actions.error().to_string();
  const SyncAction* j1 = find(*actions, SyncAction::Kind::kHold, "slurm-job:1");
  ASSERT_NE(j1, nullptr);
  EXPECT_EQ(j1->gpus, gpus(c, "gpu01", {0, 1}));
  ASSERT_NE(find(*actions, SyncAction::Kind::kHold, "slurm-job:2"), nullptr);
  EXPECT_EQ(find(*actions, SyncAction::Kind::kHold, "slurm-job:3"), nullptr);  // CPU only
  ASSERT_NE(find(*actions, SyncAction::Kind::kHold, "slurm-unavailable:gpu04"), nullptr);  // drained
  ASSERT_NE(find(*actions, SyncAction::Kind::kHold, "slurm-unavailable:gpu05"), nullptr);  // unknown to Slurm
  EXPECT_EQ(actions->size(), 5u);
}

TEST(SlurmSync, InSyncMeansNothingToDoAndEndedJobsAreReleased) {
  Cluster c = test_cluster();
  SlurmLiveState live = captured();
  auto first = reconcile(c, live, {});
  ASSERT_TRUE(first);
  std::vector<HeldJob> held;
  for (const auto& a : *first) held.push_back({a.job_id, a.gpus});
  // Placed through the API on a GPU Slurm leaves free (gpu06 is unknown to the captured
  // sinfo, so all of it is held as unavailable): left alone.
  held.push_back({"job-7", gpus(c, "gpu01", {3})});
  auto again = reconcile(c, live, held);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty());
  // Job 2 ends (Slurm drops it from squeue).
  live.jobs.erase(std::remove_if(live.jobs.begin(), live.jobs.end(), [](const SlurmJob& j) { return j.id == "2"; }),
                  live.jobs.end());
  auto after = reconcile(c, live, held);
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
  std::vector<HeldJob> held;
  auto initial = reconcile(c, live, {});
  ASSERT_TRUE(initial);
  for (const auto& a : *initial) held.push_back({a.job_id, a.gpus});
  held.push_back({"slurm-1-0-0001", gpus(c, "gpu01", {2, 3})});
  auto steady = reconcile(c, live, held);
  ASSERT_TRUE(steady);
  EXPECT_TRUE(steady->empty());
  // It starts on other GPUs than planned: the service follows Slurm, same id.
  live.jobs.back().state = "RUNNING";
  live.jobs.back().nodes = {{"gpu02", {3}}, {"gpu03", {3}}};
  auto moved = reconcile(c, live, held);
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
  auto ended = reconcile(c, live, held);
  ASSERT_TRUE(ended);
  ASSERT_EQ(ended->size(), 1u);
  EXPECT_EQ((*ended)[0].job_id, "slurm-1-0-0001");
  EXPECT_FALSE((*ended)[0].slurm_may_not_know_yet);
  // Purged from Slurm's list: released too, but only after the caller's grace period.
  live.jobs.pop_back();
  auto purged = reconcile(c, live, held);
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
