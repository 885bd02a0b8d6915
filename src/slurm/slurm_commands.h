// Talking to a running Slurm through its own client programs (sinfo, squeue, scontrol,
// sbatch), found on PATH and run without a shell, with a time limit. The outputs go to the
// pure parsers of live_state.h; nothing here decides anything.
//
// read_live_state() asks `sinfo --json` and `squeue --json` and falls back to `scontrol -o
// show node` / `scontrol -o -d show job` when this Slurm's clients have no --json (before
// 21.08) — never when they answer with output that does not parse: that is an error.
// Thread-safe (each call spawns its own processes; the environment is only read).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "slurm/live_state.h"
#include "slurm/submit_plan.h"
#include "topology/error.h"

namespace toposched::slurm {

struct CommandOutput {
  int exit_code = 0;
  std::string out;
  std::string err;
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// Runs argv[0] (looked up on PATH) with the current environment plus `extra_env`; kUnavailable
// when it cannot be started or runs longer than `timeout_s` (it is then killed).
Result<CommandOutput> run_command(const std::vector<std::string>& argv, const EnvVars& extra_env = {},
                                  int timeout_s = 30);

Result<SlurmLiveState> read_live_state(int timeout_s = 30);

// Writes the hostfile (atomically), runs sbatch with SLURM_HOSTFILE pointing at it and
// returns Slurm's job id. When sbatch refuses the job, the hostfile is removed again.
Result<std::string> submit_batch(const SubmitPlan& plan, const std::string& hostfile_path, int timeout_s = 60);

}  // namespace toposched::slurm

namespace toposched::slurm {

struct SubmitOptions {
  bool dry_run = false;
  std::string hostfile_path;         // where the rank-order hostfile goes (must be readable on the job's nodes)
  bool ignore_unknown_nodes = false;  // proceed when Slurm has GPU nodes the spec lacks
  int timeout_s = 30;                 // per Slurm client call
};

struct SubmitOutcome {
  SubmitPlan plan;
  std::string job_id;                 // empty on a dry run
  std::vector<std::string> warnings;  // nodes known to one side only, unusable nodes, GPU count mismatches
  std::string hostfile_path;          // absolute
};

// The whole wrapper: read Slurm's live state, map it onto `cluster`, plan, and (unless
// dry_run) submit. Any error before sbatch runs means nothing was submitted.
Result<SubmitOutcome> submit_with_plan(const Cluster& cluster, const std::vector<std::string>& sbatch_args,
                                       const PlaceRequest& shape, const SubmitOptions& options);

// The warnings (and, for GPU nodes Slurm has and the spec lacks, the error) of a mapping.
Result<std::vector<std::string>> mapping_report(const LiveMapping& mapping, const SlurmLiveState& live,
                                                bool ignore_unknown_nodes);

}  // namespace toposched::slurm
