// What a pod asks for, in toposched's terms: its GPU count, its parallel plan and workload
// kind, and the gang (pod group) it belongs to, from the labels and annotations users
// already set for Kubernetes' gang schedulers.
//
// GPUs: per container requests["nvidia.com/gpu"], else limits (Kubernetes defaults requests
// of an extended resource to its limits); the pod needs max(sum over containers, largest
// init container), as the kubelet computes a pod's effective request.
// Annotations (all optional; docs/kubernetes.md):
//   toposched.io/tp, pp, dp, ep, cp   parallel degrees of the whole job (group)
//   toposched.io/kind                 training (default) | inference | inference-pd
//   toposched.io/policy               placement policy (default: the server's)
// Gang membership, first match wins:
//   scheduler-plugins  label scheduling.x-k8s.io/pod-group, size = annotation
//                      scheduling.x-k8s.io/min-member (the PodGroup's minMember; also read
//                      as a label or as toposched.io/group-size)
//   Kueue              label (or annotation) kueue.x-k8s.io/pod-group-name, size = annotation
//                      kueue.x-k8s.io/pod-group-total-count
//   Volcano            annotation (or label) scheduling.k8s.io/group-name, size = annotation
//                      toposched.io/group-size (Volcano keeps minMember in its PodGroup object,
//                      which the extender does not read)
//   KAI-Scheduler      annotation pod-group-name (set by KAI's pod-grouper), size = annotation
//                      toposched.io/group-size
//   Kubernetes         annotation toposched.io/pod-group, size = annotation
//                      toposched.io/group-size: Kubernetes' own PodGroup (scheduling.k8s.io,
//                      the pod's spec.schedulingGroup.podGroupName and the PodGroup's
//                      spec.schedulingPolicy.gang.minCount), which the plugin build writes
//                      into the copy of the pod it asks serve about (kube/scheduler)
// Topology level of the whole group, from one scheduler's annotations (two are refused):
//   Kueue              kueue.x-k8s.io/podset-required-topology, -preferred-topology,
//                      -unconstrained-topology, slices (the job schema's rows)
//   KAI-Scheduler      kai.scheduler/topology-required-placement, -preferred-placement
//                      (node labels of the KAI Topology's levels)
//   Volcano            volcano.sh/network-topology-mode (hard | soft) and
//                      volcano.sh/network-topology-highest-tier (a HyperNode spec.tier, as
//                      `export --to volcano` numbers them: formats/volcano.h volcano_tiers)
// KAI's subgroups (PodGroup spec.subGroups, pod label kai.scheduler/subgroup-name) and
// Volcano's partitionPolicy live in PodGroup objects, which are not read: the whole group is
// one gang (docs/kubernetes.md).
// Rank: annotation/label toposched.io/rank, batch.kubernetes.io/job-completion-index,
// apps.kubernetes.io/pod-index, training.kubeflow.org/replica-index,
// leaderworkerset.sigs.k8s.io/worker-index, else the pod name's trailing ordinal ("w-3").
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "k8s/extender_types.h"
#include "placement/job_request.h"
#include "topology/error.h"

namespace toposched::k8s {

inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";

// GPUs the pod needs (0 when it asks for none); kInvalidArgument for a quantity that is not
// a whole, non-negative number.
Result<int> pod_gpu_count(const Pod& pod);

struct GangInfo {
  std::string source;  // "scheduler-plugins" | "kueue" | "volcano" | "kai" | "kubernetes"
  std::string name;    // group name, unique within the namespace
  int size = 0;        // members the group waits for
};

// The pod's group, or nullopt for a single pod; kInvalidArgument when the group is named but
// its size is missing or not a positive integer.
Result<std::optional<GangInfo>> pod_gang(const Pod& pod);

// The pod's rank inside its group (see above), or nullopt.
std::optional<int> pod_rank(const Pod& pod);

// The placement request for the pod's whole job: `members` pods of `gpus_per_pod` GPUs
// each, each member's GPUs on one node (a group: JobRequest::gpus_per_pod, several members
// to a node allowed; a single pod: gpus_per_node), the parallel plan and kind from
// the annotations, and the level the group stays in from one scheduler's annotations (see
// above; Volcano's tier numbers are read on `cluster`). kInvalidArgument for bad annotation
// values, or for topology annotations of two schedulers on one pod.
Result<JobRequest> job_request_for(const Pod& pod, const Cluster& cluster, std::string job_id, int members,
                                   int gpus_per_pod);

// The policy the pod asks for (annotation toposched.io/policy), or `fallback`.
std::string pod_policy(const Pod& pod, const std::string& fallback);

}  // namespace toposched::k8s
