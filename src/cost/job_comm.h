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
//       2 backward; Megatron's f/g operators; with sequence parallelism the same bytes move as
//       allgather + reduce-scatter),
//   cp: allgather of K and V per layer per micro-batch forward, reduce-scatter backward,
//   ep: 4 all-to-alls (dispatch and combine, forward and backward) per MoE layer per
//       micro-batch of the routed tokens (top_k copies),
//   dp: one allreduce of the rank's gradients per step (reduce-scatter + allgather with a
//       distributed optimizer moves the same bytes),
//   pp: 2 point-to-point transfers (activation forward, gradient backward) per micro-batch
//       at every stage boundary.
// Inference (training = false) runs the forward halves only and has no DP traffic. The
// formulas and the workload classes are tabulated in docs/cost-model.md.
// step_comm_us is the sum over kinds; exposed_comm_us = step_comm_us x (1 - overlap).
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

struct WorkloadModel {
  std::string name;                      // class name or free text, for reports
  double parameters = 0;                 // total trainable parameters
  int hidden = 0;                        // hidden size
  int layers = 0;                        // transformer layers (whole model)
  int sequence = 0;                      // tokens per sequence
  int micro_batch = 1;                   // sequences per micro-batch
  int micro_batches = 1;                 // micro-batches per step (gradient accumulation)
  double bytes_per_element = 2;          // activations (bf16 = 2)
  double grad_bytes_per_element = 2;     // gradients as reduced across DP
  int experts = 0;                       // MoE experts (0 = dense)
  int top_k = 1;                         // experts each token is routed to
  double expert_parameter_fraction = 0;  // share of `parameters` in experts (sharded by ep)
  int moe_layer_interval = 1;            // every n-th layer is MoE
  bool training = true;                  // false: forward only, no DP gradients, no backward
  double overlap = 0;                    // fraction [0, 1) of communication hidden behind compute
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
  std::string collective;  // what it runs: "allreduce", "all-to-all", "send-recv", ...
  double bytes = 0;        // per collective call
  int calls = 0;           // calls per step
};

struct JobCommEstimate {
  double step_comm_us = 0;
  double ideal_step_comm_us = 0;
  double slowdown = 1;         // step_comm_us / ideal_step_comm_us, >= 1
  double exposed_comm_us = 0;  // step_comm_us x (1 - overlap)
  double ideal_exposed_comm_us = 0;
  // (compute + exposed) / (compute + ideal exposed): what the step time grows by; equals
  // `slowdown` when compute_us_per_step is 0.
  double step_slowdown = 1;
  std::vector<GroupComm> groups;  // only kinds of size > 1, in tp, cp, ep, dp, pp order
};

// gpus_by_rank[r] is the GPU of global rank r; its size must equal plan.gpus().
Result<JobCommEstimate> estimate_job_comm(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                          const ParallelPlan& plan, const WorkloadModel& model,
                                          const CostOptions& options = {});

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
