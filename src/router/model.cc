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

// Dense (no sparsity) BF16 tensor throughput, HBM bandwidth, memory and maximum board power.
// Order matters: "GB200" before "B200".
struct GpuRow {
  std::string_view key;  // matched against the GPU model name, upper-case, no spaces or dashes
  GpuSpec spec;
};

const std::vector<GpuRow>& gpu_table() {
  static const std::vector<GpuRow> rows = {
      {"GB200", {"GB200", "NVIDIA GB200 NVL72 data sheet (per GPU: 2.5 PF dense BF16, 8 TB/s, 186 GB, 1200 W)", 2500, 8.0, 186, 1200}},
      {"B200", {"B200", "NVIDIA HGX B200 data sheet (per GPU: 2.25 PF dense BF16, 8 TB/s, 180 GB, 1000 W)", 2250, 8.0, 180, 1000}},
      {"H200", {"H200", "NVIDIA H200 SXM data sheet (989 TF dense BF16, 4.8 TB/s, 141 GB, 700 W)", 989, 4.8, 141, 700}},
      {"H100", {"H100-SXM5", "NVIDIA H100 SXM data sheet (989 TF dense BF16, 3.35 TB/s, 80 GB, 700 W)", 989, 3.35, 80, 700}},
  };
  return rows;
}


}  // namespace

Result<GpuSpec> find_gpu_spec(std::string_view gpu_model) {
  std::string key = gpu_model_key(gpu_model);
  for (const GpuRow& r : gpu_table())
    if (key.find(r.key) != std::string::npos) {
      if (r.key == "H100" && (key.find("NVL") != std::string::npos || key.find("PCIE") != std::string::npos)) break;
      return r.spec;
    }
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
