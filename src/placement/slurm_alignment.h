// Slurm alignment: a placement that Slurm carries out exactly as chosen.
//
// sbatch cannot name GPU indices, and Slurm's select/cons_tres gives a job the lowest free
// GPU indices of each node it runs on (gres.conf without Cores=/Links=; measured on real
// slurmd daemons, docs/slurm.md). A plan for `toposched slurm submit` therefore takes those
// indices on every node the policy chose, keeping the rank pattern the policy chose; when
// nodes then differ in their index lists and some list is not ascending, --gpu-bind=map_gpu
// cannot express it and ranks go in ascending GPU order.
//
// It is a request option (PlaceRequest::slurm_aligned) that place_job honours by running
// the request's policy through SlurmAlignedPolicy, so no front end calls a policy itself;
// place() then checks the aligned GPUs and derives the plan (prediction, spans) from them.
// Pure functions and a stateless policy wrapper; thread-safe on distinct or read-only states.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "placement/placement.h"

namespace toposched {

// The ranks on each node, nodes in first-rank order.
std::vector<std::pair<NodeId, std::vector<std::size_t>>> ranks_by_node(const Cluster& c, std::span<const GpuId> gpus);
// Node-local GPU indices of each node (in first-rank order), each in rank order.
std::vector<std::vector<int>> local_sequences(const Cluster& c, std::span<const GpuId> gpus);

// `gpus` (rank order) moved onto the lowest free GPUs of their nodes in `state`, as above.
std::vector<GpuId> align_to_slurm(const AllocationState& state, std::vector<GpuId> gpus);

// A policy as Slurm can carry it out: the inner policy's choice, aligned by align_to_slurm.
// Everything else (name, tier and segment support) is the inner policy's.
class SlurmAlignedPolicy final : public PlacementPolicy {
 public:
  explicit SlurmAlignedPolicy(const PlacementPolicy& inner) : inner_(inner) {}
  std::string_view name() const override { return inner_.name(); }
  std::string_view summary() const override { return inner_.summary(); }
  bool handles_tier_constraints() const override { return inner_.handles_tier_constraints(); }
  bool supports_segments() const override { return inner_.supports_segments(); }
  bool supports_slices() const override { return inner_.supports_slices(); }
  bool randomized() const override { return inner_.randomized(); }
  Result<std::vector<GpuId>> select(const AllocationState& state, const JobRequest& request,
                                    const NodeMask& allowed) const override;

 private:
  const PlacementPolicy& inner_;
};

}  // namespace toposched
