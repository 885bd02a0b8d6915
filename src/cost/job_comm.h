// Job communication model: a training or inference job's parallelism plan (tp, pp, dp, ep,
// cp, and the rank order), its model (or a named workload class), and the per-step
// communication time of each parallel group on the GPUs it actually got, compared with the
// same job packed on an ideal placement of the same shape.
//
// Rank order: `order` lists the dimensions innermost first (Megatron's default
// "tp-cp-ep-dp-pp": TP ranks are consecutive, PP is outermost). Global rank r is the
// mixed-radix number whose digits are the coordinates in that order; a group of kind K is
// the set of ranks that differ only in their K coordinate.
//
// Per step and per group (the slowest group of a kind bounds the step, since groups of one
// kind run in lock-step):
//   tp: 4 allreduces of one micro-batch's activations per layer per micro-batch (2 forward,
//       2 backward; Megatron's f/g operators; 6 with full recomputation); with sequence
//       parallelism each is an allgather plus a reduce-scatter of the same bytes, timed apart,
//   cp: allgather of K and V per layer per micro-batch forward, reduce-scatter backward,
//   ep: 4 all-to-alls (dispatch and combine, forward and backward) per MoE layer per
//       micro-batch of the routed tokens (top_k copies),
//   dp: one allreduce of the rank's gradients per step (reduce-scatter + allgather with a
//       distributed optimizer moves the same bytes),
//   pp: 2 point-to-point transfers (activation forward, gradient backward) per micro-batch
//       and virtual stage at every stage boundary.
// Inference (training = false) runs the forward halves only and has no DP traffic. The
// formulas and the workload classes are tabulated in docs/cost-model.md.
// step_comm_us is the sum over kinds. What of it the step waits for (exposed_us per kind):
//   tp, cp, ep: all of it (Megatron runs them on the critical path; tp_overlap hides a share);
//   dp: what outlasts the compute of one micro-batch (the reduce-scatter overlaps the last
//       micro-batch's backward, the all-gather the next forward), at least the last bucket;
//       without the distributed optimizer (DDP) what outlasts the backward;
//   pp: the transfers of pipeline fill and drain, 2 x (pp - 1) of them (one per bubble
//       slot); the steady-state ones overlap other micro-batches' compute.
// A model's `overlap` >= 0 replaces these rules with one fraction for every kind.
//
// Invariants: slowdown >= 1; ideal_step_comm_us <= step_comm_us. Pure functions;
// thread-safe.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cost/collective.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

struct ParallelPlan {
  int tp = 1, pp = 1, dp = 1, ep = 1, cp = 1;
  std::string order = "tp-cp-ep-dp-pp";  // innermost first; a permutation of the five kinds
  int gpus() const;                      // tp * pp * dp * ep * cp
};

// Checks sizes (>= 1) and that `order` names each of tp, cp, ep, dp, pp exactly once.
Result<void> validate_plan(const ParallelPlan& plan);

// The five parallel kinds, in the order of Megatron's default rank order.
inline constexpr std::string_view kParallelKinds[5] = {"tp", "cp", "ep", "dp", "pp"};

// What a job computes with: numeric precision of the tensor-core GEMMs, and how much of the
// forward pass the backward recomputes (Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models", 2022: none, selective = the attention core,
// full = every layer's forward).
enum class Precision { kBf16, kFp16, kFp8, kFp32 };
enum class Recompute { kNone, kSelective, kFull };
// Which compute rule applies (cost/compute.h): a transformer's FLOPs from its shape, a
// vision network's per-image FLOPs, a recommendation model's MLP FLOPs and embedding bytes.
enum class ModelFamily { kTransformer, kVision, kRecommendation };

struct WorkloadModel {
  std::string name;                      // class name or free text, for reports
  ModelFamily family = ModelFamily::kTransformer;
  double parameters = 0;                 // total trainable parameters
  int hidden = 0;                        // hidden size
  int layers = 0;                        // transformer layers (whole model)
  int heads = 0;                         // attention heads (0 = hidden / 128)
  int kv_heads = 0;                      // key/value heads, GQA (0 = heads)
  int ffn_hidden = 0;                    // MLP inner size (0 = 4 x hidden); per expert for MoE
  bool gated_mlp = false;                // SwiGLU-style MLP: three matrices instead of two
  int vocabulary = 0;                    // output vocabulary (0 = no logits layer counted)
  int sequence = 0;                      // tokens per sequence
  int micro_batch = 1;                   // sequences (images, samples) per micro-batch
  int micro_batches = 1;                 // micro-batches per step (gradient accumulation)
  // The job file gave the sequences per replica and step (`replica_batch`) but no micro-batch
  // size: micro_batch is 1 and micro_batches the whole batch until with_default_micro_batch
  // (cost/compute.h) splits it as a user would (docs/cost-model.md, "Default micro-batch size").
  bool default_micro_batch = false;
  int virtual_stages = 1;                // interleaved pipeline chunks per stage (1 = plain 1F1B)
  Precision precision = Precision::kBf16;
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = true;         // Megatron SP: norms and dropout split by tp
  bool flash_attention = true;           // fused attention: no s x s scores in memory
  bool distributed_optimizer = true;     // optimizer state sharded across DP (Megatron's ZeRO-1)
  double bytes_per_element = 2;          // activations (bf16 = 2)
  double grad_bytes_per_element = 2;     // gradients as reduced across DP
  int experts = 0;                       // MoE experts (0 = dense)
  int top_k = 1;                         // experts each token is routed to
  double expert_parameter_fraction = 0;  // share of `parameters` in experts (sharded by ep)
  int moe_layer_interval = 1;            // every n-th layer is MoE
  bool training = true;                  // false: forward only, no DP gradients, no backward
  // Fraction [0, 1) of all communication hidden behind compute, applied to every kind alike;
  // < 0 (the default): the per-kind rules of estimate_job_comm (docs/cost-model.md).
  double overlap = -1;
  double tp_overlap = 0;                 // share of TP/SP traffic hidden (0: Megatron's default)
  double forward_gflops_per_sample = 0;  // vision / recommendation: forward FLOPs per sample / 1e9
  double embedding_bytes_per_sample = 0; // recommendation: embedding rows read per sample
  // vision: HBM bytes per sample of the memory-bound kernels between the convolutions (batch
  // norm, ReLU, residual adds, pooling), forward and backward (dp-vision: ResNet-50 v1.5's,
  // cost/compute.h resnet50_elementwise_bytes_per_image)
  double activation_bytes_per_sample = 0;
  double compute_us_per_step = 0;        // 0 = unknown
};

// "llm-dense", "llm-moe", "dp-vision", "inference": typical models for traces that say
// nothing else (values and sources in docs/cost-model.md). Unknown names list the known.
Result<WorkloadModel> workload_class(std::string_view name);
// The class names, in the order above.
std::span<const std::string_view> workload_class_names();
// Checks ranges (non-negative sizes, overlap in [0, 1), ...).
Result<void> validate_workload(const WorkloadModel& model);

struct GroupComm {
  std::string kind;          // "tp", "cp", "ep", "dp", "pp"
  double time_us = 0;        // per step, slowest group of this kind
  double ideal_time_us = 0;  // the same on the ideal placement
  int groups = 0;            // how many groups of this kind
  int group_size = 0;
  std::string collective;  // what it runs: "allreduce", "allgather+reduce-scatter" (TP with SP), "all-to-all", ...
  double bytes = 0;        // per collective call
  int calls = 0;           // calls per step
  double exposed_us = 0;   // of time_us, what the per-kind overlap rule leaves on the step
  double ideal_exposed_us = 0;
};

struct JobCommEstimate {
  double step_comm_us = 0;
  double ideal_step_comm_us = 0;
  double slowdown = 1;         // step_comm_us / ideal_step_comm_us, >= 1
  double exposed_comm_us = 0;  // sum of the groups' exposed_us
  double ideal_exposed_comm_us = 0;
  double compute_us = 0;       // model.compute_us_per_step
  // The pipeline bubble: compute x (pp - 1) / (virtual_stages x micro_batches) for training
  // (Narayanan et al., SC21, eq. 1-2), 0 for inference or pp = 1.
  double bubble_us = 0;
  // A synchronous step waits for its slowest GPU: compute x kGpuSpeedSigma x
  // sqrt(2 ln gpus) (the expected maximum of that many normal draws; docs/cost-model.md).
  double straggler_us = 0;
  double step_us = 0;          // compute + bubble + straggler + exposed
  double ideal_step_us = 0;    // the same with the ideal exposed communication
  // step_us / ideal_step_us: what the step time grows by; equals `slowdown` when
  // compute_us_per_step is 0.
  double step_slowdown = 1;
  std::vector<GroupComm> groups;  // only kinds of size > 1, in tp, cp, ep, dp, pp order
};

// gpus_by_rank[r] is the GPU of global rank r; its size must equal plan.gpus().
Result<JobCommEstimate> estimate_job_comm(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                          const ParallelPlan& plan, const WorkloadModel& model,
                                          const CostOptions& options = {});

// Megatron-LM's gradient bucket (DDP bucket_size: 40M parameters) and PyTorch DDP's default
// bucket (25 MB): the last bucket is reduced after the backward ends, so at least its share
// of the DP time is exposed.
inline constexpr double kMegatronBucketParameters = 40e6;
inline constexpr double kDdpBucketBytes = 25e6;
// Spread of per-GPU speed among GPUs of one product in one cluster (σ, as a fraction):
// Sinha et al., "Not All GPUs Are Created Equal" (SC22, arXiv 2208.11035) measure an 8%
// average performance variation between identical GPUs across clusters of thousands, about
// 8 σ for a normal spread over that many; a synchronous step runs at its slowest GPU.
inline constexpr double kGpuSpeedSigma = 0.01;

// compute x (pp - 1) / (virtual_stages x micro_batches) for training, else 0.
double pipeline_bubble_us(const WorkloadModel& model, const ParallelPlan& plan);
// compute x kGpuSpeedSigma x sqrt(2 ln gpus): the expected lag of the slowest of `gpus`.
double straggler_us(double compute_us, int gpus);

// The ideal side of a job's estimate: per-kind step times (indexed like kParallelKinds) of
// the same job alone on ideal_placement(). Callers that compare many placements of one job
// (the placement engine) compute it once and pass it to the overload below.
struct IdealJobComm {
  std::array<double, 5> kind_time_us{};
  std::array<int, 5> sizes{};  // tp, cp, ep, dp, pp of the plan it was computed for
  double step_comm_us = 0;
};
// Errors when the cluster has too few GPUs of `like`'s node type.
Result<IdealJobComm> ideal_job_comm(const Cluster& cluster, const ParallelPlan& plan, const WorkloadModel& model,
                                    GpuId like);
// As estimate_job_comm, with the ideal precomputed (for the same plan and model; a plan
// of other sizes is an error).
Result<JobCommEstimate> estimate_job_comm(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                          const ParallelPlan& plan, const WorkloadModel& model,
                                          const CostOptions& options, const IdealJobComm& ideal);

// The GPUs, in rank order, of the ideal placement of a job of `gpu_count` GPUs on an empty
// cluster: whole nodes of `like`'s node type, packed under the closest common switch (or
// accelerator domain) that holds enough of them, in node order. With `stage_gpus` (the
// GPUs of one PP stage, consecutive ranks, whole nodes), each stage goes whole into one
// accelerator domain (or leaf switch) when the scope can be laid out that way, so no
// stage's DP traffic crosses a tier that a stage-aligned placement avoids. Errors when the
// cluster has too few GPUs of that type.
Result<std::vector<GpuId>> ideal_placement(const Cluster& cluster, int gpu_count, GpuId like, int stage_gpus = 0);

// Rank r's group members for one kind ("tp", ...), in group-rank order. For tests and tools.
Result<std::vector<int>> group_of_rank(const ParallelPlan& plan, std::string_view kind, int rank);

}  // namespace toposched
