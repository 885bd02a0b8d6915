// slurm-block: Slurm's topology/block as documented (topology.conf(5) BlockName/BlockSizes,
// the Topology Guide's "block" section; Slurm 23.11+), re-implemented from the
// documentation, not from the code:
//
//  - Base blocks are the accelerator domains when the cluster has any (one NVL72 rack each),
//    otherwise the leaf switches. Higher block levels join 2, 4, 8, ... consecutive base
//    blocks (the default BlockSizes), aligned to their size.
//  - A job goes to the smallest block level that can hold it, and at that level to the
//    block with the least free capacity that still fits (best fit).
//  - Inside the block, base blocks are filled best fit as well: the tightest base block that
//    holds what remains, else the fullest-free one first; nodes in node order.
//  - --segment=N: the job is split into segments of N nodes; each segment lies entirely in
//    one base block.
// Nodes outside every base block are not used, as in Slurm. Ranks follow node order.
#include <algorithm>

#include <fmt/format.h>

#include "placement/policies/policies.h"
#include "placement/select_util.h"

namespace toposched {
namespace {

class SlurmBlock final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "slurm-block"; }
  std::string_view summary() const override { return "Slurm topology/block: smallest block level, best fit, segments"; }
  bool supports_segments() const override { return true; }

  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    const Cluster& c = s.cluster();
    std::vector<const std::vector<NodeId>*> blocks;
    if (c.domain_count() > 0) {
      for (std::size_t d = 0; d < c.domain_count(); ++d)
        blocks.push_back(&c.domain_nodes(DomainId(static_cast<std::uint32_t>(d))));
    } else {
      for (std::size_t i = 0; i < c.switch_count(); ++i) {
        SwitchId sw(static_cast<std::uint32_t>(i));
        if (!c.switch_nodes(sw).empty()) blocks.push_back(&c.switch_nodes(sw));
      }
    }
    if (blocks.empty())
      return make_error(ErrorCode::kInfeasible,
                        "the cluster has no blocks (no accelerator domains and no leaf switches)");
    // Capacity per base block, in "units": nodes for node-count jobs (segments of nodes with
    // --segment), GPUs for GPU-count jobs.
    const bool by_nodes = r.nodes > 0;
    const int seg = r.segment > 0 ? r.segment : 1;
    const long need = by_nodes ? r.nodes / seg : r.total_gpus;
    std::vector<long> cap(blocks.size(), 0);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      long nodes = 0, gpus = 0;
      for (NodeId n : *blocks[b]) {
        int k = node_capacity(s, r, allowed, n);
        if (k > 0) {
          ++nodes;
          gpus += k;
        }
      }
      cap[b] = by_nodes ? nodes / seg : gpus;
    }
    // Smallest level (block of 2^k base blocks) with a block that fits; best fit there.
    std::size_t width = 1;
    long largest = 0;
    while (true) {
      long best_cap = -1;
      std::size_t best_start = 0;
      for (std::size_t start = 0; start < blocks.size(); start += width) {
        long sum = 0;
        for (std::size_t b = start; b < std::min(blocks.size(), start + width); ++b) sum += cap[b];
        if (width == 1) largest = std::max(largest, sum);
        if (sum >= need && (best_cap < 0 || sum < best_cap)) {
          best_cap = sum;
          best_start = start;
        }
      }
      if (best_cap >= 0)
        return fill(s, r, allowed, blocks, cap, best_start, std::min(blocks.size(), best_start + width), need, seg);
      if (width >= blocks.size()) break;
      width *= 2;
    }
    std::string unit = by_nodes ? (r.segment > 0 ? fmt::format("segments of {} nodes", seg) : "nodes") : "GPUs";
    return make_error(ErrorCode::kInfeasible,
                      fmt::format("needs {} {} in one block; all blocks together have fewer free "
                                  "(the largest base block has {})",
                                  need, unit, largest));
  }

 private:
  static Result<std::vector<GpuId>> fill(const AllocationState& s, const JobRequest& r, const NodeMask& allowed,
                                         const std::vector<const std::vector<NodeId>*>& blocks, std::vector<long> cap,
                                         std::size_t begin, std::size_t end, long need, int seg) {
    std::vector<GpuId> out;
    int need_gpus = r.total_gpus;
    while (need > 0) {
      // Tightest base block holding the rest, else the one with the most capacity.
      std::size_t pick = end;
      for (std::size_t b = begin; b < end; ++b) {
        if (cap[b] == 0) continue;
        if (pick == end) {
          pick = b;
          continue;
        }
        const bool fits = cap[b] >= need, pick_fits = cap[pick] >= need;
        if ((fits && !pick_fits) || (fits && pick_fits && cap[b] < cap[pick]) ||
            (!fits && !pick_fits && cap[b] > cap[pick]))
          pick = b;
      }
      if (pick == end) break;
      long take_units = std::min(cap[pick], need);
      int take_nodes = r.nodes > 0 ? static_cast<int>(take_units) * seg : 0;
      for (NodeId n : *blocks[pick]) {
        int k = node_capacity(s, r, allowed, n);
        if (k == 0) continue;
        if (r.nodes > 0) {
          if (take_nodes == 0) break;
          take_lowest_free(s, n, k, out);
          --take_nodes;
        } else {
          if (need_gpus == 0) break;
          int t = std::min(k, need_gpus);
          take_lowest_free(s, n, t, out);
          need_gpus -= t;
        }
      }
      need -= take_units;
      cap[pick] = 0;
    }
    if (need > 0) return make_error(ErrorCode::kInfeasible, "block ran out of capacity while filling");
    std::sort(out.begin(), out.end());
    return out;
  }
};

}  // namespace

const PlacementPolicy& slurm_block_policy() {
  static const SlurmBlock p;
  return p;
}

}  // namespace toposched
