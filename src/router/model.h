// What the request simulator needs to know of an LLM and of a GPU to time its work:
//  - ModelSpec: a transformer's shape (parameters, layers, width, attention and KV heads),
//    from the model's published configuration; per-token KV bytes follow from it (GQA).
//  - GpuSpec: a GPU's dense BF16 peak, HBM bandwidth, memory and board power, from the
//    vendor's data sheet.
//  - TimeModel: the time of one continuous-batching iteration as a roofline: a fixed
//    per-step overhead plus the larger of its FLOPs over (peak x prefill efficiency) and its
//    HBM bytes over (bandwidth x bandwidth efficiency), per tensor-parallel group. FLOPs: 2
//    per non-embedding parameter per token (Kaplan et al., "Scaling Laws for Neural Language
//    Models", 2020, Table 1, which leaves out the embedding), the LM head's 2 d_model vocab
//    once per sequence that samples (vLLM computes logits only at sampled positions), and
//    causal attention's QK^T and attention x V, 2 x 2 n_layer d_attn per earlier position
//    (Hoffmann et al., "Training Compute-Optimal Large Language Models", 2022, Appendix F,
//    with the causal mask: a token at position p attends p positions). docs/router.md cites
//    the constants.
// Registries are tables (name, description, value) in the style of formats/exporter.cc.
// Immutable values; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/error.h"

namespace toposched::router {

struct ModelSpec {
  std::string_view name;         // "llama3-8b"
  std::string_view description;
  double params = 0;             // parameters
  int layers = 0;
  int d_model = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int vocab = 0;                 // embedding rows (untied input and output tables)
  double bytes_per_param = 2;    // BF16 weights
  double kv_bytes_per_element = 2;  // BF16 KV cache

  double weight_bytes() const { return params * bytes_per_param; }
  // One embedding table (input or LM head): vocab x d_model parameters.
  double embedding_params() const { return static_cast<double>(vocab) * d_model; }
  // Parameters every token goes through: all but the input embedding and the LM head.
  double per_token_params() const { return params - 2 * embedding_params(); }
  // K and V for every layer and KV head: 2 x layers x kv_heads x head_dim x element size.
  double kv_bytes_per_token() const { return 2.0 * layers * kv_heads * head_dim * kv_bytes_per_element; }
};

struct GpuSpec {
  std::string_view name;        // "H100-SXM5"
  std::string_view source;      // data sheet it comes from
  double bf16_dense_tflops = 0;
  double hbm_TBps = 0;
  double memory_gb = 0;
  double board_power_w = 0;
};

const std::vector<ModelSpec>& model_catalog();
Result<ModelSpec> find_model(std::string_view name);  // kNotFound lists the known names
// By the cluster's GPU model name ("H100-SXM5", "NVIDIA H200", "B200", ...).
// The one place the router looks GPUs up: a row of topology/hardware's gpu_datasheet_table,
// the table cost and power read too (tests/router/one_gpu_table_test.cc); kInvalidArgument
// for a GPU the router has no time model for.
Result<GpuSpec> find_gpu_spec(std::string_view gpu_model);

// Efficiencies of the roofline (fractions of peak a serving engine sustains).
struct Efficiency {
  double compute = 0.5;    // model FLOPs utilisation of prefill-heavy iterations
  double bandwidth = 0.6;  // HBM bandwidth utilisation of decode-heavy iterations
  double step_overhead_s = 0.001;  // scheduling, input preparation, sampling per iteration (docs/router.md)
};

// One worker's iteration timer. Invariant: every time it returns is > 0 for any work.
class TimeModel {
 public:
  TimeModel(const ModelSpec& model, const GpuSpec& gpu, int tp, Efficiency eff = {});

  // Seconds of one iteration that computes `prefill_tokens` new prompt tokens whose
  // positions sum to `prefill_position_sum` (attention context), reads the KV of
  // `prefill_context_tokens` earlier tokens once, and decodes one token for each of
  // `decode_seqs` sequences whose contexts sum to `decode_context_sum`.
  // `prefill_seqs` sequences among the prefill chunks compute logits (vLLM: one per chunk).
  double iteration_s(double prefill_tokens, double prefill_position_sum, double prefill_context_tokens,
                     double decode_seqs, double decode_context_sum, double prefill_seqs = 1) const;
  // Prefill of `tokens` new tokens after `cached` tokens, alone on the worker.
  double prefill_s(double tokens, double cached) const;

  const ModelSpec& model() const { return model_; }
  const GpuSpec& gpu() const { return gpu_; }
  int tp() const { return tp_; }
  // KV cache the worker holds, in tokens: vLLM's default 90% of the group's memory, less
  // the weights. 0 when the weights do not fit.
  double kv_capacity_tokens() const;

 private:
  ModelSpec model_;
  GpuSpec gpu_;
  int tp_ = 1;
  double flops_per_s_ = 0;  // whole TP group, sustained
  double bytes_per_s_ = 0;
  double step_overhead_s_ = 0;
};

}  // namespace toposched::router
