// Compute side of a training or inference step: the time one GPU spends computing per step
// for a workload on given hardware with a given parallel plan, from first principles (the
// model's FLOPs and memory traffic) and the GPU's datasheet (topology/hardware.h's
// GpuDatasheet, the one hardware table). The communication side is job_comm.h; the two meet in
// estimate_job_comm. Constant data and pure functions; thread-safe.
//
// Transformer training (family kTransformer), per micro-batch on one GPU of the slowest
// pipeline stage (the last: it also holds the logits), t = micro_batch x sequence / cp tokens:
//   GEMMs of each layer split by tp (QKV with GQA, attention output, MLP up (x2 gated) and
//     down; MoE layers run top_k experts' MLPs per token), forward 2mkn FLOPs, backward twice
//     that; each GEMM's time is its roofline (FLOPs at peak x gemm_efficiency x the wave
//     quantization of its 128x128 output tiles over the SMs, or its inputs' bytes at HBM
//     speed, whichever is longer), plus its epilogue: the output written (read and written
//     for the weight gradient, accumulated into the fp32 main gradient with bf16 and FP8)
//     at HBM speed after the K loop;
//   attention core: 4 t s h / tp FLOPs forward, causal (half the scores computed), backward
//     2.5x (FlashAttention-2's count), at kAttentionEfficiency of the BF16 peak;
//   memory-bound work (norms, activations, dropout, residuals; the scores' softmax without
//     fused attention; FP8's casts of every GEMM input and output gradient): each kernel's
//     reads and writes, forward and backward, at HBM speed (compute.cc,
//     elementwise_bytes_per_token);
//   the logits GEMM (h x vocabulary / tp) and Megatron's fp32 cross-entropy passes over the
//     logits on the last stage;
//   recomputation: full adds every layer's forward again, selective the attention core's
//     (nothing with fused attention, whose backward recomputes it anyway);
//   the optimizer (Adam, mixed precision): 32 bytes per parameter of this GPU's shard
//     (split by dp: the distributed optimizer) read and written once per step.
// Precision: FP8 runs the GEMMs at the FP8 peak (where the GPU has one); attention, memory
// work and the logits stay BF16 (Transformer Engine's recipe).
// Vision (kVision): 3 x forward FLOPs per image (forward + backward) x images at
// vision_conv_efficiency() of the peak, plus the memory-bound work between the convolutions
// (activation_bytes_per_sample) at HBM speed. Recommendation (kRecommendation): the same for the MLPs
// plus the embedding bytes per sample read and their gradients written, at HBM speed.
// Inference: one decode step, memory-bound (the weights read once from HBM per step).
#pragma once

#include <string_view>

#include "cost/job_comm.h"
#include "topology/hardware.h"

namespace toposched {

// Peak (dense) throughput and HBM bandwidth of one GPU as the compute model uses them.
struct GpuCompute {
  double peak_flops = 0;  // FLOP/s, dense BF16
  double hbm_Bps = 0;     // bytes/s
};
GpuCompute gpu_compute(std::string_view gpu_model);

// Fraction of the BF16 peak that fused attention kernels sustain, forward and backward
// together: FlashAttention-2 (Dao, 2023) reaches 50-73% of the A100's peak forward and
// less backward; FlashAttention-3 (Shah et al., 2024) reports 35% for FA2 and up to 75% for
// FA3 forward on H100. Half the peak is the middle of that range.
inline constexpr double kAttentionEfficiency = 0.5;
// FP8 GEMMs reach a smaller share of their (twice as high) peak than BF16 ones: the MAMF
// tables (topology/hardware.cc) give 0.709 / 0.803 on H100, 0.734 / 0.838 on H200, 0.763 /
// 0.776 on B200, 0.723 / 0.729 on GB200; 0.9 is their mean ratio.
inline constexpr double kFp8GemmShare = 0.9;
// ResNet-50 v1.5 trains at 1,156 images/s with mixed precision on one V100 32GB (NVIDIA
// DeepLearningExamples, PyTorch ConvNets README, DGX-1 32GB table): the one measurement the
// vision rule is calibrated on.
inline constexpr double kVisionCalibrationImagesPerS = 1156;
// HBM bytes per image of ResNet-50 v1.5's memory-bound kernels in training (fp16, AMP): the
// batch norms, ReLUs, residual adds and the max pool between the convolutions, each reading
// its inputs and writing its outputs once, forward and backward, as for the transformer's
// memory-bound work. Every convolution's output (He et al. 2016, Table 1; v1.5 strides the
// 3x3 convolution of a downsampling block) passes a batch norm (forward read, write;
// backward read x and dy, write dx: 5 elements), then a ReLU (read, write; backward read dy
// and y, write dx: 5) except the last of each block and the projection shortcut; each
// block's output is the residual add (read 2, write 1) and a ReLU, and the gradient of a
// block's input sums its two branches (read 2, write 1): 11 elements. About 278 MB.
double resnet50_elementwise_bytes_per_image();
// Share of the tensor peak the convolutions sustain: the V100 calibration's step less the
// memory-bound work at the V100's HBM speed, 3 x 4.1 GFLOP per image over the rest at 125
// TFLOP/s (topology/hardware.h's V100 row): about 0.177.
double vision_conv_efficiency();
// ResNet-50's forward pass: 4.1 GFLOPs per 224x224 image (He et al., 2016, table 1: 3.8e9
// multiply-adds counted as the v1.5 variant's 4.1e9 FLOPs in NVIDIA's model card).
inline constexpr double kResnet50ForwardGflops = 4.1;

// One step's compute on one GPU (the slowest pipeline stage), in µs, by part. The parts sum
// to total_us; the pipeline bubble is not included (job_comm.h adds it).
struct StepCompute {
  double gemm_us = 0;       // tensor-core GEMMs (logits excluded)
  double attention_us = 0;  // attention core
  double memory_us = 0;     // memory-bound work, embeddings, the optimizer step
  double logits_us = 0;     // output layer on the last stage
  double total_us = 0;
  double per_microbatch_us = 0;  // forward + backward of one micro-batch
  // Model FLOPs of one step of the whole job (no recomputation; attention counted in
  // full, as Megatron-LM reports them), for MFU = model_flops / (step x GPUs x peak).
  double model_flops = 0;
};

// kInvalidArgument-free: a model without the shape the rule needs gives zeros (callers
// check total_us > 0). `gpu` is a row of gpu_datasheet_table().
StepCompute step_compute(const WorkloadModel& model, const ParallelPlan& plan, const GpuDatasheet& gpu);

// Memory one GPU of the first pipeline stage holds in training, in bytes (a lower bound: no
// allocator slack, CUDA context or communication buffers):
//   weights, gradients and optimizer state: Megatron-LM's bytes per parameter for mixed
//     precision (docs/source/api-guide/dist_optimizer.md): 18 for bf16 weights with fp32
//     gradients (fp16: 20, fp32: 16), of which the distributed optimizer shards the fp32
//     master weights and Adam's moments (12; fp16 16, fp32 8) over dp;
//   activations kept for the backward, per layer and token (Korthikanti et al., "Reducing
//     Activation Recomputation in Large Transformer Models", 2022, §4, Table 2: 34 h bytes
//     with tensor and sequence parallelism split by tp, the attention scores (5 heads s)
//     only without fused attention or selective recomputation; 10 h of it replicated on
//     every TP rank without sequence parallelism; 2 h, the layer's input, with full
//     recomputation), generalised to GQA and gated or MoE MLPs; the first stage of a 1F1B
//     pipeline holds min(pp, micro_batches) micro-batches of its layers in flight, x (1 +
//     (pp - 1) / (pp x V)) when interleaved (Korthikanti et al. §4.2.3);
//   without a pipeline the same GPU also keeps the fp32 logits for the cross-entropy's
//     backward and their bf16 input (6 B per logit of its vocabulary shard).
double training_memory_bytes(const WorkloadModel& model, const ParallelPlan& plan);

// The micro-batch size a user would run when the job gives the batch per replica but no
// micro-batch size (WorkloadModel::default_micro_batch; docs/cost-model.md, "Default
// micro-batch size"): of the sizes b that divide the replica's batch B (with an interleaved
// pipeline, B / b a multiple of pp, as Megatron-LM's interleaved schedule requires) and whose
// training_memory_bytes fit the GPU's HBM, the one with the least compute plus pipeline
// bubble, (1 + (pp - 1) / (V x B / b)) x step_compute: Narayanan et al., "Efficient
// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC21), §3.3, choose
// the micro-batch size by this product. Without a pipeline it is the largest size that fits.
// Returns `model` with micro_batch and micro_batches set (unchanged when
// default_micro_batch is false or the model is not a shaped transformer).
WorkloadModel with_default_micro_batch(const WorkloadModel& model, const ParallelPlan& plan, const GpuDatasheet& gpu);

// Time (µs) of one step of `model` per GPU with tp x pp model parallelism on `gpu_model`
// GPUs (step_compute's total with cp = ep = 1). `workload_class` is kept for callers that
// pass a class name; the model's own family decides the rule.
double compute_us_per_step(const WorkloadModel& model, std::string_view workload_class, int tp, int pp,
                           std::string_view gpu_model);

}  // namespace toposched
