// random: uniformly random free GPUs (or random eligible nodes for whole-node and
// per-node requests), reproducible from the request's seed. Ranks follow node order.
#include <algorithm>
#include <random>

#include "placement/policies/policies.h"
#include "placement/select_util.h"

namespace toposched {
namespace {

class RandomPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "random"; }
  std::string_view summary() const override { return "random free GPUs, seeded"; }
  bool fits_any_free_gpus() const override { return true; }
  bool randomized() const override { return true; }
  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    const Cluster& c = s.cluster();
    std::mt19937_64 rng(r.seed);
    std::vector<GpuId> out;
    if (r.exclusive || r.gpus_per_node > 0) {
      std::vector<NodeId> nodes;
      for (std::size_t i = 0; i < c.node_count(); ++i) {
        NodeId n(static_cast<std::uint32_t>(i));
        if (node_capacity(s, r, allowed, n) > 0) nodes.push_back(n);
      }
      if (static_cast<int>(nodes.size()) < r.nodes) return tl::unexpected(shortage_error(s, r, allowed));
      std::shuffle(nodes.begin(), nodes.end(), rng);
      nodes.resize(static_cast<std::size_t>(r.nodes));
      std::sort(nodes.begin(), nodes.end());
      for (NodeId n : nodes) {
        std::vector<GpuId> free;
        take_lowest_free(s, n, c.node_gpu_count(n), free);
        std::shuffle(free.begin(), free.end(), rng);
        free.resize(static_cast<std::size_t>(r.gpus_per_node));
        std::sort(free.begin(), free.end());
        out.insert(out.end(), free.begin(), free.end());
      }
      return out;
    }
    if (r.gpus_per_pod > 0) return random_pods(s, r, allowed, rng);
    std::vector<GpuId> free;
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      NodeId n(static_cast<std::uint32_t>(i));
      if (node_capacity(s, r, allowed, n) > 0) take_lowest_free(s, n, c.node_gpu_count(n), free);
    }
    if (static_cast<int>(free.size()) < r.total_gpus) return tl::unexpected(shortage_error(s, r, allowed));
    // Partial Fisher-Yates: the first total_gpus entries become a uniform sample.
    for (std::size_t i = 0; i < static_cast<std::size_t>(r.total_gpus); ++i) {
      std::uniform_int_distribution<std::size_t> pick(i, free.size() - 1);
      std::swap(free[i], free[pick(rng)]);
    }
    free.resize(static_cast<std::size_t>(r.total_gpus));
    std::sort(free.begin(), free.end());
    return free;
  }

 private:
  // Pods of gpus_per_pod GPUs: a uniform draw of pod slots (a node's whole pods' worth of
  // free GPUs), then on each node as many random free GPUs as its pods need; rank order by
  // GPU id, so each pod's ranks lie on one node.
  static Result<std::vector<GpuId>> random_pods(const AllocationState& s, const JobRequest& r, const NodeMask& allowed,
                                                std::mt19937_64& rng) {
    const Cluster& c = s.cluster();
    std::vector<NodeId> slots;  // one entry per pod a node can hold
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      NodeId n(static_cast<std::uint32_t>(i));
      slots.insert(slots.end(), static_cast<std::size_t>(node_capacity(s, r, allowed, n) / r.gpus_per_pod), n);
    }
    const std::size_t pods = static_cast<std::size_t>(r.total_gpus / r.gpus_per_pod);
    if (slots.size() < pods) return tl::unexpected(shortage_error(s, r, allowed));
    for (std::size_t i = 0; i < pods; ++i) {
      std::uniform_int_distribution<std::size_t> pick(i, slots.size() - 1);
      std::swap(slots[i], slots[pick(rng)]);
    }
    slots.resize(pods);
    std::sort(slots.begin(), slots.end());
    std::vector<GpuId> out;
    for (std::size_t i = 0; i < slots.size();) {
      const NodeId n = slots[i];
      std::size_t k = 0;
      for (; i < slots.size() && slots[i] == n; ++i) ++k;
      std::vector<GpuId> free;
      take_lowest_free(s, n, c.node_gpu_count(n), free);
      std::shuffle(free.begin(), free.end(), rng);
      free.resize(k * static_cast<std::size_t>(r.gpus_per_pod));
      std::sort(free.begin(), free.end());
      out.insert(out.end(), free.begin(), free.end());
    }
    return out;
  }
};

}  // namespace

const PlacementPolicy& random_policy() {
  static const RandomPolicy p;
  return p;
}

}  // namespace toposched
