// Slurm's live state as toposched needs it: the nodes Slurm knows (state, partitions, GPU
// count) and the jobs holding GPUs, with the GPU indices each job holds on each node.
//
// Read from the outputs of Slurm's own clients, by pure parsers tested on captured output:
//   - nodes: `sinfo --json` (Slurm >= 21.08), or `scontrol -o show node` (any version; the
//            multi-line `scontrol show node` too: indented lines continue a record);
//   - jobs:  `squeue --json` (`gres_detail` per allocated node: "gpu:2(IDX:0-1)"), or
//            `scontrol -o -d show job` ("Nodes=n[02-03] ... GRES=gpu:3(IDX:0-2)").
// Slurm 22.05 ignores squeue's filters in JSON mode, so the parsers take every job and keep
// those that hold resources (RUNNING, CONFIGURING, COMPLETING, SUSPENDED, STOPPED).
// Errors name the command's output as the file ("squeue --json:1:734: ...").
//
// apply_live_state() maps that onto a Cluster by node name, in the engine's own terms: every
// Slurm job holding GPUs is a job "slurm-job:<id>" held on exactly those GPUs
// (Command::hold_gpus, as for any job another scheduler placed); every node Slurm cannot use
// (down/drained, outside the requested partition, absent from Slurm) is marked unavailable by
// the source "slurm" (placement/node_availability.h); the GPUs of a usable node beyond the
// count Slurm configured there are a blocked GPU set for the placement
// (PlaceRequest::blocked_gpus). hold_live_mapping() gives the first two to an engine through
// its one entry point, so nothing here changes an allocation state itself.
// Nodes known to one side only are listed in the result, never dropped silently.
// Plain values and pure functions (hold_live_mapping: as thread-safe as the engine).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "placement/engine.h"
#include "placement/node_availability.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched::slurm {

struct SlurmNode {
  std::string name;
  std::string state;                // base state, lower case: idle, mixed, allocated, down, ...
  std::vector<std::string> flags;   // upper case: DRAIN, NOT_RESPONDING, CLOUD, POWERED_DOWN, ...
  std::vector<std::string> partitions;
  int gpus = 0;                     // GPUs Slurm configured on the node (sum over gpu gres types)
  std::string gpu_type;             // the first gpu gres's type ("h100" of gpu:h100:4); empty: untyped
  // RealMemory: the node's memory in Slurm's megabytes (MiB: slurmd reports the page count
  // times the page size over 2^20); 0 = not reported.
  long long real_memory_mb = 0;
  // False when Slurm would not start a job there now (down, drained, failing, maintenance,
  // not responding, future, unknown).
  bool usable() const;
};

struct SlurmJobNode {
  std::string node;
  std::vector<int> gpu_indices;  // node-local GPU indices the job holds there, ascending
};

struct SlurmJob {
  std::string id;          // "123", or "123_4" for an array task
  std::string state;       // upper case: RUNNING, PENDING, ...
  std::string name;
  std::string comment;
  std::string admin_comment;        // "toposched-job=ID" when the job_submit.lua placed it
  std::vector<SlurmJobNode> nodes;  // empty while pending
  bool holds_resources() const;
};

struct SlurmLiveState {
  std::vector<SlurmNode> nodes;
  std::vector<SlurmJob> jobs;
};

// Each parser takes the command's whole stdout; `source` names it in errors.
Result<std::vector<SlurmNode>> parse_sinfo_json(std::string_view text, const std::string& source = "sinfo --json");
Result<std::vector<SlurmNode>> parse_scontrol_nodes(std::string_view text,
                                                    const std::string& source = "scontrol -o show node");
Result<std::vector<SlurmJob>> parse_squeue_json(std::string_view text, const std::string& source = "squeue --json");
Result<std::vector<SlurmJob>> parse_scontrol_jobs(std::string_view text,
                                                  const std::string& source = "scontrol -o -d show job");

// GPU indices of a gres string such as "gpu:h100:2(IDX:0-1,4)" (several comma-separated
// gres allowed: "gpu:a:1(IDX:0),gpu:b:1(IDX:3)"); non-gpu gres are ignored. Ascending.
Result<std::vector<int>> parse_gres_gpu_indices(std::string_view gres);
// GPU count of a configured gres string such as "gpu:h100:8(S:0-1),nic:2" (0 without gpu).
Result<int> parse_gres_gpu_count(std::string_view gres);
// The type of the first typed gpu gres ("h100" of "gpu:h100:4(S:0-1)"); empty when none is typed.
std::string parse_gres_gpu_type(std::string_view gres);

struct LiveMappingOptions {
  std::string partition;  // empty = every partition
};

// A job as an engine holds it: its id and its GPUs in rank order.
struct HeldJob {
  std::string id;
  std::vector<GpuId> gpus;  // rank order
};

// The source of the node marks Slurm's live state sets.
inline constexpr std::string_view kSlurmSource = "slurm";

struct LiveMapping {
  // Slurm's jobs holding GPUs: "slurm-job:<id>" on the GPUs Slurm gave it, node by node.
  std::vector<HeldJob> slurm_jobs;
  // Nodes Slurm cannot use now, as marks of source "slurm" whose reason says why ("Slurm
  // state idle+DRAIN", "not in partition batch", "unknown to Slurm").
  std::vector<NodeAvailabilityChange> node_marks;
  // Free GPUs of usable nodes beyond the GPU count Slurm configured there.
  std::vector<GpuId> unconfigured_gpus;
  std::vector<std::string> slurm_only_nodes;  // Slurm knows them, the cluster spec does not
  std::vector<std::string> spec_only_nodes;   // in the spec, unknown to Slurm (not usable)
  std::vector<std::string> unusable_nodes;    // known to both, but down/drained/other partition
  std::vector<std::string> gpu_count_mismatches;  // "n01: spec 8 GPUs, Slurm 4"
  std::vector<std::string> jobs_accounted;        // Slurm job ids whose GPUs were marked busy
};

// The GPUs a Slurm job holds, node by node in Slurm's order (none for a CPU-only job).
// kValidation when it holds GPUs on a node the spec does not know, or a GPU index the spec's
// node does not have.
Result<std::vector<GpuId>> slurm_job_gpus(const Cluster& cluster, const SlurmJob& job);

// The job id under which an engine holds a Slurm job's GPUs.
std::string slurm_job_owner(std::string_view job_id);
// The id serve --slurm's sync holds the GPUs of a node Slurm cannot use under (slurm/sync.h).
std::string unavailable_owner(std::string_view node);

// Errors (kValidation) when a job holds GPUs on a node the spec does not know, or a GPU
// index the spec's node does not have: the state would be wrong, so nothing may be placed.
Result<LiveMapping> apply_live_state(const Cluster& cluster, const SlurmLiveState& live,
                                     const LiveMappingOptions& options = {});

// Makes `engine` (over the mapping's cluster) hold Slurm's jobs and mark Slurm's unusable
// nodes, through Engine::decide with nothing to commit. The first refusal is returned (a
// job id or GPU the engine already holds).
Result<void> hold_live_mapping(Engine& engine, const LiveMapping& mapping);

}  // namespace toposched::slurm
