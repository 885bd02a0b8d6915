// Building blocks shared by the placement policies: node eligibility for a request, GPU
// choice inside a node (lowest indices, or the best-connected subset), and tier lookups.
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "placement/allocation_state.h"
#include "placement/job_request.h"
#include "placement/placement.h"

namespace toposched {

inline bool node_allowed(const NodeMask& allowed, NodeId n) { return allowed.empty() || allowed[n.index()]; }

// GPUs this node can contribute to the request right now; 0 when the node is not allowed,
// has another GPU model than the request asks for, or has too few free GPUs. An exclusive
// job takes only a wholly free node, and then all its GPUs (gpus_per_node when fixed); any
// other job takes exactly gpus_per_node when fixed, otherwise every free GPU. With
// gpus_per_pod, a multiple of it (whole pods): the free GPUs rounded down.
int node_capacity(const AllocationState& s, const JobRequest& r, const NodeMask& allowed, NodeId n);

// Capacity from the free-GPU index (AllocationState's buckets): when capacity_indexed(),
// node_capacity() of every node depends only on its bucket (GPU count, free GPUs), so a
// search can read the nodes of the buckets with capacity, and per-switch counts of them
// (switch_bucket_nodes), instead of scanning every node. Not indexed when the request names
// a GPU model or the mask restricts nodes (both depend on the node, not its bucket).
inline bool capacity_indexed(const JobRequest& r, const NodeMask& allowed) {
  return allowed.empty() && r.gpu_model.empty();
}
// node_capacity() of the nodes of bucket b; only meaningful when capacity_indexed().
int bucket_capacity(const AllocationState& s, const JobRequest& r, int b);

// Appends the k lowest-indexed free GPUs of the node.
void take_lowest_free(const AllocationState& s, NodeId n, int k, std::vector<GpuId>& out);

// Slurm 26.05's one-node path (_get_one_res in src/plugins/select/cons_tres/job_test.c,
// 801-870, taken at 1024-1026 for a job of at most one node when the topology plugin allows
// it, as topology/tree and topology/block do): the first node in node order (all node weights
// equal) that can run the job, all the GPUs it can give; a shortage error when none can.
Result<std::vector<GpuId>> first_node_that_fits(const AllocationState& s, const JobRequest& r, const NodeMask& allowed);

// Appends k free GPUs of the node that are best connected to each other: most NVLink pairs
// (then most NVLinks), then the closest PCIe classes (PIX < PXB < PHB < NODE < SYS). Exact
// search over subsets when small, greedy otherwise. Sorted by local index.
void take_best_connected(const AllocationState& s, NodeId n, int k, std::vector<GpuId>& out);

// Pairwise connection score of two GPUs of one node type (higher = closer).
int link_score(const NodeType& t, int a, int b);

// The switch of tier `tier` above the node (invalid when the node has none at that tier).
SwitchId ancestor_at_tier(const AllocationState& s, NodeId n, int tier);

// Switches of a tier, in id order.
std::vector<SwitchId> switches_at_tier(const Cluster& c, int tier);

// Allowed-node mask of the nodes below switch `s`.
NodeMask subtree_mask(const Cluster& c, SwitchId s);

// A value per node for the few nodes one decision touches (GPUs taken, units taken): an
// open-addressing hash table (linear probing) on the node id, so a decision on a 100,000-GPU
// cluster neither allocates per node, as std::unordered_map does, nor clears a per-node
// array. operator[] inserts V{} for a missing node, as std::unordered_map's does; a
// reference it returns stays valid until the next insertion. Iteration order is unspecified
// (callers must not depend on it). Empty until the first insertion (copying an empty map
// allocates nothing). Not thread-safe for writes; one decision owns it.
template <class V>
class NodeMap {
 public:
  // The value of node `n`, V{} when absent (inserts nothing).
  V get(std::uint32_t n) const {
    if (size_ == 0) return V{};
    for (std::size_t i = slot(n);; i = (i + 1) & mask_) {
      if (keys_[i] == n) return values_[i];
      if (keys_[i] == kEmpty) return V{};
    }
  }
  V& operator[](std::uint32_t n) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    for (std::size_t i = slot(n);; i = (i + 1) & mask_) {
      if (keys_[i] == n) return values_[i];
      if (keys_[i] == kEmpty) {
        keys_[i] = n;
        values_[i] = V{};
        ++size_;
        return values_[i];
      }
    }
  }
  std::size_t size() const { return size_; }
  // Calls fn(node, value) for every node present, in unspecified order.
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (std::size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != kEmpty) fn(keys_[i], values_[i]);
  }

 private:
  static constexpr std::uint32_t kEmpty = 0xffffffffu;  // no node has this id (NodeId's invalid value)
  std::size_t slot(std::uint32_t n) const {
    return static_cast<std::size_t>((std::uint64_t{n} * 0x9e3779b97f4a7c15ULL) >> 32) & mask_;
  }
  void grow() {
    std::vector<std::uint32_t> keys = std::move(keys_);
    std::vector<V> values = std::move(values_);
    const std::size_t cap = keys.empty() ? 64 : 2 * keys.size();
    keys_.assign(cap, kEmpty);
    values_.assign(cap, V{});
    mask_ = cap - 1;
    size_ = 0;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty) (*this)[keys[i]] = values[i];
  }
  std::vector<std::uint32_t> keys_;
  std::vector<V> values_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace toposched
