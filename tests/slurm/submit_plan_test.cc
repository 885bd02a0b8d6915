// The submit wrapper's pure parts: reading the size from sbatch arguments, and the plan
// (nodes, rank order, GPUs Slurm will allocate, gpu-bind, sbatch command) on live state.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "formats/cluster_source.h"
#include "slurm/sbatch_args.h"
#include "slurm/submit_plan.h"

namespace toposched::slurm {
namespace {

Cluster test_cluster() {
  auto c = load_cluster(std::string(TOPOSCHED_TEST_DATA) + "/slurm/cluster.yaml");
  EXPECT_TRUE(c) << (c ? "" : c.error().to_string());
  return std::move(*c);
}

ParsedSbatchArgs parsed(std::vector<std::string> args) {
  auto p = parse_sbatch_args(args);
  EXPECT_TRUE(p) << (p ? "" : p.error().message);
  return p ? *p : ParsedSbatchArgs{};
}

bool has_arg(const SubmitPlan& plan, const std::string& arg) {
  return std::find(plan.sbatch_args.begin(), plan.sbatch_args.end(), arg) != plan.sbatch_args.end();
}

TEST(SbatchArgs, SizeOptionsInEveryForm) {
  auto a = parsed({"-N2", "--gpus-per-node=4", "-J", "train", "--exclusive", "job.sh", "-N", "9"});
  EXPECT_EQ(a.size.nodes, 2);
  EXPECT_EQ(a.size.gpus_per_node, 4);
  EXPECT_TRUE(a.size.exclusive);
  // Size options are taken out; the rest, script arguments included, stays in order.
  EXPECT_EQ(a.kept, (std::vector<std::string>{"-J", "train", "--exclusive", "job.sh", "-N", "9"}));
  auto b = parsed({"--nodes", "3", "--gres=gpu:h100:2,nic:1", "-p", "batch", "--wrap", "srun hostname"});
  EXPECT_EQ(b.size.nodes, 3);
  EXPECT_EQ(b.size.gpus_per_node, 2);
  EXPECT_EQ(b.size.gpu_type, "h100");
  EXPECT_EQ(b.size.other_gres, "nic:1");
  EXPECT_EQ(b.size.partition, "batch");
  EXPECT_EQ(b.kept, (std::vector<std::string>{"-p", "batch", "--wrap", "srun hostname"}));
  auto c = parsed({"-G", "8", "-n8", "--wrap=true"});
  EXPECT_EQ(c.size.gpus, 8);
  EXPECT_EQ(c.size.ntasks, 8);
}

TEST(SbatchArgs, RefusesWhatToposchedSetsAndIncompleteCommands) {
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"-w", "gpu01", "--wrap=true"}, {"--nodelist=gpu01", "--wrap=true"},
        {"--distribution=block", "--wrap=true"}, {"--gpu-bind=closest", "--wrap=true"}, {"-N", "2-4", "--wrap=true"},
        {"--gpus=0", "--wrap=true"}, {"-N", "2"}, {"--partition=a,b", "--wrap=true"}}) {
    auto r = parse_sbatch_args(bad);
    EXPECT_FALSE(r) << bad[0];
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(SbatchArgs, RequestFromSize) {
  PlaceRequest shape;
  auto r = request_from_sbatch(parsed({"-N", "2", "--ntasks-per-node=4", "--wrap=x"}).size, shape);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gpus, 8);
  EXPECT_EQ(r->gpus_per_node, 4);
  auto whole = request_from_sbatch(parsed({"-N", "2", "--exclusive", "--wrap=x"}).size, shape);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->nodes, 2);
  EXPECT_FALSE(request_from_sbatch(parsed({"-N", "2", "--wrap=x"}).size, shape));
  EXPECT_FALSE(request_from_sbatch(parsed({"--gpus=6", "-N", "4", "--wrap=x"}).size, shape));
  EXPECT_FALSE(request_from_sbatch(parsed({"--gpus=8", "--ntasks=4", "--wrap=x"}).size, shape));
}

TEST(SubmitPlan, RankOrderHostfileAndCommand) {
  Cluster c = test_cluster();
  Engine live(c, AllocationState(c));
  PlaceRequest shape;
  shape.job.tp = 4;
  shape.job.pp = 2;
  auto plan = plan_submit(live, parsed({"-N", "2", "--gpus-per-node=4", "-J", "t", "--wrap=srun true"}), shape);
  ASSERT_TRUE(plan) << plan.error().to_string();
  EXPECT_EQ(plan->nodes, 2);
  EXPECT_EQ(plan->gpus_per_node, 4);
  ASSERT_EQ(plan->gpus_by_rank.size(), 8u);
  EXPECT_EQ(plan->placement["gpus"].size(), 8u);
  EXPECT_EQ(plan->placement["job"], "slurm-submit");
  // The hostfile lists rank r's node on line r.
  std::string expected;
  for (GpuId g : plan->gpus_by_rank) expected += c.node_name(c.gpu_node(g)) + "\n";
  EXPECT_EQ(plan->hostfile, expected);
  EXPECT_EQ(plan->gpu_bind, "map_gpu:0,1,2,3");
  EXPECT_TRUE(has_arg(*plan, "--nodes=2"));
  EXPECT_TRUE(has_arg(*plan, "--ntasks=8"));
  EXPECT_TRUE(has_arg(*plan, "--ntasks-per-node=4"));
  EXPECT_TRUE(has_arg(*plan, "--gres=gpu:4"));
  EXPECT_TRUE(has_arg(*plan, "--distribution=arbitrary"));
  EXPECT_TRUE(has_arg(*plan, "--gpu-bind=map_gpu:0,1,2,3"));
  EXPECT_EQ(plan->sbatch_args.back(), "--wrap=srun true");
  // Both nodes under one leaf (the topo policy keeps a job inside a leaf when it can).
  EXPECT_EQ(c.node_switch(*c.find_node(plan->node_order[0])), c.node_switch(*c.find_node(plan->node_order[1])));
}

// On a node whose GPUs 0-1 are busy, Slurm gives a 2-GPU share the indices 2-3; the plan
// must say so, whatever the policy picked.
TEST(SubmitPlan, TakesTheGpusSlurmWillAllocate) {
  Cluster c = test_cluster();
  AllocationState busy_state(c);
  for (std::uint32_t n = 0; n < c.node_count(); ++n) {
    NodeId node(n);
    std::vector<GpuId> busy{c.node_gpu(node, 0), c.node_gpu(node, 1)};
    ASSERT_TRUE(busy_state.allocate("slurm-job:" + std::to_string(n), busy));
  }
  Engine live(c, std::move(busy_state));
  for (const char* policy : {"topo", "first-fit", "random", "slurm-tree"}) {
    PlaceRequest shape;
    shape.policy = policy;
    auto plan = plan_submit(live, parsed({"--gpus=4", "--wrap=true"}), shape);
    ASSERT_TRUE(plan) << policy << ": " << plan.error().to_string();
    EXPECT_EQ(plan->gpus_per_node, 2) << policy;
    std::set<int> locals;
    for (GpuId g : plan->gpus_by_rank) locals.insert(c.gpu_local_index(g));
    EXPECT_EQ(locals, (std::set<int>{2, 3})) << policy;
  }
  EXPECT_EQ(live.job_count(), c.node_count());  // a plan is a dry run: nothing held
}

// 6 GPUs where the free capacity is 4 + 2 + ...: Slurm needs equal counts per node.
TEST(SubmitPlan, EqualGpuCountsPerNode) {
  Cluster c = test_cluster();
  AllocationState busy_state(c);
  for (std::uint32_t n = 1; n < c.node_count(); ++n) {
    NodeId node(n);
    ASSERT_TRUE(
        busy_state.allocate("busy" + std::to_string(n), std::vector<GpuId>{c.node_gpu(node, 0), c.node_gpu(node, 1)}));
  }
  Engine live(c, std::move(busy_state));
  auto plan = plan_submit(live, parsed({"--gpus=6", "--wrap=true"}), PlaceRequest{});
  ASSERT_TRUE(plan) << plan.error().to_string();
  std::map<std::string, int> per_node;
  for (GpuId g : plan->gpus_by_rank) ++per_node[c.node_name(c.gpu_node(g))];
  for (const auto& [node, count] : per_node) EXPECT_EQ(count, plan->gpus_per_node) << node;
  EXPECT_EQ(plan->gpus_per_node * plan->nodes, 6);
}

TEST(SubmitPlan, InfeasibleAndBadPolicy) {
  Cluster c = test_cluster();
  Engine live(c, AllocationState(c));
  auto too_big = plan_submit(live, parsed({"--gpus=64", "--wrap=true"}), PlaceRequest{});
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.error().code, ErrorCode::kInfeasible);
  PlaceRequest bad;
  bad.policy = "nosuch";
  EXPECT_FALSE(plan_submit(live, parsed({"--gpus=4", "--wrap=true"}), bad));
}

TEST(SubmitPlan, DryRunJsonAndShellCommand) {
  Cluster c = test_cluster();
  Engine live(c, AllocationState(c));
  auto plan = plan_submit(live, parsed({"--gpus=2", "--wrap=echo 'hi there'"}), PlaceRequest{});
  ASSERT_TRUE(plan);
  auto j = dry_run_json(*plan, "/shared/h.hosts");
  EXPECT_EQ(j["sbatch"][0], "sbatch");
  EXPECT_EQ(j["env"]["SLURM_HOSTFILE"], "/shared/h.hosts");
  EXPECT_EQ(j["plan"]["gpus"].size(), 2u);
  EXPECT_EQ(j["plan"]["gpus"][1]["rank"], 1);
  std::string cmd = shell_command(*plan, "/shared/h.hosts");
  EXPECT_EQ(cmd.rfind("SLURM_HOSTFILE=/shared/h.hosts sbatch --parsable", 0), 0u) << cmd;
  EXPECT_NE(cmd.find("'--wrap=echo '\\''hi there'\\'''"), std::string::npos) << cmd;
}

}  // namespace
}  // namespace toposched::slurm
