// Slurm live state: the parsers on output captured from real Slurm 22.05 daemons
// (tests/data/slurm/README.md), truncated and corrupted copies, and the mapping onto a
// cluster spec (busy GPUs by index, unusable nodes, nodes known to one side only).
#include <gtest/gtest.h>

#include <algorithm>

#include "formats/cluster_source.h"
#include "placement/engine.h"
#include "slurm/live_state.h"
#include "topology/file_io.h"
#include "support/test_data.h"

namespace toposched::slurm {
namespace {

std::string data(const std::string& name) { return testing::test_data_text("slurm/" + name); }

Cluster test_cluster() {
  auto c = load_cluster(std::string(TOPOSCHED_TEST_DATA) + "/slurm/cluster.yaml");
  EXPECT_TRUE(c) << (c ? "" : c.error().to_string());
  return std::move(*c);
}

const SlurmJob* find_job(const std::vector<SlurmJob>& jobs, const std::string& id) {
  auto it = std::find_if(jobs.begin(), jobs.end(), [&](const SlurmJob& j) { return j.id == id; });
  return it == jobs.end() ? nullptr : &*it;
}

void expect_captured_jobs(const std::vector<SlurmJob>& jobs) {
  ASSERT_EQ(jobs.size(), 4u);
  const SlurmJob* j1 = find_job(jobs, "1");
  ASSERT_NE(j1, nullptr);
  EXPECT_EQ(j1->state, "RUNNING");
  ASSERT_EQ(j1->nodes.size(), 1u);
  EXPECT_EQ(j1->nodes[0].node, "gpu01");
  EXPECT_EQ(j1->nodes[0].gpu_indices, (std::vector<int>{0, 1}));
  const SlurmJob* j2 = find_job(jobs, "2");
  ASSERT_NE(j2, nullptr);
  ASSERT_EQ(j2->nodes.size(), 2u);
  EXPECT_EQ(j2->nodes[1].node, "gpu03");
  EXPECT_EQ(j2->nodes[1].gpu_indices, (std::vector<int>{0, 1, 2}));
  const SlurmJob* j3 = find_job(jobs, "3");  // CPU only
  ASSERT_NE(j3, nullptr);
  ASSERT_EQ(j3->nodes.size(), 1u);
  EXPECT_TRUE(j3->nodes[0].gpu_indices.empty());
  const SlurmJob* j4 = find_job(jobs, "4");
  ASSERT_NE(j4, nullptr);
  EXPECT_EQ(j4->state, "PENDING");
  EXPECT_FALSE(j4->holds_resources());
  EXPECT_TRUE(j4->nodes.empty());
}

void expect_captured_nodes(const std::vector<SlurmNode>& nodes) {
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].name, "gpu01");
  EXPECT_EQ(nodes[0].state, "mixed");
  EXPECT_EQ(nodes[0].gpus, 4);
  EXPECT_EQ(nodes[0].partitions, (std::vector<std::string>{"test"}));
  EXPECT_TRUE(nodes[0].usable());
  EXPECT_EQ(nodes[3].name, "gpu04");
  EXPECT_EQ(nodes[3].state, "idle");
  EXPECT_NE(std::find(nodes[3].flags.begin(), nodes[3].flags.end(), "DRAIN"), nodes[3].flags.end());
  EXPECT_FALSE(nodes[3].usable());
}

TEST(SlurmParsers, SqueueJsonGivesJobsWithGpuIndices) {
  auto jobs = parse_squeue_json(data("squeue.json"));
  ASSERT_TRUE(jobs) << jobs.error().to_string();
  expect_captured_jobs(*jobs);
}

TEST(SlurmParsers, ScontrolJobsAgreeWithSqueueJson) {
  auto jobs = parse_scontrol_jobs(data("scontrol_show_job.txt"));
  ASSERT_TRUE(jobs) << jobs.error().to_string();
  expect_captured_jobs(*jobs);
}

TEST(SlurmParsers, SinfoJsonGivesNodesStatesAndGpus) {
  auto nodes = parse_sinfo_json(data("sinfo.json"));
  ASSERT_TRUE(nodes) << nodes.error().to_string();
  expect_captured_nodes(*nodes);
}

TEST(SlurmParsers, ScontrolNodesAgreeWithSinfoJson) {
  auto nodes = parse_scontrol_nodes(data("scontrol_show_node.txt"));
  ASSERT_TRUE(nodes) << nodes.error().to_string();
  expect_captured_nodes(*nodes);
}

TEST(SlurmParsers, GresStrings) {
  EXPECT_EQ(*parse_gres_gpu_indices("gpu:h100:2(IDX:0-1,4)"), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(*parse_gres_gpu_indices("gpu:a:1(IDX:3),gpu:b:1(IDX:0),nic:1"), (std::vector<int>{0, 3}));
  EXPECT_EQ(*parse_gres_gpu_indices(""), std::vector<int>{});
  EXPECT_EQ(*parse_gres_gpu_indices("gpu:0(IDX:N/A)"), std::vector<int>{});
  EXPECT_FALSE(parse_gres_gpu_indices("gpu:2"));  // a count without indices cannot be mapped
  EXPECT_FALSE(parse_gres_gpu_indices("gpu:2(IDX:1-x)"));
  EXPECT_FALSE(parse_gres_gpu_indices("gpu:2(IDX:0-1"));
  EXPECT_EQ(*parse_gres_gpu_count("gpu:h100:8(S:0-1),nic:2"), 8);
  EXPECT_EQ(*parse_gres_gpu_count("(null)"), 0);
  EXPECT_FALSE(parse_gres_gpu_count("gpu:many"));
}

// Every prefix of a JSON capture is an error with a location, never a crash or a partial state.
TEST(SlurmParsers, TruncatedJsonIsAnErrorWithItsPosition) {
  for (const char* name : {"squeue.json", "sinfo.json"}) {
    std::string text = data(name);
    for (std::size_t cut = 0; cut + 2 < text.size(); cut += 97) {
      std::string_view prefix(text.data(), cut);
      auto r = std::string(name) == "squeue.json" ? parse_squeue_json(prefix).transform([](auto&&) { return 0; })
                                                   : parse_sinfo_json(prefix).transform([](auto&&) { return 0; });
      ASSERT_FALSE(r) << name << " cut at " << cut;
      EXPECT_EQ(r.error().code, ErrorCode::kParse);
      EXPECT_EQ(r.error().where.file, std::string(name) == "squeue.json" ? "squeue --json" : "sinfo --json");
      EXPECT_GE(r.error().where.line, 1);
    }
  }
  auto r = parse_squeue_json(data("squeue.json").substr(0, 5000));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
}

TEST(SlurmParsers, TruncatedScontrolOutputIsAnError) {
  std::string text = data("scontrol_show_job.txt");
  auto r = parse_scontrol_jobs(text.substr(0, text.size() - 40));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos);
  EXPECT_FALSE(parse_scontrol_nodes("this is not scontrol output\n"));
  auto bad = parse_scontrol_jobs("JobId=7 JobState=RUNNING Nodes=gpu01 GRES=gpu:2(IDX:0-\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.line, 1);
}

TEST(SlurmParsers, JsonOfTheWrongShapeIsAnError) {
  EXPECT_FALSE(parse_squeue_json("[]"));
  EXPECT_FALSE(parse_squeue_json(R"({"jobs": [{"job_state": "RUNNING"}]})"));
  EXPECT_FALSE(parse_sinfo_json(R"({"nodes": [{"name": "gpu01"}]})"));
  auto r = parse_squeue_json(
      R"json({"jobs": [{"job_id": 5, "job_state": "RUNNING", "nodes": "gpu01", "gres_detail": ["gpu:1(IDX:0)", "gpu:1(IDX:1)"],
          "job_resources": {"allocated_nodes": [{"nodename": "gpu01"}]}}]})json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("gres_detail"), std::string::npos);
}

// The engine a live mapping gives, and its free GPUs on a node.
struct Held {
  Engine engine;
  int free(const char* node) const {
    const Cluster& c = engine.cluster();
    return engine.read([&](const AllocationState& s) { return s.free_gpus(*c.find_node(node)); });
  }
  bool available(const char* node) const {
    return nlohmann::json::parse(*engine.node_json(node))["available"].get<bool>();
  }
};

TEST(SlurmMapping, BusyGpusUnusableAndOneSidedNodes) {
  Cluster c = test_cluster();
  SlurmLiveState live{*parse_sinfo_json(data("sinfo.json")), *parse_squeue_json(data("squeue.json"))};
  auto m = apply_live_state(c, live);
  ASSERT_TRUE(m) << m.error().to_string();
  auto node = [&](const char* n) { return *c.find_node(n); };
  // Slurm's jobs are jobs the engine holds on their GPUs; unusable nodes are marks by "slurm".
  ASSERT_EQ(m->slurm_jobs.size(), 2u);
  EXPECT_EQ(m->slurm_jobs[0].id, "slurm-job:1");
  EXPECT_EQ(m->slurm_jobs[0].gpus, (std::vector<GpuId>{c.node_gpu(node("gpu01"), 0), c.node_gpu(node("gpu01"), 1)}));
  ASSERT_EQ(m->node_marks.size(), 3u);
  EXPECT_EQ(m->node_marks[0].node, "gpu04");
  EXPECT_EQ(m->node_marks[0].source, "slurm");
  EXPECT_FALSE(m->node_marks[0].available);
  EXPECT_EQ(m->node_marks[0].reason, "Slurm state idle+DRAIN");
  EXPECT_EQ(m->node_marks[1].reason, "unknown to Slurm");
  EXPECT_TRUE(m->unconfigured_gpus.empty());
  EXPECT_EQ(m->unusable_nodes, (std::vector<std::string>{"gpu04"}));
  EXPECT_EQ(m->spec_only_nodes, (std::vector<std::string>{"gpu05", "gpu06"}));
  EXPECT_TRUE(m->slurm_only_nodes.empty());
  EXPECT_EQ(m->jobs_accounted, (std::vector<std::string>{"1", "2"}));
  // Given to an engine: the jobs hold their GPUs, the nodes are closed to placements.
  Held held{Engine(c, AllocationState(c))};
  ASSERT_TRUE(hold_live_mapping(held.engine, *m));
  EXPECT_EQ(held.free("gpu01"), 2);
  EXPECT_EQ(held.free("gpu03"), 1);
  EXPECT_EQ(held.free("gpu04"), 4);  // drained: free, but no placement may use it
  EXPECT_FALSE(held.available("gpu04"));
  EXPECT_FALSE(held.available("gpu05"));
  EXPECT_TRUE(held.available("gpu01"));
  EXPECT_EQ(held.engine.read([&](const AllocationState& s) { return std::string(s.gpu_owner(c.node_gpu(node("gpu02"), 0))); }),
            "slurm-job:2");
  EXPECT_TRUE(held.engine.read([](const AllocationState& s) { return s.check_invariants().has_value(); }));
  // Holding the same mapping twice is refused (the jobs are held already).
  EXPECT_FALSE(hold_live_mapping(held.engine, *m));
}

TEST(SlurmMapping, PartitionFilterAndGpuCountMismatch) {
  Cluster c = test_cluster();
  SlurmLiveState live{*parse_sinfo_json(data("sinfo.json")), {}};
  live.nodes[1].partitions = {"other"};
  live.nodes[2].gpus = 2;
  auto m = apply_live_state(c, live, {"test"});
  ASSERT_TRUE(m) << m.error().to_string();
  ASSERT_FALSE(m->node_marks.empty());
  EXPECT_EQ(m->node_marks[0].node, "gpu02");
  EXPECT_EQ(m->node_marks[0].reason, "not in partition test");
  NodeId gpu03 = *c.find_node("gpu03");
  EXPECT_EQ(m->unconfigured_gpus, (std::vector<GpuId>{c.node_gpu(gpu03, 2), c.node_gpu(gpu03, 3)}));
  ASSERT_EQ(m->gpu_count_mismatches.size(), 1u);
  EXPECT_EQ(m->gpu_count_mismatches[0], "gpu03: spec 4 GPUs, Slurm 2");
  EXPECT_FALSE(apply_live_state(c, live, {"nosuch"}));
}

TEST(SlurmMapping, UnknownNodesAreReportedOrRefused) {
  Cluster c = test_cluster();
  std::string sinfo = data("sinfo.json");
  std::string squeue = data("squeue.json");
  // A Slurm node the spec does not know is listed, not dropped.
  std::string renamed_sinfo = sinfo;
  renamed_sinfo.replace(renamed_sinfo.find("\"gpu04\""), 7, "\"ghost9\"");
  SlurmLiveState live{*parse_sinfo_json(renamed_sinfo), *parse_squeue_json(squeue)};
  auto m = apply_live_state(c, live);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->slurm_only_nodes, (std::vector<std::string>{"ghost9"}));
  EXPECT_NE(std::find(m->spec_only_nodes.begin(), m->spec_only_nodes.end(), "gpu04"), m->spec_only_nodes.end());
  // A job holding GPUs on a node the spec does not know makes the state unknowable: error.
  std::string renamed_jobs = squeue;
  for (std::size_t at; (at = renamed_jobs.find("gpu03")) != std::string::npos;) renamed_jobs.replace(at, 5, "ghost9");
  renamed_jobs.replace(renamed_jobs.find("gpu[02-03]"), 10, "gpu02,ghost9");
  live.jobs = *parse_squeue_json(renamed_jobs);
  auto bad = apply_live_state(c, live);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kValidation);
  EXPECT_NE(bad.error().message.find("'ghost9'"), std::string::npos) << bad.error().message;
  // A GPU index beyond the spec's node.
  live.jobs = *parse_squeue_json(squeue);
  live.jobs[0].nodes[0].gpu_indices = {7};
  EXPECT_FALSE(apply_live_state(c, live));
}

}  // namespace
}  // namespace toposched::slurm
