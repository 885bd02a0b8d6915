// Published scaling curves that `toposched scale`'s model (sim/scale.h: placement, cost
// model, compute from FLOPs, pipeline bubble) must reproduce within the tolerance written
// beside each (docs/cost-model.md, "Scaling against published runs"). Each case rebuilds
// the published configuration: cluster preset, model shape, parallel plan, batch per
// replica at each size. The figure compared is per-GPU throughput at the larger size over
// that at the smaller one (the published MFU or TFLOP/s per GPU ratio), which needs no
// absolute calibration of compute speed. Run with --gtest_filter=PublishedScaling.* to
// print the table of docs/cost-model.md.
#include <gtest/gtest.h>

#include <cstdio>

#include "cost/job_comm.h"
#include "cost/job_file.h"
#include "placement/allocation_state.h"
#include "sim/scale.h"
#include "topology/presets.h"

namespace toposched::sim {
namespace {

struct Size {
  int gpus;
  int micro_batches;  // per data-parallel replica and step
};

struct PublishedCase {
  const char* id;
  const char* source;
  const char* preset;
  const char* policy;
  JobSpec job;  // plan without dp; model without micro_batches
  int virtual_stages;
  Size small, large;
  double published_ratio;  // per-GPU throughput, large / small
  double tolerance;        // absolute, on the ratio
};

JobSpec llm(double params, int hidden, int layers, int sequence, int tp, int pp, double overlap) {
  JobSpec s;
  auto base = workload_class("llm-dense");
  EXPECT_TRUE(base);
  s.model = *base;
  s.model.name = "llm-dense";
  s.model.parameters = params;
  s.model.hidden = hidden;
  s.model.layers = layers;
  s.model.sequence = sequence;
  s.model.micro_batch = 1;
  s.model.overlap = overlap;
  s.plan.tp = tp;
  s.plan.pp = pp;
  s.name = "published";
  return s;
}

std::vector<PublishedCase> cases() {
  return {
      // NVIDIA Megatron-LM README (Megatron-Core r0.8.0), "Strong Scaling Results": GPT-3
      // 177B (96 layers, hidden 12288, sequence 4096) from 96 to 4,608 H100 GPUs at a fixed
      // batch of 1,152 sequences; MFU 47% -> 42%. TP 8 x PP 6 as the README's model table
      // gives for 177B. DGX H100 (EOS) on a non-blocking NDR fat tree.
      {"megatron-gpt3-177b-strong", "Megatron-LM README, strong scaling (MFU 47% -> 42%)", "dgx-h100?nodes=576", "first-fit",
       llm(177e9, 12288, 96, 4096, 8, 6, 0.3), 4, {96, 1152 / 2}, {4608, 1152 / 96}, 42.0 / 47.0, 0.05},
      // Meta, "The Llama 3 Herd of Models" (2024), Table 4: Llama 3 405B (126 layers, hidden
      // 16384, sequence 8192), TP 8 x CP 1 x PP 16, 8,192 GPUs (DP 64, batch 32 per DP
      // replica) -> 16,384 GPUs (DP 128, batch 16): 430 -> 400 TFLOP/s per GPU. Meta's 24K
      // RoCE cluster (preset llama3-24k).
      {"llama3-405b-8k-16k", "Llama 3 paper, Table 4 (430 -> 400 TFLOP/s per GPU)", "llama3-24k", "topo",
       llm(405e9, 16384, 126, 8192, 8, 16, 0.3), 4, {8192, 32}, {16384, 16}, 400.0 / 430.0, 0.05},
  };
}

double per_gpu_throughput(const Cluster& c, const PublishedCase& pc, Size size) {
  JobSpec spec = pc.job;
  spec.plan.dp = size.gpus / (spec.plan.tp * spec.plan.pp);
  spec.model.micro_batches = size.micro_batches;
  AllocationState empty(c);
  auto pt = predict_step(c, empty, pc.policy, spec, pc.virtual_stages);
  EXPECT_TRUE(pt) << pc.id << ": " << pt.error().to_string();
  if (!pt) return 0;
  EXPECT_TRUE(pt->placed) << pc.id << " at " << size.gpus << ": " << pt->why_not;
  std::printf("  %s at %d GPUs: step %.3f s (compute %.3f, exposed comm %.3f), widest level %s\n", pc.id, size.gpus, pt->step_time_s,
              pt->compute_s, pt->exposed_comm_s, pt->widest_level.c_str());
  return pt->samples_per_s / size.gpus;
}

TEST(PublishedScaling, PerGpuThroughputRatiosWithinTheirTolerance) {
  std::printf("| id | published | predicted | error | tolerance |\n|---|---|---|---|---|\n");
  for (const PublishedCase& pc : cases()) {
    auto c = build_preset(pc.preset);
    ASSERT_TRUE(c) << pc.preset;
    double small = per_gpu_throughput(*c, pc, pc.small), large = per_gpu_throughput(*c, pc, pc.large);
    ASSERT_GT(small, 0);
    double predicted = large / small;
    std::printf("| %s | %.3f | %.3f | %+.3f | %.2f |\n", pc.id, pc.published_ratio, predicted, predicted - pc.published_ratio, pc.tolerance);
    EXPECT_NEAR(predicted, pc.published_ratio, pc.tolerance) << pc.id << " (" << pc.source << ")";
  }
}

}  // namespace
}  // namespace toposched::sim
