// Scaling curves of one job plan (`toposched scale`): the job file (cost/job_file.h) fixes
// tp, pp, cp, ep and the per-replica work (micro-batches of sequences); data parallelism
// grows with the GPU count (weak scaling). For each size and placement policy:
//  - the GPUs the policy chooses on the starting allocation (empty cluster, or a state
//    file's jobs), through the placement engine's place transaction, holding nothing;
//  - the step time predicted by the cost model on those GPUs:
//      compute + bubble + straggler + exposed communication (estimate_job_comm's step_us),
//    compute from the job file's compute_ms_per_step or from its shape (cost/compute.h's
//    step_compute), the bubble of the 1F1B schedule interleaved with `virtual_stages`
//    chunks per stage (the job file's, or the option's when > 0; Narayanan et al., SC21,
//    eq. 1-2), the exposed communication after the per-kind overlap rules;
//  - throughput (sequences/s), speed-up and scaling efficiency against the smallest size
//    the policy placed: efficiency = speed-up x smallest GPUs / GPUs (1 at the first point),
//    and efficiency_vs_ideal against the smallest size on the ideal placement;
//  - where efficiency breaks: the step between two sizes that loses the most efficiency,
//    the parallel group whose time grew most there and the farthest level its groups reach.
// A randomized policy (`random`) gives one independent draw per size, not a curve: its
// efficiency against its own smallest size can exceed 1 (the smallest size landed
// scattered, a larger one had less choice), so "all" leaves it out and its curve carries a
// note saying so when it is named.
// Errors: kInvalidArgument for sizes that are not ascending multiples of tp x pp x cp x ep
// or an unknown policy. A size a policy cannot place is a point with placed = false.
// Pure functions of their inputs apart from write_scale_report; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost/job_comm.h"
#include "cost/job_file.h"
#include "placement/allocation_state.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched::sim {

struct ScaleOptions {
  std::vector<std::string> policies;  // in output order
  std::vector<int> gpu_counts;        // ascending
  int virtual_stages = 0;             // interleaved pipeline chunks per stage; 0 = the job file's
  std::uint64_t seed = 1;             // for the random policy
};

struct ScalePoint {
  int gpus = 0;
  int dp = 0;
  int micro_batch = 0;          // sequences per micro-batch (the default rule's choice when the job left it open)
  int micro_batches = 0;        // per step and replica
  bool placed = false;
  std::string why_not;          // when not placed: the policy's reason
  double compute_s = 0;         // per step, pipeline bubble and straggler lag included
  double bubble_s = 0;          // of compute_s, the pipeline bubble
  double straggler_s = 0;       // of compute_s, the slowest GPU's lag
  double exposed_comm_s = 0;    // per step
  double step_time_s = 0;
  double samples_per_s = 0;     // sequences per second, all replicas
  double speedup = 0;           // throughput / throughput at the curve's first placed size
  double efficiency = 0;        // speedup x first GPUs / GPUs
  // Per-GPU throughput over that of the same job at the smallest size on the cost model's
  // ideal placement (empty cluster): one baseline for every policy, so a policy that places
  // the smallest size badly (random) is not flattered by its own poor start. 0 = no ideal.
  double efficiency_vs_ideal = 0;
  std::string widest_level;     // farthest level between the job's GPUs ("nvlink", "tier:leaf", ...)
  std::vector<GroupComm> groups;
  std::vector<std::string> group_levels;  // per groups[i]: the farthest level any group of that kind reaches
};

struct ScaleCurve {
  std::string policy;
  std::vector<ScalePoint> points;
  // "dp allreduce reaches tier:spine at 1024 GPUs (was tier:leaf); efficiency 0.97 -> 0.91",
  // or a sentence saying it holds.
  std::string breaks;
  // Empty, or for a randomized policy why its points do not form a scaling curve.
  std::string note;
};

struct ScaleResult {
  std::string job;
  std::string cluster;
  ParallelPlan plan;   // the job file's plan (dp as given there)
  WorkloadModel model;
  int virtual_stages = 1;
  double ideal_samples_per_s_per_gpu = 0;  // the smallest size on the ideal placement
  std::vector<ScaleCurve> curves;
};

// What `--policies all` means for scale: every placement policy that models a scheduler's
// deterministic choice (placement_policies() order), i.e. all but the randomized ones.
std::vector<std::string> scale_policies_all();

// One point: `spec` exactly as given (its dp included) placed by `policy` on a copy of
// `start`. kInvalidArgument for an unknown policy or an invalid plan; a placement the
// policy refuses is a point with placed = false.
Result<ScalePoint> predict_step(const Cluster& cluster, const AllocationState& start, const std::string& policy,
                                const JobSpec& spec, int virtual_stages = 0, std::uint64_t seed = 1);

Result<ScaleResult> scale_job(const Cluster& cluster, const AllocationState& start, const JobSpec& spec, const ScaleOptions& options);

// {"job","cluster","plan":{...},"virtual_stages","policies":{NAME:[{"gpus","step_time_s",
// "speedup","efficiency","efficiency_vs_ideal","dp","placed","throughput_samples_per_s","compute_s",
// "exposed_comm_s","widest_level"}]},"breaks":{NAME:"..."},"notes":{NAME:"..."}} ("notes" only
// when a curve has one: a randomized policy's); numbers rounded to fixed
// decimals, so the text is byte-stable. Fails (kValidation) on a name that is not UTF-8.
Result<std::string> scale_json(const ScaleResult& result);
// The terminal table: one block per policy (with its note, if any), then where each curve breaks.
std::string scale_table(const ScaleResult& result);
// One self-contained page (formats/html_page.h): efficiency and step time against GPUs per
// policy, and the per-size table.
std::string scale_html(const ScaleResult& result);
// DIR/report.json and DIR/report.html (as simulate's report), each written atomically, the JSON last.
Result<void> write_scale_report(const std::string& dir, const ScaleResult& result);

}  // namespace toposched::sim
