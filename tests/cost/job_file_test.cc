// Job and placement files: YAML and JSON, positions in errors, and no crash or hang on
// truncated or corrupted copies of the fixtures.
#include <fstream>
#include <sstream>
#include <utility>

#include <gtest/gtest.h>

#include "cost/job_file.h"
#include "cost/selection.h"
#include "topology/presets.h"

namespace toposched {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(JobFile, ReadsTheExampleJob) {
  auto job = read_job_file(TOPOSCHED_TEST_DATA "/cost_job.yaml");
  ASSERT_TRUE(job.has_value()) << job.error().to_string();
  EXPECT_EQ(job->name, "llama-70b-tp8-dp4");
  EXPECT_EQ(job->plan.tp, 8);
  EXPECT_EQ(job->plan.dp, 4);
  EXPECT_EQ(job->plan.pp, 1);
  EXPECT_EQ(job->plan.order, "tp-cp-ep-dp-pp");
  EXPECT_EQ(job->model.layers, 80);
  EXPECT_EQ(job->model.micro_batches, 16);  // overrides the class's 8
  EXPECT_DOUBLE_EQ(job->model.compute_us_per_step, 2.5e6);
}

TEST(JobFile, JsonWorksToo) {
  auto job = parse_job_text(R"({"plan": {"tp": 2, "pp": 2, "order": "tp-cp-ep-dp-pp"}, "workload": "llm-moe",
                                "model": {"experts": 16, "top_k": 2, "training": false}})",
                            "job.json");
  ASSERT_TRUE(job.has_value()) << job.error().to_string();
  EXPECT_EQ(job->plan.gpus(), 4);
  EXPECT_EQ(job->model.experts, 16);
  EXPECT_FALSE(job->model.training);
  EXPECT_EQ(job->name, "llm-moe");
}

TEST(JobFile, ReplicaBatchLeavesTheMicroBatchSizeToTheDefaultRule) {
  auto open = parse_job_text("plan: {tp: 8, dp: 48}\nmodel:\n  replica_batch: 4\n", "job.yaml");
  ASSERT_TRUE(open.has_value()) << open.error().to_string();
  EXPECT_TRUE(open->model.default_micro_batch);
  EXPECT_EQ(open->model.micro_batch * open->model.micro_batches, 4);
  auto fixed = parse_job_text("plan: {tp: 8}\nmodel:\n  micro_batch: 2\n  replica_batch: 8\n", "job.yaml");
  ASSERT_TRUE(fixed.has_value()) << fixed.error().to_string();
  EXPECT_FALSE(fixed->model.default_micro_batch);
  EXPECT_EQ(fixed->model.micro_batch, 2);
  EXPECT_EQ(fixed->model.micro_batches, 4);
  // Each error points at the key to change: replica_batch not a multiple; micro_batches as well.
  for (auto [bad, line] : {std::pair{"plan: {tp: 8}\nmodel:\n  micro_batch: 3\n  replica_batch: 8\n", 4},
                           std::pair{"plan: {tp: 8}\nmodel:\n  micro_batches: 2\n  replica_batch: 8\n", 3}}) {
    auto job = parse_job_text(bad, "job.yaml");
    ASSERT_FALSE(job.has_value()) << bad;
    EXPECT_EQ(job.error().where.line, line) << job.error().to_string();
  }
}


// DP reduces gradients as the compute model writes them: fp32 main gradients with bf16, FP8
// and fp32, fp16 gradients with fp16 (Megatron-LM's defaults); a given size or a non-Megatron
// class (AMP's fp32 weights) keeps its own.
TEST(JobFile, GradientBytesFollowThePrecision) {
  const auto grad_bytes = [](const char* text) {
    auto job = parse_job_text(text, "job.yaml");
    EXPECT_TRUE(job.has_value()) << job.error().to_string();
    return job ? job->model.grad_bytes_per_element : -1;
  };
  EXPECT_EQ(grad_bytes("plan: {tp: 8}\nmodel: {precision: fp16}\n"), 2);
  EXPECT_EQ(grad_bytes("plan: {tp: 8}\nmodel: {precision: bf16}\n"), 4);
  EXPECT_EQ(grad_bytes("plan: {tp: 8}\nmodel: {precision: fp8}\n"), 4);
  EXPECT_EQ(grad_bytes("plan: {tp: 8}\nmodel: {precision: fp32}\n"), 4);
  EXPECT_EQ(grad_bytes("plan: {tp: 8}\nmodel: {}\n"), 4);  // the class's bf16
  EXPECT_EQ(grad_bytes("plan: {tp: 8}\nmodel: {precision: fp16, grad_bytes_per_element: 4}\n"), 4);
  EXPECT_EQ(grad_bytes("plan: {tp: 8}\nmodel: {grad_bytes_per_element: 2, precision: bf16}\n"), 2);
  EXPECT_EQ(grad_bytes("plan: {dp: 8}\nworkload: dp-vision\nmodel: {precision: fp16}\n"), 4);
}
TEST(JobFile, ErrorsPointAtTheProblem) {
  struct Case {
    const char* text;
    int line;
    int column;
    const char* says;
  };
  for (const Case& k : {Case{"plan:\n  tp: 8\n  tpp: 2\n", 3, 3, "unknown key 'tpp'"},
                        Case{"plan:\n  tp: eight\n", 2, 7, "expected 'tp' to be a number"},
                        Case{"plan: {tp: 0}\n", 1, 12, "expected 'tp' in 1..1000000"},
                        Case{"plan: {tp: 2}\nworkload: llm-huge\n", 2, 11, "unknown workload class"},
                        Case{"plan: {tp: 2}\nmodel:\n  overlap: 1.5\n", 3, 12, "overlap"},
                        Case{"plan: {tp: 2, order: tp-dp}\n", 1, 7, "rank order"},
                        Case{"name: x\n", 1, 1, "needs a 'plan'"}, Case{"plan: [1, 2\n", 2, 1, "invalid YAML"}}) {
    auto job = parse_job_text(k.text, "job.yaml");
    ASSERT_FALSE(job.has_value()) << k.text;
    const Error& e = job.error();
    EXPECT_EQ(e.where.file, "job.yaml");
    EXPECT_EQ(e.where.line, k.line) << k.text << " -> " << e.to_string();
    EXPECT_EQ(e.where.column, k.column) << k.text << " -> " << e.to_string();
    EXPECT_NE(e.message.find(k.says), std::string::npos) << e.to_string();
  }
}

class PlacementFile : public ::testing::Test {
 protected:
  Cluster c = *build_preset("dgx-h100?nodes=4");
};

TEST_F(PlacementFile, ReadsTheExamplePlacement) {
  auto gpus = read_placement_file(c, TOPOSCHED_TEST_DATA "/cost_placement.yaml");
  ASSERT_TRUE(gpus.has_value()) << gpus.error().to_string();
  ASSERT_EQ(gpus->size(), 32u);
  EXPECT_EQ(gpu_label(c, (*gpus)[0]), "dgx-h100-001:0");
  EXPECT_EQ(gpu_label(c, (*gpus)[31]), "dgx-h100-004:7");
}

TEST_F(PlacementFile, AcceptsListsAndPlaceOutput) {
  auto list = parse_placement_text(c, "gpus: [dgx-h100-002:1, dgx-h100-001:0]\n", "p.yaml");
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(gpu_label(c, (*list)[0]), "dgx-h100-002:1");
  // `toposched place --format json` output, ranks out of order.
  auto placed = parse_placement_text(c, R"({"job": "j1", "policy": "x", "gpus": [
      {"node": "dgx-h100-003", "gpu": 2, "rank": 1}, {"node": "dgx-h100-001", "gpu": 5, "rank": 0}],
      "nodes": "dgx-h100-[001,003]", "predicted_comm_us": 1.0})",
                                     "p.json");
  ASSERT_TRUE(placed.has_value()) << placed.error().to_string();
  EXPECT_EQ(gpu_label(c, (*placed)[0]), "dgx-h100-001:5");
  EXPECT_EQ(gpu_label(c, (*placed)[1]), "dgx-h100-003:2");
}

TEST_F(PlacementFile, ErrorsPointAtTheProblem) {
  struct Case {
    const char* text;
    int line;
    const char* says;
  };
  for (const Case& k :
       {Case{"gpus: [dgx-h100-001:0, dgx-h100-001:0]\n", 1, "placed twice"},
        Case{"gpus:\n  - dgx-h100-001:0\n  - dgx-h100-009:0\n", 3, "no node named"},
        Case{"gpus:\n  - {node: dgx-h100-001, gpu: 9}\n", 2, "'gpu' in 0..7"},
        Case{"gpus:\n  - {node: dgx-h100-001, gpu: 1, rank: 1}\n  - {node: dgx-h100-001, gpu: 2, rank: 1}\n", 3,
             "rank 1 is given twice"},
        Case{"gpu: dgx-h100-001\n", 1, "'gpus'"}, Case{"gpus: []\n", 1, "non-empty"}}) {
    auto r = parse_placement_text(c, k.text, "p.yaml");
    ASSERT_FALSE(r.has_value()) << k.text;
    EXPECT_EQ(r.error().where.line, k.line) << r.error().to_string();
    EXPECT_NE(r.error().message.find(k.says), std::string::npos) << r.error().to_string();
  }
}

TEST(JobFileFuzz, TruncatedAndCorruptedCopiesNeverCrash) {
  Cluster c = *build_preset("dgx-h100?nodes=4");
  const std::string job = slurp(TOPOSCHED_TEST_DATA "/cost_job.yaml");
  const std::string placement = slurp(TOPOSCHED_TEST_DATA "/cost_placement.yaml");
  ASSERT_FALSE(job.empty());
  ASSERT_FALSE(placement.empty());
  const char junk[] = {'\0', '{', ']', ':', '-', '\n', '"', '[', '&', '*', 'x', '9'};
  for (const std::string* text : {&job, &placement}) {
    for (std::size_t n = 0; n <= text->size(); ++n) {
      std::string cut = text->substr(0, n);
      (void)parse_job_text(cut, "cut");
      (void)parse_placement_text(c, cut, "cut");
    }
    for (std::size_t i = 0; i < text->size(); i += 3)
      for (char j : junk) {
        std::string bad = *text;
        bad[i] = j;
        (void)parse_job_text(bad, "bad");
        (void)parse_placement_text(c, bad, "bad");
      }
  }
}

}  // namespace
}  // namespace toposched
