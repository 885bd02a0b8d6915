// JobRequest: what a job asks the placement engine for, and its validation.
//
// Size: `gpus` GPUs, or `nodes` whole nodes (exclusive), optionally with `gpus_per_node`, or
// as pods of `gpus_per_pod` GPUs each, several pods to a node allowed.
// Parallelism (tp x cp x ep x dp x pp GPUs, the cost model's ParallelPlan; ranks tp
// fastest, pp slowest: "tp-cp-ep-dp-pp") decides the rank order and, for `topo`, the shape of the placement. Workload
// kinds: training (one gang), inference (independent replicas of `replica_gpus` GPUs each), inference-pd (a prefill
// pool and a decode pool of replicas). Constraints in the style of Kueue (required / preferred tier: all GPUs under one
// switch of that tier, or in one node for the tier "node"; slices; unconstrained) and Slurm (--switches=N leaf switches at most, --segment=N
// nodes per base block, exclusive nodes). Gang (all-or-nothing) always.
//
// normalize() checks the request against a cluster and fills the derived fields (total GPU
// count, dp, tier indices). Plain value; thread-safe to copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

enum class WorkloadKind { kTraining, kInference, kInferencePD };

std::string_view workload_kind_name(WorkloadKind k);
std::optional<WorkloadKind> parse_workload_kind(std::string_view name);

// The tier index meaning "one node" for required/preferred tier constraints.
inline constexpr int kNodeTier = -1;

struct JobRequest {
  std::string job_id;
  // Size: exactly one of gpus / nodes is > 0.
  int gpus = 0;
  int nodes = 0;           // whole nodes, exclusive
  int gpus_per_node = 0;   // 0 = any split (with `nodes`: the node's GPU count)
  // The job comes as pods (or tasks) of `gpus_per_pod` GPUs each: ranks [k*G, (k+1)*G) are
  // pod k's and lie on one node; a node may hold several pods of the job (any multiple of G
  // of its GPUs), unlike gpus_per_node, which fixes the count on every node. 0 = no pods.
  // Divides the GPU count (and gpus_per_node when both are set). Every policy honours it.
  int gpus_per_pod = 0;
  bool exclusive = false;  // nodes are not shared (implied by `nodes`)
  std::string gpu_model;   // empty = any; else a case-insensitive substring of the node type's model
  // A Slurm hostlist ("dgx-[001-004]") of the only nodes the job may use, some or all of
  // them; empty = any node. Pins a job placed by someone else to its node (the Kubernetes
  // lifecycle controller holds the GPUs of pods toposched did not place this way).
  std::string within_nodes;
  // Parallelism; 0 = unspecified (dp defaults to what is left).
  int tp = 1, pp = 1, dp = 0, ep = 1, cp = 1;
  WorkloadKind workload = WorkloadKind::kTraining;
  std::string model_class;  // cost model's workload class; empty = by workload kind
  int replica_gpus = 0;     // inference: GPUs per replica (default tp x pp)
  // Kueue-style: tier name ("node" or a fabric tier name), empty = none.
  std::string required_tier;
  std::string preferred_tier;
  // Kueue PodSet slices (podset-slice-size, podset-slice-required-topology): the pods (one
  // per GPU, or per gpus_per_node GPUs, else per gpus_per_pod GPUs: pod_gpus()) come in
  // slices of `slice_size`, each slice inside one domain of `slice_tier`. Both or neither;
  // the slice tier may not be above the required / preferred tier. Only policies with
  // supports_slices() honour them.
  int slice_size = 0;
  std::string slice_tier;
  // Kueue's TASMultiLayerTopology (podset-slice-required-topology-constraints): further slice
  // layers inside each slice, outermost first, each strictly below the one before and
  // dividing its size (a 16-pod slice per rack made of 4-pod slices per node). Needs
  // slice_size / slice_tier (the outermost layer).
  struct SliceLayer {
    std::string tier;
    int size = 0;
    std::optional<int> tier_index;  // filled by normalize()
  };
  std::vector<SliceLayer> inner_slices;
  // The same layers as front ends send them ("rack:16,node:4", the schema's slice_layer);
  // normalize() parses it into inner_slices when set.
  std::string slice_layers_text;
  // Kueue's podset-unconstrained-topology: no tier constraint, said explicitly (excludes the
  // required / preferred tier). kueue-bestfit then packs the nodes with the least free
  // capacity first; for every other policy it is what no constraint means anyway.
  bool unconstrained = false;
  // Slurm-style.
  int max_switches = 0;    // --switches=N: at most N leaf switches; 0 = no limit
  int segment = 0;         // --segment=N: nodes per segment, each inside one base block
  bool consolidate_segments = false;  // --consolidate-segments: every segment in one block (slurm-block)
  // The Slurm release whose rules slurm-block / slurm-tree follow: "22.05", "24.05", "25.11"
  // or "26.05"; empty = the newest (26.05).
  std::string slurm_version;
  // slurm-block: the BlockSizes of the topology.conf it reads (as `export --to slurm-block
  // --block-sizes`); empty = the sizes that export computes.
  std::vector<long> block_sizes;
  std::string block_sizes_text;  // "18,72" as front ends send it; normalize() fills block_sizes
  std::uint64_t seed = 1;  // for the random policy

  // Filled by normalize().
  int total_gpus = 0;
  std::optional<int> required_tier_index;  // kNodeTier or a fabric tier
  std::optional<int> preferred_tier_index;
  std::optional<int> slice_tier_index;
  int units_per_replica() const { return replica_gpus; }
  // GPUs of one Kueue pod (slices count these): gpus_per_node (one pod per node, a whole
  // number of gpus_per_pod pods), else gpus_per_pod, else 1.
  int pod_gpus() const { return gpus_per_node > 0 ? gpus_per_node : gpus_per_pod > 0 ? gpus_per_pod : 1; }
};

// "TIER:N[,TIER:N...]" into slice layers; "N[,N...]" into block sizes (the schema's text
// forms of inner_slices and block_sizes).
Result<std::vector<JobRequest::SliceLayer>> parse_slice_layers(std::string_view text);
Result<std::vector<long>> parse_block_size_list(std::string_view text);

// Validates `r` against the cluster and fills the derived fields; errors are
// kInvalidArgument with a message a user can act on.
Result<JobRequest> normalize(JobRequest r, const Cluster& cluster);

// True when the node's GPU model satisfies the request's model constraint.
bool model_matches(const JobRequest& r, const Cluster& cluster, NodeId n);

}  // namespace toposched
