// AllocationState: which job owns each GPU of a Cluster, with incremental free counters.
//
// Counters kept up to date on every allocate/release: free GPUs per node, per switch (whole
// subtree, every tier) and per accelerator domain, and the number of wholly free nodes
// under each switch and in each domain. allocate/release cost O(GPUs x tree depth); all
// other queries are O(1).
//
// Free-GPU index (for searches that must not scan every node, docs/design.md "Free-GPU
// index"): every node sits in one bucket, keyed by (its GPU count, its free GPUs); each
// bucket lists its nodes (in no particular order), and every switch counts the nodes of its
// subtree per bucket. Kept up to date in the same O(tree depth) step as the counters. A job is allocated all at once (gang): allocate() either takes
// every GPU it is given or changes nothing.
//
// Invariants (check_invariants() recomputes them from the owners): every counter equals
// the count derived from the per-GPU owners (the index included: each node is listed once,
// in the bucket of its free GPUs, at the position its NodeCell records); every job's GPU list holds exactly the GPUs
// whose owner is that job; no GPU has two owners (structural: one owner slot per GPU).
//
// The state refers to its Cluster by pointer: the Cluster must outlive it (and, being a
// built Cluster, never changes under it: the per-switch totals and the index are derived
// from it once). cluster_key() names that cluster for caches of values derived from the
// cluster alone (policies' domain trees and block tables, the ideal placement's estimate).
// Copying is the
// snapshot (snapshot()/restore() are O(GPUs + switches)). Not thread-safe for writes;
// concurrent const queries are fine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

class AllocationState {
 public:
  // Index of a job inside the state; 0 means "free".
  using JobSlot = std::uint32_t;
  static constexpr JobSlot kFree = 0;

  explicit AllocationState(const Cluster& cluster);

  const Cluster& cluster() const { return *cluster_; }
  // Identifies cluster() for caches: drawn from a process-wide counter when the state is
  // constructed, never reused, and carried by copies (snapshot, restore, assignment) along
  // with the cluster pointer. Two states constructed on one cluster get different keys, so
  // a cache keyed by it may miss; it never hands one cluster's value to another.
  std::uint64_t cluster_key() const { return cluster_key_; }
  // Names this state's content, for caches of values derived from it (a policy's counts
  // per block over one backfill pass, where most decisions fail and change nothing): drawn
  // from a process-wide counter at construction and by every allocate/release that changes
  // the state, and carried by copies. Equal stamps therefore mean equal content (owners,
  // counters and index); a change never gives back an earlier stamp.
  std::uint64_t stamp() const { return stamp_; }

  // Gives `gpus` to job `job_id` (a new, non-empty id). Fails without changing anything if a
  // GPU is out of range, repeated, or already owned, or if the job id is already in use.
  // `order` is the job's position in job_ids(): 0 puts it after every job; a job_order() a
  // released job had puts it back where it was (undoing a release, placement/engine.h).
  Result<void> allocate(std::string_view job_id, std::span<const GpuId> gpus, std::uint64_t order = 0);
  // Frees every GPU of the job; returns them in the order they were allocated.
  Result<std::vector<GpuId>> release(std::string_view job_id);

  bool gpu_free(GpuId g) const { return gpu_cell_[g.index()].owner == kFree; }
  // Job id owning the GPU, or empty when free.
  std::string_view gpu_owner(GpuId g) const;

  int free_gpus(NodeId n) const { return node_free_[n.index()]; }
  bool node_whole_free(NodeId n) const { return node_free_[n.index()] == cluster_->node_gpu_count(n); }
  std::int64_t switch_free_gpus(SwitchId s) const { return switch_free_gpus_[s.index()]; }
  std::int64_t switch_free_nodes(SwitchId s) const { return switch_free_nodes_[s.index()]; }
  std::int64_t switch_total_gpus(SwitchId s) const { return switch_total_gpus_[s.index()]; }
  std::int64_t domain_free_gpus(DomainId d) const { return domain_free_gpus_[d.index()]; }
  std::int64_t domain_free_nodes(DomainId d) const { return domain_free_nodes_[d.index()]; }
  std::int64_t domain_total_gpus(DomainId d) const { return domain_total_gpus_[d.index()]; }
  std::int64_t total_free_gpus() const { return total_free_gpus_; }
  std::int64_t total_free_nodes() const { return total_free_nodes_; }

  // Free-GPU index. Buckets are numbered 0..bucket_count()-1; bucket b holds the nodes of
  // bucket_node_gpus(b) GPUs that have bucket_free(b) of them free.
  int bucket_count() const { return static_cast<int>(bucket_nodes_.size()); }
  int bucket_free(int b) const { return b % bucket_width_; }
  int bucket_node_gpus(int b) const { return bucket_gpus_[static_cast<std::size_t>(b / bucket_width_)]; }
  int node_bucket(NodeId n) const {
    return node_cell_[n.index()].slot * bucket_width_ + node_free_[n.index()];
  }
  // The nodes of a bucket, in no particular order (it changes with every allocate/release).
  std::span<const NodeId> bucket_nodes(int b) const { return bucket_nodes_[static_cast<std::size_t>(b)]; }
  // Nodes of bucket b below switch s (whole subtree).
  std::int64_t switch_bucket_nodes(SwitchId s, int b) const {
    return switch_bucket_nodes_[s.index() * bucket_nodes_.size() + static_cast<std::size_t>(b)];
  }
  // Nodes attached to no switch, in node order.
  std::span<const NodeId> switchless_nodes() const { return switchless_nodes_; }
  // Switches with nodes attached (leaves of the tree, whatever their tier), in id order.
  std::span<const SwitchId> leaf_switches() const { return leaf_switches_; }

  // Switches above the node, leaf first (the node's switch, its parent, ...): the chain of
  // the node's switch, kept once per switch rather than once per node.
  std::span<const SwitchId> node_ancestors(NodeId n) const { return switch_chain(node_cell_[n.index()].leaf); }

  // Jobs, in allocation order.
  std::vector<std::string> job_ids() const;
  bool has_job(std::string_view job_id) const { return job_index_.contains(std::string(job_id)); }
  // GPUs of the job in allocation (rank) order; empty when unknown.
  std::span<const GpuId> job_gpus(std::string_view job_id) const;
  std::size_t job_count() const { return job_index_.size(); }
  // The job's allocation sequence number (job_ids() sorts by it); 0 when unknown.
  std::uint64_t job_order(std::string_view job_id) const;

  // Snapshot = a copy; restore puts the copy back (both O(state size)).
  AllocationState snapshot() const { return *this; }
  void restore(const AllocationState& snap) { *this = snap; }

  // Recomputes every counter from the owners; describes the first mismatch.
  Result<void> check_invariants() const;

  // Counter equality (used by tests: a release restores the exact prior counters).
  bool same_counters(const AllocationState& other) const;

 private:
  void adjust(NodeId n, int delta_gpus);
  std::size_t node_run(NodeId n, std::span<const GpuId> gpus) const;
  // Asks the CPU for the lines allocate/release will touch a few nodes ahead of gpus[i]
  // (the GPUs of a multi-node job are spread over the arrays, one cache miss each).
  void prefetch_gpu(std::span<const GpuId> gpus, std::size_t i) const;
  void prefetch_node(std::span<const GpuId> gpus, std::size_t i) const;
  void build_switch_chains();

  const Cluster* cluster_;
  std::uint64_t cluster_key_;                   // see cluster_key()
  std::uint64_t stamp_;                         // see stamp()
  // Per GPU: its owner, and its node (a copy of the Cluster's, kept beside the owner so that
  // allocate/release find both in one cache line).
  struct GpuCell {
    JobSlot owner = kFree;
    NodeId node;
  };
  std::vector<GpuCell> gpu_cell_;
  std::vector<int> node_free_;                  // per node
  std::vector<std::int64_t> switch_free_gpus_;  // per switch, whole subtree
  std::vector<std::int64_t> switch_free_nodes_;
  std::vector<std::int64_t> switch_total_gpus_;
  std::vector<std::int64_t> domain_free_gpus_;
  std::vector<std::int64_t> domain_free_nodes_;
  std::vector<std::int64_t> domain_total_gpus_;
  std::int64_t total_free_gpus_ = 0;
  std::int64_t total_free_nodes_ = 0;
  // What allocate/release read of a node, packed so that moving a node costs one cache line
  // here (plus its free counter and its GPUs' owners) instead of one per array: the node's
  // switch (the first of its ancestors), domain, first GPU, GPU count, GPU-count slot of the
  // free-GPU index and its position in its bucket's list.
  struct NodeCell {
    std::uint32_t first_gpu = 0;
    std::uint32_t bucket_pos = 0;
    SwitchId leaf;
    DomainId domain;
    std::uint8_t gpus = 0;
    std::uint8_t slot = 0;
  };
  std::vector<NodeCell> node_cell_;  // per node
  // Per switch: itself and the switches above it, leaf first, in chain_[chain_begin_[s] ..
  // chain_begin_[s + 1]); the entry after the last switch is the empty chain of switchless
  // nodes (their NodeCell::leaf is invalid).
  std::vector<std::uint32_t> chain_begin_;
  std::vector<SwitchId> chain_;
  std::span<const SwitchId> switch_chain(SwitchId s) const {
    const std::size_t i = s.valid() ? s.index() : chain_begin_.size() - 2;
    return {chain_.data() + chain_begin_[i], chain_begin_[i + 1] - chain_begin_[i]};
  }

  // Free-GPU index (see the top of this file).
  int bucket_width_ = 1;                          // largest node GPU count + 1
  std::vector<int> bucket_gpus_;                  // per GPU-count slot: the node GPU count
  std::vector<std::vector<NodeId>> bucket_nodes_;  // per bucket, unordered
  // Per switch x bucket. 32 bits (a switch has fewer than 2^31 nodes) so that a switch's row
  // for 8-GPU nodes (9 buckets) fits one cache line.
  std::vector<std::int32_t> switch_bucket_nodes_;
  std::vector<NodeId> switchless_nodes_;
  std::vector<SwitchId> leaf_switches_;
  void build_index();
  void move_bucket(NodeId n, int from, int to);
  // Every node is listed at its recorded position in the bucket `o` puts it in.
  bool same_buckets(const AllocationState& o) const;

  // Job table: slot 0 is unused ("free"); released slots are recycled.
  std::vector<std::string> job_name_;
  std::vector<std::vector<GpuId>> job_gpus_;
  std::vector<std::uint64_t> job_order_;  // allocation sequence number per slot
  std::vector<JobSlot> free_slots_;
  std::unordered_map<std::string, JobSlot> job_index_;
  std::uint64_t next_order_ = 0;
};

}  // namespace toposched
