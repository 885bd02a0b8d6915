// The sbatch command line a user hands to `toposched slurm submit` (everything after `--`),
// split into the job's size, which toposched plans and re-expresses, and the rest, which is
// passed to sbatch unchanged and in order (options, then the script and its arguments, or
// --wrap).
//
// Size options read (and replaced by toposched's exact request): -N/--nodes, -G/--gpus,
// --gpus-per-node, --gres=gpu[:type]:N (other gres in the list are kept in other_gres), -n/--ntasks,
// --ntasks-per-node. --exclusive and -p/--partition are read and kept. Options toposched
// sets itself (-w/--nodelist, -F/--nodefile, -m/--distribution, --gpu-bind, --gpus-per-task,
// -x/--exclude) are refused. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "topology/error.h"

namespace toposched::slurm {

struct SbatchSize {
  int nodes = 0;            // -N; 0 = not given
  int gpus = 0;             // -G/--gpus: GPUs of the whole job
  int gpus_per_node = 0;    // --gpus-per-node or --gres=gpu:N
  int ntasks = 0;           // -n
  int ntasks_per_node = 0;  // --ntasks-per-node
  bool exclusive = false;
  std::string gpu_type;     // from gpu:TYPE:N forms; empty = any
  std::string partition;
  std::string other_gres;   // the non-GPU items of --gres, kept for sbatch ("nic:1")
};

struct ParsedSbatchArgs {
  SbatchSize size;
  std::vector<std::string> kept;  // every argument but the size options, in order
  bool has_script_or_wrap = false;
};

// kInvalidArgument (a usage error) for an option toposched owns, a malformed size, or a
// command line without a script or --wrap.
Result<ParsedSbatchArgs> parse_sbatch_args(const std::vector<std::string>& args);

}  // namespace toposched::slurm
