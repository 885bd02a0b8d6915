// The submit wrapper's plan: from the user's sbatch arguments, a parallel shape and a
// policy, on the GPUs Slurm leaves free (an engine holding Slurm's jobs, slurm/live_state.h),
// choose the job's GPUs and rank order and write the sbatch command that makes Slurm run
// exactly that:
//
//   SLURM_HOSTFILE=<hostfile> sbatch --parsable --nodes=N --nodelist=<nodes> --ntasks=R
//       --ntasks-per-node=K --gres=gpu[:TYPE]:K --distribution=arbitrary --gpu-bind=<bind>
//       <the user's other arguments, unchanged>
//
// The hostfile names one node per rank in rank order, so the job's srun steps (which inherit
// SLURM_HOSTFILE and SLURM_DISTRIBUTION=arbitrary) put rank r on the node toposched chose.
// Three facts of Slurm 22.05 shape the plan (each measured on real slurmd daemons, see
// docs/slurm.md): a job gets the same GPU count on every node (22.05 ignores a hostfile's
// per-node task counts when it allocates), so the plan uses K GPUs on each of N nodes;
// sbatch cannot name GPU indices and select/cons_tres gives a job the lowest free indices of
// a node, so the plan asks the engine for a Slurm-aligned placement
// (PlaceRequest::slurm_aligned, placement/slurm_alignment.h); --gpu-bind=map_gpu takes
// node-wide indices and one list for every node, so ranks get map_gpu when every node's list
// is the same, per_task:1 (task i of a node takes its i-th lowest GPU) otherwise.
// The plan is a dry run of the engine (Command::dry_run): nothing is held.
// Pure functions but plan_submit, which asks `engine` (thread-safe like the engine).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/engine.h"
#include "placement/job_schema.h"
#include "slurm/live_state.h"
#include "slurm/sbatch_args.h"

namespace toposched::slurm {

// `slurm submit` asks with the job-request schema's own PlaceRequest (its plan, policy and
// constraint rows, as `toposched slurm submit` registers them from the same table as
// `place`); the size fields come from the sbatch arguments and replace the request's. An
// empty job id places as "slurm-submit" (Slurm assigns the real one).
inline constexpr std::string_view kSubmitJobId = "slurm-submit";

struct SubmitPlan {
  std::vector<GpuId> gpus_by_rank;   // the engine's choice, rank order
  nlohmann::ordered_json placement;  // its `place` JSON, as the engine answered (placement_to_json)
  int nodes = 0;
  int gpus_per_node = 0;
  std::vector<std::string> node_order;   // nodes in first-rank order
  std::string hostfile;                  // one node name per rank, rank order, '\n'-terminated
  std::string gpu_bind;                  // "map_gpu:0,1,2,3" or "per_task:1"
  std::vector<std::string> sbatch_args;  // without the leading "sbatch"
};

// The JobRequest the sbatch size asks for (kInvalidArgument when it does not say how many
// GPUs, or says it inconsistently).
Result<JobRequest> request_from_sbatch(const SbatchSize& size, const PlaceRequest& shape);

// Places on what `engine` holds (a dry run: the engine is not changed) and builds the
// command. The shape's node mask and blocked GPUs are honoured; the placement is Slurm-aligned.
Result<SubmitPlan> plan_submit(Engine& engine, const ParsedSbatchArgs& args, const PlaceRequest& shape);


// The plan as JSON for --dry-run: {"sbatch": [...], "hostfile": "...", "gpu_bind", "plan"}.
nlohmann::ordered_json dry_run_json(const SubmitPlan& plan, const std::string& hostfile_path);

// A shell-quoted command line ("SLURM_HOSTFILE=... sbatch ...") a user can paste.
std::string shell_command(const SubmitPlan& plan, const std::string& hostfile_path);

}  // namespace toposched::slurm
