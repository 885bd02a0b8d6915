#include "router/model.h"

#include <algorithm>

#include <fmt/format.h>

#include "topology/hardware.h"

namespace toposched::router {

// Shapes from each model's published config.json (Meta Llama 3 / 3.1 model cards).
const std::vector<ModelSpec>& model_catalog() {
  static const std::vector<ModelSpec> models = {
      {"llama3-8b", "Meta Llama 3 8B: 32 layers, d_model 4096, 32 heads, 8 KV heads (GQA)", 8.03e9, 32, 4096, 32, 8, 128, 128256},
      {"llama3-70b", "Meta Llama 3 70B: 80 layers, d_model 8192, 64 heads, 8 KV heads (GQA)", 70.6e9, 80, 8192, 64, 8, 128, 128256},
      {"llama3-405b", "Meta Llama 3.1 405B: 126 layers, d_model 16384, 128 heads, 8 KV heads (GQA)", 405.9e9, 126, 16384, 128, 8, 128, 128256},
  };
  return models;
}

Result<ModelSpec> find_model(std::string_view name) {
  for (const ModelSpec& m : model_catalog())
    if (m.name == name) return m;
  std::string known;
  for (const ModelSpec& m : model_catalog()) known += (known.empty() ? "" : ", ") + std::string(m.name);
  return make_error(ErrorCode::kNotFound, fmt::format("unknown model '{}'; known models: {}", name, known));
}

namespace {

// The products the router has an inference time model for; their dense BF16 throughput,
// HBM bandwidth, memory and board power come from the one hardware table
// (topology/hardware.h's gpu_datasheet_table), so cost, router and power agree.
constexpr std::string_view kServedProducts[] = {"GB200", "B200", "H200", "H100-SXM5"};

}  // namespace

Result<GpuSpec> find_gpu_spec(std::string_view gpu_model) {
  const GpuDatasheet* d = find_gpu_datasheet(gpu_model);
  if (d && std::find(std::begin(kServedProducts), std::end(kServedProducts), d->product) != std::end(kServedProducts))
    return GpuSpec{d->product, d->source, d->bf16_dense_flops / 1e12, d->hbm_Bps / 1e12, d->memory_gb, d->tdp_w};
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("no inference time model for GPU '{}'; the router knows H100-SXM5, H200, B200 and GB200", gpu_model));
}

TimeModel::TimeModel(const ModelSpec& model, const GpuSpec& gpu, int tp, Efficiency eff)
    : model_(model), gpu_(gpu), tp_(std::max(tp, 1)) {
  flops_per_s_ = tp_ * gpu.bf16_dense_tflops * 1e12 * eff.compute;
  bytes_per_s_ = tp_ * gpu.hbm_TBps * 1e12 * eff.bandwidth;
  step_overhead_s_ = eff.step_overhead_s;
}

double TimeModel::iteration_s(double prefill_tokens, double prefill_position_sum, double prefill_context_tokens,
                              double decode_seqs, double decode_context_sum, double prefill_seqs) const {
  if (prefill_tokens <= 0 && decode_seqs <= 0) return 0;
  if (prefill_tokens <= 0) prefill_seqs = 0;
  const double d_attn = static_cast<double>(model_.heads) * model_.head_dim;
  // Per token: 2 per non-embedding parameter; per earlier position it attends (causal):
  // QK^T and attention x V, 2 x 2 d_attn per layer; per sampling sequence: the LM head.
  const double tokens = prefill_tokens + decode_seqs;
  double flops = 2 * model_.per_token_params() * tokens + 4.0 * model_.layers * d_attn * (prefill_position_sum + decode_context_sum) +
                 2 * model_.embedding_params() * (decode_seqs + prefill_seqs);
  // Weights once per iteration (the input embedding is a lookup, not read whole); the KV of
  // every earlier token each sequence attends to; the KV written for the new tokens.
  double kv = model_.kv_bytes_per_token();
  double bytes = (model_.params - model_.embedding_params()) * model_.bytes_per_param + kv * (prefill_context_tokens + decode_context_sum) +
                 kv * tokens;
  return step_overhead_s_ + std::max(flops / flops_per_s_, bytes / bytes_per_s_);
}

double TimeModel::prefill_s(double tokens, double cached) const {
  if (tokens <= 0) return 0;
  // Positions cached .. cached+tokens-1.
  double position_sum = tokens * (2 * cached + tokens - 1) / 2;
  return iteration_s(tokens, position_sum, cached, 0, 0);
}

double TimeModel::kv_capacity_tokens() const {
  double free = 0.9 * tp_ * gpu_.memory_gb * 1e9 - model_.weight_bytes();
  return free > 0 ? free / model_.kv_bytes_per_token() : 0;
}

}  // namespace toposched::router
