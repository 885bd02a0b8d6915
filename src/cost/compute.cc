#include "cost/compute.h"

#include <algorithm>
#include <cmath>

namespace toposched {

namespace {

// Output tile of a tensor-core GEMM kernel; one tile per SM at a time (NVIDIA, "Matrix
// Multiplication Background User's Guide": tile and wave quantization).
constexpr double kTile = 128;
// Adam with mixed precision: fp32 master weight, gradient, two moments read (16 B) and the
// weight, moments and a bf16 copy written (14 B), rounded to 32 B per parameter.
constexpr double kOptimizerBytesPerParameter = 32;
// Megatron-LM's vocab-parallel cross-entropy (megatron/core/tensor_parallel/cross_entropy.py,
// the default unfused path) touches every logit of the GPU's vocabulary shard in fp32, one
// kernel per step: forward the cast of the bf16 logits (read 2 B, write 4), the max (read 4),
// the in-place subtraction of the max (4 + 4), exp (4 + 4), the sum (4) and the division
// into the softmax kept for backward (4 + 4): 38 B; backward the in-place scaling of the
// softmax by the loss gradient (4 + 4) and the cast back to bf16 (4 + 2): 14 B.
constexpr double kCrossEntropyBytesPerLogit = 38 + 14;
// Transformer Engine's FP8 recipe casts each FP8 GEMM's bf16 activation input forward and
// bf16 output gradient backward to FP8 with the transpose the other GEMM of the pair needs
// (its fused cast-transpose kernel: read 2 B, write 1 B twice, per element).
constexpr double kFp8CastBytesPerElement = 2 + 1 + 1;
// A weight-gradient GEMM that accumulates into an fp32 main gradient reads and writes it.
constexpr double kFp32MainGradBytes = 4 + 4;

// Bytes per element of a GEMM's inputs and outputs, and of the weight gradient's output.
struct GemmBytes {
  double in = 2, out = 2, wgrad_out = 2;
};

double gemm_peak(const GpuDatasheet& g, Precision p) {
  switch (p) {
    case Precision::kFp8: return g.fp8_dense_flops > 0 ? g.fp8_dense_flops * kFp8GemmShare : g.bf16_dense_flops;
    case Precision::kFp32: return g.bf16_dense_flops / 2;  // TF32 tensor cores: half the BF16 rate
    default: return g.bf16_dense_flops;
  }
}

double element_bytes(Precision p) { return p == Precision::kFp8 ? 1 : p == Precision::kFp32 ? 4 : 2; }

// What the GEMMs read and write: inputs in the GEMM's precision; outputs in bf16 (FP8 GEMMs
// write bf16, Transformer Engine) or fp16 / fp32; the weight gradient accumulated into an
// fp32 main gradient (read and written, 8 B) with bf16 and FP8 (Megatron-LM forces fp32
// gradient accumulation for bf16, megatron/training/arguments.py, and fuses it into the
// weight-gradient GEMM, gradient_accumulation_fusion), written once in the parameters'
// precision with fp16 and fp32 (2020's fp16 path: the optimizer copies it to fp32).
GemmBytes gemm_bytes(Precision p) {
  GemmBytes b;
  b.in = element_bytes(p);
  b.out = p == Precision::kFp32 ? 4 : 2;
  b.wgrad_out = p == Precision::kBf16 || p == Precision::kFp8 ? kFp32MainGradBytes : b.out;
  return b;
}

// One GEMM (m x k) x (k x n), in seconds. The K loop runs at the longer of its FLOPs at the
// achievable rate (wave-quantized over the SMs) and its operands' bytes at HBM speed; the
// epilogue then writes the m x n output (and reads it first when it accumulates), after the
// K loop of its tile: CUTLASS's Ampere kernels and Hopper's "cooperative" kernels do not
// overlap a tile's epilogue with its mainloop (CUTLASS media/docs/efficient_gemm.md; Wright
// and Hoque, "Deep Dive on CUTLASS Ping-Pong GEMM Kernel", PyTorch blog 2024: only ping-pong
// does), and the SMs' tiles run in lock-step waves, so the output traffic adds to the
// compute rather than hiding under it.
double gemm_s(double m, double k, double n, double peak, double in_bytes, double out_bytes, const GpuDatasheet& g) {
  if (m <= 0 || k <= 0 || n <= 0) return 0;
  const double tiles = std::ceil(m / kTile) * std::ceil(n / kTile);
  const double sms = std::max(g.sm_count, 1);
  const double wave_efficiency = tiles / (std::ceil(tiles / sms) * sms);
  const double compute = 2 * m * k * n / (peak * g.gemm_efficiency * wave_efficiency);
  const double operands = in_bytes * (m * k + k * n) / g.hbm_Bps;
  return std::max(compute, operands) + out_bytes * m * n / g.hbm_Bps;
}

// A linear layer's forward and backward (input gradient and weight gradient) in seconds.
struct LinearTimes {
  double forward = 0, backward = 0;
};
LinearTimes linear_s(double m, double k, double n, double peak, const GemmBytes& b, const GpuDatasheet& g,
                     double count = 1) {
  return {count * gemm_s(m, k, n, peak, b.in, b.out, g),
          count * (gemm_s(m, n, k, peak, b.in, b.out, g) + gemm_s(k, m, n, peak, b.in, b.wgrad_out, g))};
}

struct Shape {
  double h, kv_dim, ffn, mlp_mats, heads, vocab;
};

Shape shape_of(const WorkloadModel& m) {
  Shape s;
  s.h = m.hidden;
  s.heads = m.heads > 0 ? m.heads : std::max(1.0, s.h / 128);
  const double kv = m.kv_heads > 0 ? m.kv_heads : s.heads;
  s.kv_dim = s.h * kv / s.heads;
  s.ffn = m.ffn_hidden > 0 ? m.ffn_hidden : 4 * s.h;
  s.mlp_mats = m.gated_mlp ? 3 : 2;
  s.vocab = m.vocabulary;
  return s;
}

int moe_layers_of(const WorkloadModel& m, int layers) {
  if (m.experts <= 0) return 0;
  const int every = std::max(1, m.moe_layer_interval);
  return (layers + every - 1) / every;
}

// Model FLOPs of one step (Megatron-LM's count, generalized to GQA, gated MLPs and MoE).
double transformer_model_flops(const WorkloadModel& m, const ParallelPlan& plan) {
  const Shape s = shape_of(m);
  const double moe = moe_layers_of(m, m.layers);
  const double dense = m.layers - moe;
  const double attn = 2 * (s.h * (s.h + 2 * s.kv_dim) + s.h * s.h) + 4.0 * m.sequence * s.h;
  const double mlp = 2 * s.h * s.ffn * s.mlp_mats;
  const double per_token = m.layers * attn + dense * mlp + moe * mlp * std::max(1, m.top_k) + 2 * s.h * s.vocab;
  const double tokens = static_cast<double>(m.sequence) * m.micro_batch * m.micro_batches * plan.dp * plan.ep;
  return 3 * per_token * tokens;
}

// HBM bytes per token and layer of the memory-bound kernels between the GEMMs, forward and
// backward, each reading its inputs and writing its outputs once (bf16, 2 B; Megatron-Core's
// layer with Transformer Engine's fused kernels):
//   two layer norms: forward read x, write y (2 elements); backward read x and dy, write dx
//     (3): 10 h B each, 20 h B for both;
//   two fused bias-dropout-adds: forward read the branch and the residual, write the sum
//     (3 elements) and a 1-byte mask; backward read the gradient and the mask, write the
//     branch's gradient (2 elements and 1 B): 2 x (7 + 5) h = 24 h B;
//   the MLP activation (fused bias-GeLU, or SwiGLU on the two up projections): forward read 1
//     (2) and write 1 element per ffn/tp; backward read 2 (3), write 1 (2): 10 (16) ffn/tp B,
//     once per routed copy of the token in MoE layers (`mlp_copies`, the layers' mean);
//   without fused attention, the scores' scale-mask-softmax and dropout per head over the
//     sequence (Megatron's fused softmax: read and write the scores; dropout: read, write,
//     1-byte mask; backward the same): (2 + 2 + 3 + 2) elements + 2 B = 20 heads s / tp B.
// Norms and dropout are split by tp with sequence parallelism, replicated on every TP rank
// without it (Korthikanti et al., 2022, §4.2.2).
double elementwise_bytes_per_token(const WorkloadModel& m, const Shape& s, double tp, double mlp_copies) {
  const double norm_dropout = (20 + 24) * s.h / (m.sequence_parallel ? tp : 1.0);
  const double activation = (m.gated_mlp ? 16 : 10) * s.ffn / tp * mlp_copies;
  const double scores = m.flash_attention ? 0 : 20 * s.heads * m.sequence / tp;
  return norm_dropout + activation + scores;
}

StepCompute transformer_training(const WorkloadModel& m, const ParallelPlan& plan, const GpuDatasheet& g) {
  StepCompute out;
  const Shape s = shape_of(m);
  const double tp = plan.tp, cp = plan.cp;
  const double t = static_cast<double>(m.micro_batch) * m.sequence / cp;  // tokens on this GPU
  const double peak = gemm_peak(g, m.precision);
  const GemmBytes bytes = gemm_bytes(m.precision);
  const int layers = (m.layers + plan.pp - 1) / plan.pp;  // per stage (the last stage's)
  const int moe = moe_layers_of(m, layers);
  // GEMMs of one layer.
  const LinearTimes qkv = linear_s(t, s.h, (s.h + 2 * s.kv_dim) / tp, peak, bytes, g);
  const LinearTimes proj = linear_s(t, s.h / tp, s.h, peak, bytes, g);
  const double up_n = s.ffn * (s.mlp_mats - 1) / tp;
  const LinearTimes up = linear_s(t, s.h, up_n, peak, bytes, g), down = linear_s(t, s.ffn / tp, s.h, peak, bytes, g);
  // MoE: each of the experts / ep local experts sees the routed tokens of the ep ranks.
  const double local_experts = m.experts > 0 ? std::max(1.0, static_cast<double>(m.experts) / plan.ep) : 0;
  const double expert_tokens = m.experts > 0 ? t * std::max(1, m.top_k) * plan.ep / m.experts : 0;
  const LinearTimes eup = linear_s(expert_tokens, s.h, up_n, peak, bytes, g, local_experts);
  const LinearTimes edown = linear_s(expert_tokens, s.ffn / tp, s.h, peak, bytes, g, local_experts);
  const double dense_layers = layers - moe;
  const double gemm_fwd = layers * (qkv.forward + proj.forward) + dense_layers * (up.forward + down.forward) +
                          moe * (eup.forward + edown.forward);
  const double gemm_bwd = layers * (qkv.backward + proj.backward) + dense_layers * (up.backward + down.backward) +
                          moe * (eup.backward + edown.backward);
  // Attention core: causal with fused kernels (half the score matrix), full otherwise.
  const double score_flops = 4 * t * m.sequence * s.h / tp * (m.flash_attention ? 0.5 : 1.0);
  const double attn_rate = m.flash_attention ? kAttentionEfficiency * g.bf16_dense_flops : g.gemm_efficiency * g.bf16_dense_flops;
  const double attn_fwd = layers * score_flops / attn_rate, attn_bwd = 2.5 * attn_fwd;
  // Memory-bound work per token and layer, forward and backward (elementwise_bytes_per_token),
  // plus FP8's casts of every GEMM input and output gradient.
  const double mlp_copies = (dense_layers + moe * std::max(1, m.top_k)) / std::max(layers, 1);
  double per_token_bytes = elementwise_bytes_per_token(m, s, tp, mlp_copies);
  if (m.precision == Precision::kFp8 && g.fp8_dense_flops > 0) {
    // Inputs of QKV and the attention output, then of the MLP's up and down projections; the
    // gradients of their outputs.
    const double attention = s.h + s.h / tp + (s.h + 2 * s.kv_dim) / tp + s.h;
    const double mlp = s.h + s.ffn / tp + up_n + s.h;
    per_token_bytes += kFp8CastBytesPerElement * (attention + mlp * mlp_copies);
  }
  const double mem_fwd = layers * t * per_token_bytes / 3 / g.hbm_Bps;  // a third forward, two thirds backward
  // Recomputation before the backward.
  double again = 0;
  if (m.recompute == Recompute::kFull) again = gemm_fwd + attn_fwd + mem_fwd;
  if (m.recompute == Recompute::kSelective && !m.flash_attention) again = attn_fwd;
  // Output layer (last stage): logits GEMM in BF16, fp32 cross-entropy over the logits.
  const LinearTimes logits =
      linear_s(t, s.h, s.vocab / tp, g.bf16_dense_flops, gemm_bytes(Precision::kBf16), g);
  const double loss = kCrossEntropyBytesPerLogit * t * s.vocab / tp / g.hbm_Bps;
  const double mb = m.micro_batches;
  out.gemm_us = mb * (gemm_fwd + gemm_bwd + (m.recompute == Recompute::kFull ? gemm_fwd : 0)) * 1e6;
  out.attention_us = mb * (attn_fwd + attn_bwd + (again > 0 ? attn_fwd : 0)) * 1e6;
  out.memory_us = mb * (3 * mem_fwd + (m.recompute == Recompute::kFull ? mem_fwd : 0)) * 1e6;
  out.logits_us = mb * (logits.forward + logits.backward + loss) * 1e6;
  // Optimizer step over this GPU's shard of the parameters.
  const double f = std::clamp(m.expert_parameter_fraction, 0.0, 1.0);
  const double shard = m.parameters * ((1 - f) + f / plan.ep) / (tp * plan.pp) / (m.distributed_optimizer ? std::max(plan.dp, 1) : 1);
  out.memory_us += shard * kOptimizerBytesPerParameter / g.hbm_Bps * 1e6;
  out.total_us = out.gemm_us + out.attention_us + out.memory_us + out.logits_us;
  out.per_microbatch_us = out.total_us / mb;
  out.model_flops = transformer_model_flops(m, plan);
  return out;
}

// Training without a shape (no hidden size or layers): 6 x active parameters x tokens at
// the largest GEMMs' achievable rate.
StepCompute parameter_count_training(const WorkloadModel& m, const ParallelPlan& plan, const GpuDatasheet& g) {
  StepCompute out;
  double active = m.parameters;
  if (m.experts > 0)
    active = m.parameters * (1 - m.expert_parameter_fraction) +
             m.parameters * m.expert_parameter_fraction * m.top_k / m.experts;
  const double tokens = static_cast<double>(m.sequence) * m.micro_batch * m.micro_batches;
  const double flops = 6.0 * active * tokens / (static_cast<double>(plan.tp) * plan.pp * plan.cp);
  out.gemm_us = flops / (gemm_peak(g, m.precision) * g.gemm_efficiency) * 1e6;
  out.total_us = out.gemm_us;
  out.per_microbatch_us = out.total_us / m.micro_batches;
  out.model_flops = 6.0 * active * tokens * plan.dp * plan.ep;
  return out;
}

// Elements of one 224 x 224 image's feature maps in ResNet-50 v1.5 by what follows them.
struct ResnetMaps {
  double bn_relu = 0, bn_only = 0, block_out = 0;
};
ResnetMaps resnet50_maps() {
  ResnetMaps e;
  e.bn_relu = 112.0 * 112 * 64;  // conv1
  struct Stage {
    int blocks, width, out, in_side, out_side;
  };
  for (Stage s : {Stage{3, 64, 256, 56, 56}, Stage{4, 128, 512, 56, 28}, Stage{6, 256, 1024, 28, 14},
                  Stage{3, 512, 2048, 14, 7}})
    for (int b = 0; b < s.blocks; ++b) {
      const double in = b == 0 ? s.in_side : s.out_side, out = s.out_side;
      e.bn_relu += in * in * s.width + out * out * s.width;        // 1x1 reduce, 3x3
      e.bn_only += out * out * s.out * (b == 0 ? 2 : 1);            // 1x1 expand (+ projection)
      e.block_out += out * out * s.out;
    }
  return e;
}

StepCompute per_sample_training(const WorkloadModel& m, const ParallelPlan& plan, const GpuDatasheet& g) {
  StepCompute out;
  const double samples = static_cast<double>(m.micro_batch) * m.micro_batches;
  const double gflops = m.forward_gflops_per_sample > 0 ? m.forward_gflops_per_sample
                        : m.family == ModelFamily::kVision ? kResnet50ForwardGflops
                                                           : 0;
  const double passes = m.training ? 3 : 1;
  const double flops = passes * gflops * 1e9 * samples;
  const double efficiency = m.family == ModelFamily::kVision ? vision_conv_efficiency() : g.gemm_efficiency;
  out.gemm_us = flops / (efficiency * gemm_peak(g, m.precision)) * 1e6;
  // Embedding rows read forward, their gradients written backward (and read by the update);
  // the memory-bound work between convolutions (forward only: the 4 of a batch norm and
  // ReLU's 10 element passes).
  out.memory_us = (m.training ? 3 : 1) * m.embedding_bytes_per_sample * samples / g.hbm_Bps * 1e6;
  out.memory_us += (m.training ? 1 : 0.4) * m.activation_bytes_per_sample * samples / g.hbm_Bps * 1e6;
  out.total_us = out.gemm_us + out.memory_us;
  out.per_microbatch_us = out.total_us / m.micro_batches;
  out.model_flops = flops * plan.dp * plan.ep;
  return out;
}

}  // namespace

// Both are constants of the published architecture and datasheet, computed once (thread-safe
// static initialisation): the placement engine asks for the dp-vision class per prediction.
double resnet50_elementwise_bytes_per_image() {
  static const double bytes = [] {
    const ResnetMaps e = resnet50_maps();
    // The max pool: 112 x 112 x 64 in, 56 x 56 x 64 out, read and written forward and backward.
    const double pool = 2 * (112.0 * 112 * 64 + 56.0 * 56 * 64);
    return 2 * (10 * e.bn_relu + 5 * e.bn_only + 11 * e.block_out + pool);  // fp16
  }();
  return bytes;
}

double vision_conv_efficiency() {
  static const double efficiency = [] {
    const GpuDatasheet& v100 = *find_gpu_datasheet("V100");
    const double step = 1 / kVisionCalibrationImagesPerS - resnet50_elementwise_bytes_per_image() / v100.hbm_Bps;
    return 3 * kResnet50ForwardGflops * 1e9 / (v100.bf16_dense_flops * step);
  }();
  return efficiency;
}

namespace {

// Megatron-LM's bytes per parameter (docs/source/api-guide/dist_optimizer.md): weights and
// gradients on every rank, and what the distributed optimizer shards over dp.
struct StateBytes {
  double replicated, sharded;
};
StateBytes state_bytes(Precision p) {
  switch (p) {
    case Precision::kFp16: return {4, 16};  // fp16 weights and gradients; fp32 master, gradient copy, moments
    case Precision::kFp32: return {8, 8};   // fp32 weights and gradients; moments
    default: return {6, 12};                // bf16 (and FP8, whose weights are bf16) weights, fp32 gradients
  }
}

// Korthikanti et al. (2022) activation bytes per token of one layer on one GPU.
double activation_bytes_per_token(const WorkloadModel& m, const Shape& s, double tp) {
  if (m.recompute == Recompute::kFull) return 2 * s.h / (m.sequence_parallel ? tp : 1.0);
  // Attention block: QKV input (2h), Q, K, V (2h + 4 kv), projection input (2h), dropout mask
  // (h); MLP: input (2h), up outputs (2 ffn each), activation output (2 ffn), dropout mask
  // (h); two layer-norm inputs (4h). GPT-3's shape gives Korthikanti's 34 h.
  const double attention = 2 * s.h + 2 * s.h + 4 * s.kv_dim + 2 * s.h + s.h;
  const double mlp = 2 * s.h + 2 * s.ffn * s.mlp_mats + s.h;
  const double copies = m.experts > 0 ? std::max(1, m.top_k) : 1;
  const double split = attention + mlp * copies + 4 * s.h;
  // Without SP the norms' inputs, the dropout masks and the QKV and MLP inputs (10 h) stay whole.
  double bytes = m.sequence_parallel ? split / tp : 10 * s.h + (split - 10 * s.h) / tp;
  if (!m.flash_attention && m.recompute != Recompute::kSelective) bytes += 5 * s.heads * m.sequence / tp;
  return bytes;
}

}  // namespace

double training_memory_bytes(const WorkloadModel& m, const ParallelPlan& plan) {
  const double f = std::clamp(m.expert_parameter_fraction, 0.0, 1.0);
  const double params = m.parameters * ((1 - f) + f / std::max(plan.ep, 1)) / (static_cast<double>(plan.tp) * plan.pp);
  const StateBytes sb = state_bytes(m.precision);
  const double states = params * (m.distributed_optimizer ? sb.replicated + sb.sharded / std::max(plan.dp, 1)
                                                          : sb.replicated + sb.sharded);
  if (m.family != ModelFamily::kTransformer || m.hidden <= 0 || m.layers <= 0 || m.sequence <= 0) return states;
  const Shape s = shape_of(m);
  const double tokens = static_cast<double>(m.micro_batch) * m.sequence / std::max(plan.cp, 1);
  const double layers = std::ceil(static_cast<double>(m.layers) / plan.pp);
  double in_flight = std::min(plan.pp, std::max(m.micro_batches, 1));
  const double v = std::max(m.virtual_stages, 1);
  if (plan.pp > 1 && v > 1) in_flight *= 1 + (plan.pp - 1.0) / (plan.pp * v);
  double activations = layers * in_flight * tokens * activation_bytes_per_token(m, s, plan.tp);
  if (plan.pp == 1) activations += 6 * tokens * s.vocab / plan.tp;
  return states + activations;
}

WorkloadModel with_default_micro_batch(const WorkloadModel& model, const ParallelPlan& plan, const GpuDatasheet& g) {
  if (!model.default_micro_batch || model.family != ModelFamily::kTransformer || !model.training) return model;
  const int batch = model.micro_batch * model.micro_batches;
  const double capacity = g.memory_gb * 1e9;
  const bool interleaved = plan.pp > 1 && model.virtual_stages > 1;
  WorkloadModel best = model, m = model;
  best.micro_batch = 1;
  best.micro_batches = batch;
  double best_cost = -1;
  for (int b = 1; b <= batch; ++b) {
    if (batch % b != 0 || (interleaved && (batch / b) % plan.pp != 0)) continue;
    m.micro_batch = b;
    m.micro_batches = batch / b;
    if (training_memory_bytes(m, plan) > capacity) continue;
    const double bubble = plan.pp > 1 ? (plan.pp - 1.0) / (std::max(m.virtual_stages, 1) * m.micro_batches) : 0;
    const double cost = step_compute(m, plan, g).total_us * (1 + bubble);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = m;
    }
  }
  best.default_micro_batch = false;
  return best;
}

GpuCompute gpu_compute(std::string_view gpu_model) {
  const GpuDatasheet& g = gpu_datasheet_or_default(gpu_model);
  return {g.bf16_dense_flops, g.hbm_Bps};
}

StepCompute step_compute(const WorkloadModel& m, const ParallelPlan& plan, const GpuDatasheet& g) {
  if (m.family != ModelFamily::kTransformer) return per_sample_training(m, plan, g);
  if (!m.training) {
    // One decode step: every weight of this GPU's shard read once from HBM.
    StepCompute out;
    out.memory_us = m.parameters * m.bytes_per_element / (static_cast<double>(plan.tp) * plan.pp) / g.hbm_Bps * 1e6;
    out.total_us = out.per_microbatch_us = out.memory_us;
    out.model_flops = 2 * m.parameters * m.micro_batch * plan.dp;
    return out;
  }
  if (m.hidden > 0 && m.layers > 0 && m.sequence > 0) return transformer_training(m, plan, g);
  return parameter_count_training(m, plan, g);
}

double compute_us_per_step(const WorkloadModel& m, std::string_view, int tp, int pp, std::string_view gpu_model) {
  ParallelPlan plan;
  plan.tp = std::max(tp, 1);
  plan.pp = std::max(pp, 1);
  return step_compute(m, plan, gpu_datasheet_or_default(gpu_model)).total_us;
}

}  // namespace toposched
