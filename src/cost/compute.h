// Compute side of a training or inference step: published peak throughput and memory
// bandwidth per GPU product, and the time of one step of a workload class on given GPUs
// with a given model parallelism. The communication side is job_comm.h; the simulator adds
// the two. Constant data and pure functions; thread-safe.
#pragma once

#include <string_view>

#include "cost/job_comm.h"

namespace toposched {

// Dense BF16/FP16 tensor throughput (no sparsity) and HBM bandwidth of one GPU, from the
// vendor's datasheets (docs/cost-model.md "Compute"). Matched by a case-insensitive
// substring of the model name; unknown models get A100's figures.
struct GpuCompute {
  double peak_flops = 0;  // FLOP/s
  double hbm_Bps = 0;     // bytes/s
};
GpuCompute gpu_compute(std::string_view gpu_model);

// Fraction of peak a well-tuned large training job sustains (model FLOPs utilisation);
// 40% is the middle of the published 35-55% for Megatron-style LLM training.
inline constexpr double kTrainingMfu = 0.4;

// Time (µs) of one step of `model` (workload class `workload_class`) per GPU with tp x pp
// model parallelism on `gpu_model` GPUs: dense training 6 x active parameters x tokens /
// (tp x pp) at kTrainingMfu of peak; dp-vision ResNet-50 (4.1 GFLOPs forward per image,
// x3 for the backward) with 256 images per GPU; inference one memory-bound decode step
// (the weights read once per token from HBM). 0 for a class it does not know.
double compute_us_per_step(const WorkloadModel& model, std::string_view workload_class, int tp, int pp,
                           std::string_view gpu_model);

}  // namespace toposched
