// slurm-tree: the node selection of Slurm's select/cons_tres with topology/tree
// (_eval_nodes_topo in src/plugins/select/cons_tres/job_test.c, Slurm 22.05, the version
// Debian 12 ships and the agreement test runs; src/plugins/topology/tree/eval_nodes_tree.c
// at 26.05.3 for the newer rules), re-implemented from reading it:
//
//  0. 26.05 only: a job of one node (-N 1) takes the first node that fits in node order,
//     whatever the tree (job_test.c 1024-1026 calls _get_one_res: topology/tree's
//     topology_p_allow_one_node returns true since 26.05; 25.11 has no such path).
//  1. Available nodes: whole free nodes for exclusive jobs, nodes with enough free GPUs
//     for --gpus-per-node, nodes with any free GPU for a GPU-count job (--gpus=N).
//  2. Top switch: among switches whose subtree holds enough available nodes, the one of the
//     highest level (the last such in switch order); nodes outside it are dropped.
//  3. Leaves are then chosen one at a time. Every leaf has a distance: the sum of tree hops
//     to the leaves already chosen (0 before the first). A leaf replaces the current best
//     when it is closer and compares at least as well (22.05), or closer and fits (24.05.3
//     and later: eval_nodes_tree.c at 26.05.3, _topo_choose_best_switch, lines 108-136), or
//     equally close and compares better. Comparing two leaves walks up from them while neither "fits" (holds enough
//     available nodes for what remains) and their parents differ: one that fits beats one
//     that does not, of two that fit the one with fewer nodes (tightest) wins; otherwise
//     the one with more available nodes, then the lower level.
//     Since 24.05.3 (commit 2ec1d026, "Properly decrement node count on all switches";
//     eval_nodes_tree.c 756-771 and 1425-1427 at 26.05.3) a chosen leaf's nodes are also
//     taken off the counts of every switch above it, so the parents' counts that the walk
//     compares are the nodes still left under them; 22.05 only zeroes the leaf.
//  4. From the chosen leaf, nodes are taken in node order until the job is satisfied
//     (a GPU-count job takes every free GPU of each node, the last one only what it needs).
//  5. GPU-count jobs (--gpus=N, shared nodes) run steps 1-4 up to three times: first over
//     the nodes that alone hold all N GPUs, then over the nodes whose GPUs are all free, then
//     over every node with a free GPU. This is what the agreement test observed slurmctld
//     22.05 do (a 1-GPU job goes to a partly used node, a 3-GPU job skips a node with 2 free
//     for an idle one, a 20-GPU job skips partly used nodes); the code path behind it (GRES
//     filtering before _eval_nodes_topo) was not traced line by line.
//
// Deliberate differences: Slurm also weighs CPUs and node weights (all equal here, and CPUs
// are assumed plentiful), and --switches is only a wait-time preference in Slurm while it
// is a hard limit here (checked by place()). Ranks follow node order, as srun lays tasks.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "placement/policies/policies.h"
#include "placement/select_util.h"

namespace toposched {
namespace {

class SlurmTree final : public PlacementPolicy {
 public:
  // `may_index`: read the free-GPU index where it gives each node's capacity (the default);
  // false keeps the scan of every node, the reference the indexed search is tested against.
  explicit SlurmTree(bool may_index) : may_index_(may_index) {}
  std::string_view name() const override { return "slurm-tree"; }
  std::string_view summary() const override {
    return "Slurm topology/tree selection (26.05 leaf rule; --slurm-version 22.05: Debian 12's)";
  }

  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    // GPU-count jobs: first only nodes that hold the whole job, then only nodes whose GPUs
    // are all free, then every node with a free GPU (observed slurmctld 22.05 behaviour, see
    // the file comment).
    const bool release_2605 = r.slurm_version.empty() || r.slurm_version == "26.05";
    if (r.nodes == 1 && release_2605) return first_node_that_fits(s, r, allowed);
    const bool indexed = may_index_ && capacity_indexed(r, allowed);
    if (r.nodes == 0 && !r.exclusive) {
      if (auto one = select_pass(s, r, allowed, Pass::kWholeJobOnOneNode, indexed)) return one;
      if (auto idle = select_pass(s, r, allowed, Pass::kIdleNodes, indexed)) return idle;
    }
    return select_pass(s, r, allowed, Pass::kAnyNode, indexed);
  }

 private:
  enum class Pass { kWholeJobOnOneNode, kIdleNodes, kAnyNode };
  bool may_index_;

  // What node n gives the job in this pass (0: not available; nodes without a switch never are).
  static int pass_capacity(const AllocationState& s, const JobRequest& r, const NodeMask& allowed, Pass pass, NodeId n) {
    if (!s.cluster().node_switch(n).valid() || (pass == Pass::kIdleNodes && !s.node_whole_free(n))) return 0;
    const int cap = node_capacity(s, r, allowed, n);
    return pass == Pass::kWholeJobOnOneNode && cap < r.total_gpus ? 0 : cap;
  }
  // The same for every node of bucket b (capacity_indexed requests).
  static int pass_bucket_capacity(const AllocationState& s, const JobRequest& r, Pass pass, int b) {
    if (pass == Pass::kIdleNodes && s.bucket_free(b) != s.bucket_node_gpus(b)) return 0;
    const int cap = bucket_capacity(s, r, b);
    return pass == Pass::kWholeJobOnOneNode && cap < r.total_gpus ? 0 : cap;
  }

  // One pass of Slurm's eval_nodes_tree: the counts of available nodes per switch and the
  // top switch (from a scan of every node, or from the free-GPU index), then the leaves.
  static Result<std::vector<GpuId>> select_pass(const AllocationState& s, const JobRequest& r, const NodeMask& allowed,
                                                Pass pass, bool indexed) {
    const Cluster& c = s.cluster();
    const std::size_t n_sw = c.switch_count();
    const bool gres_per_job = r.nodes == 0;  // --gpus=N without a node count
    const int rem_nodes = gres_per_job ? 1 : r.nodes;
    // Available nodes per switch subtree.
    std::vector<int> count = indexed ? available_indexed(s, r, pass) : available_scan(s, r, allowed, pass);
    // 2. Top switch: highest level with enough nodes.
    int top = -1;
    for (std::size_t j = 0; j < n_sw; ++j) {
      if (count[j] == 0 || count[j] < rem_nodes) continue;
      if (top < 0 || level(c, j) >= level(c, static_cast<std::size_t>(top))) top = static_cast<int>(j);
    }
    if (top < 0) return tl::unexpected(shortage_error(s, r, allowed));
    const SwitchId top_sw(static_cast<std::uint32_t>(top));
    if (!indexed) return restrict_scan(s, r, allowed, pass, top_sw, std::move(count), rem_nodes);
    // Restricted to the top switch's subtree: its switches keep their counts, the switches
    // above it count its nodes, every other switch none (what the scan's recount gives).
    long total_gpus = 0;
    const int total_nodes = count[top_sw.index()];
    for (int b = 0; b < s.bucket_count(); ++b)
      if (const int cap = pass_bucket_capacity(s, r, pass, b); cap > 0)
        total_gpus += static_cast<long>(cap) * s.switch_bucket_nodes(top_sw, b);
    if (total_nodes < rem_nodes || (gres_per_job && total_gpus < r.total_gpus))
      return tl::unexpected(shortage_error(s, r, allowed));
    for (std::size_t j = 0; j < n_sw; ++j)
      if (!below(c, SwitchId(static_cast<std::uint32_t>(j)), top_sw)) count[j] = 0;
    for (SwitchId up = c.switch_parent(top_sw); up.valid(); up = c.switch_parent(up)) count[up.index()] = total_nodes;
    return choose_leaves(s, r, allowed, std::move(count), rem_nodes, true, [&](NodeId n) {
      const auto up = s.node_ancestors(n);
      if (std::find(up.begin(), up.end(), top_sw) == up.end()) return 0;
      return pass_capacity(s, r, allowed, pass, n);
    });
  }

  // The reference: every node's capacity, summed up its ancestors.
  static std::vector<int> available_scan(const AllocationState& s, const JobRequest& r, const NodeMask& allowed, Pass pass) {
    const Cluster& c = s.cluster();
    std::vector<int> count(c.switch_count(), 0);
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      const NodeId n(static_cast<std::uint32_t>(i));
      if (pass_capacity(s, r, allowed, pass, n) > 0)
        for (SwitchId sw : s.node_ancestors(n)) ++count[sw.index()];
    }
    return count;
  }
  // From the index: per switch, its subtree's nodes of the buckets with capacity. O(switches
  // x buckets).
  static std::vector<int> available_indexed(const AllocationState& s, const JobRequest& r, Pass pass) {
    const Cluster& c = s.cluster();
    std::vector<int> live;
    for (int b = 0; b < s.bucket_count(); ++b)
      if (!s.bucket_nodes(b).empty() && pass_bucket_capacity(s, r, pass, b) > 0) live.push_back(b);
    std::vector<int> count(c.switch_count(), 0);
    for (std::size_t j = 0; j < c.switch_count(); ++j)
      for (int b : live) count[j] += static_cast<int>(s.switch_bucket_nodes(SwitchId(static_cast<std::uint32_t>(j)), b));
    return count;
  }
  // True when `sw` is `top` or below it.
  static bool below(const Cluster& c, SwitchId sw, SwitchId top) {
    for (; sw.valid(); sw = c.switch_parent(sw))
      if (sw == top) return true;
    return false;
  }

  // The reference's restriction to the top switch: its available nodes, counted again.
  static Result<std::vector<GpuId>> restrict_scan(const AllocationState& s, const JobRequest& r, const NodeMask& allowed,
                                                  Pass pass, SwitchId top_sw, std::vector<int> count, int rem_nodes) {
    const Cluster& c = s.cluster();
    const bool gres_per_job = r.nodes == 0;
    std::vector<int> cap(c.node_count(), 0);
    long total_gpus = 0;
    int total_nodes = 0;
    for (NodeId n : c.switch_subtree_nodes(top_sw)) {
      cap[n.index()] = pass_capacity(s, r, allowed, pass, n);
      if (cap[n.index()] > 0) {
        total_gpus += cap[n.index()];
        ++total_nodes;
      }
    }
    if (total_nodes < rem_nodes || (gres_per_job && total_gpus < r.total_gpus))
      return tl::unexpected(shortage_error(s, r, allowed));
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t i = 0; i < c.node_count(); ++i)
      if (cap[i] > 0)
        for (SwitchId sw : s.node_ancestors(NodeId(static_cast<std::uint32_t>(i)))) ++count[sw.index()];
    return choose_leaves(s, r, allowed, std::move(count), rem_nodes, false, [&](NodeId n) { return cap[n.index()]; });
  }

  // 3-4: leaves one at a time, nodes of each in node order. `in_top(n)` is what node n gives
  // the job when it is available under the top switch, else 0. The reference (`indexed`
  // false) adds every leaf's hops to the chosen leaf after each choice and passes over every
  // leaf per choice. Indexed, only the leaves that can still be chosen (count > 0: counts
  // only fall, so a leaf that drops out never returns) are visited, in the same id order, and
  // the last choice's hops are added to them in the same pass that compares them; a dropped
  // leaf's distance is never read again.
  template <class InTop>
  static Result<std::vector<GpuId>> choose_leaves(const AllocationState& s, const JobRequest& r, const NodeMask& allowed,
                                                  std::vector<int> count, int rem_nodes, bool indexed, InTop&& in_top) {
    const bool new_leaf_rule = r.slurm_version != "22.05";
    const Cluster& c = s.cluster();
    const std::span<const SwitchId> leaves = s.leaf_switches();
    std::vector<long> dist(c.switch_count(), 0);
    std::vector<int> up_from(c.switch_count(), -1);  // hops from the last chosen leaf up to its ancestors
    std::vector<SwitchId> live;                      // indexed: leaves with count > 0, in id order
    if (indexed)
      for (SwitchId leaf : leaves)
        if (count[leaf.index()] > 0) live.push_back(leaf);
    SwitchId last;  // indexed: the previous choice, whose hops are not added yet
    std::vector<std::pair<NodeId, int>> picked;  // node, its capacity
    int need_gpus = r.total_gpus;
    int prev_rem = rem_nodes + 1;
    while (prev_rem != rem_nodes) {
      prev_rem = rem_nodes;
      int best = -1;
      auto consider = [&](SwitchId leaf) {
        const std::size_t i = leaf.index();
        if (best < 0) {
          best = static_cast<int>(i);
          return;
        }
        bool i_fit = false;
        int cmp = compare(c, i, static_cast<std::size_t>(best), rem_nodes, count, i_fit);
        const long di = dist[i], db = dist[static_cast<std::size_t>(best)];
        // 22.05 (job_test.c _topo_choose_best_switch): closer and compares at least as well.
        // 24.05.3+ (26.05.3 eval_nodes_tree.c 128-129): closer and fits (the fit of the last
        // switches _topo_compare_switches looked at), whatever the comparison says.
        const bool closer = new_leaf_rule ? (di < db && i_fit) : (di < db && cmp >= 0);
        if (closer || (di == db && cmp > 0)) best = static_cast<int>(i);
      };
      if (indexed) {
        mark_chain(c, last, up_from, true);
        std::size_t keep = 0;
        for (SwitchId leaf : live) {
          if (last.valid()) dist[leaf.index()] += marked_hops(c, leaf, up_from);
          if (count[leaf.index()] == 0) continue;
          live[keep++] = leaf;
          consider(leaf);
        }
        live.resize(keep);
        mark_chain(c, last, up_from, false);
      } else {
        for (SwitchId leaf : leaves)
          if (count[leaf.index()] != 0) consider(leaf);
      }
      if (best < 0) break;
      SwitchId chosen(static_cast<std::uint32_t>(best));
      if (indexed)
        last = chosen;
      else
        for (SwitchId leaf : leaves) dist[leaf.index()] += hops(c, chosen, leaf);
      // A leaf is chosen once (its count is zeroed below), so no node is taken twice.
      for (NodeId n : c.switch_nodes(chosen)) {
        const int cap = in_top(n);
        if (cap <= 0) continue;
        picked.emplace_back(n, cap);
        need_gpus -= cap;
        --rem_nodes;
        if (rem_nodes <= 0 && need_gpus <= 0) return hand_out(s, r, std::move(picked));
      }
      if (new_leaf_rule) take_off_ancestors(c, chosen, count);
      count[chosen.index()] = 0;
    }
    return tl::unexpected(shortage_error(s, r, allowed));
  }

  // GPUs are handed out in node order, each node giving all it has until the job has enough
  // (as Slurm's GRES allocation does); a node left with none drops out.
  static std::vector<GpuId> hand_out(const AllocationState& s, const JobRequest& r,
                                     std::vector<std::pair<NodeId, int>> picked) {
    std::sort(picked.begin(), picked.end());
    std::vector<GpuId> out;
    int left = r.total_gpus;
    for (auto [p, p_cap] : picked) {
      const int take = r.nodes == 0 ? std::min(p_cap, left) : p_cap;
      take_lowest_free(s, p, take, out);
      left -= take;
    }
    return out;
  }

  // Marks (or unmarks) the switches above `leaf`, itself included, with their hops from it.
  static void mark_chain(const Cluster& c, SwitchId leaf, std::vector<int>& up_from, bool on) {
    int up = 0;
    for (SwitchId x = leaf; x.valid(); x = c.switch_parent(x)) up_from[x.index()] = on ? up++ : -1;
  }
  // hops(marked leaf, leaf): the first of the leaf's ancestors (itself included) that is
  // marked is their lowest common one, which is where hops() meets.
  static long marked_hops(const Cluster& c, SwitchId leaf, const std::vector<int>& up_from) {
    long up = 0;
    for (SwitchId y = leaf; y.valid(); y = c.switch_parent(y), ++up)
      if (up_from[y.index()] >= 0) return up_from[y.index()] + up;
    return std::numeric_limits<int>::max() / 4;  // different roots: unreachable
  }

  // _decrement_node_cnt (24.05.3+): the leaf's nodes, all taken, leave its ancestors' counts.
  static void take_off_ancestors(const Cluster& c, SwitchId leaf, std::vector<int>& count) {
    const int taken = count[leaf.index()];
    for (SwitchId up = c.switch_parent(leaf); up.valid(); up = c.switch_parent(up))
      count[up.index()] = std::max(0, count[up.index()] - taken);
  }

  static int level(const Cluster& c, std::size_t sw) { return c.switch_tier(SwitchId(static_cast<std::uint32_t>(sw))); }

  // Tree hops between two switches (through their lowest common ancestor). The reference.
  static long hops(const Cluster& c, SwitchId a, SwitchId b) {
    if (a == b) return 0;
    long up_a = 0;
    for (SwitchId x = a; x.valid(); x = c.switch_parent(x), ++up_a) {
      long up_b = 0;
      for (SwitchId y = b; y.valid(); y = c.switch_parent(y), ++up_b)
        if (x == y) return up_a + up_b;
    }
    return std::numeric_limits<int>::max() / 4;  // different roots: unreachable
  }

  // > 0 when switch i is a better choice than j (Slurm's _topo_compare_switches).
  // `i_fit` is left as the last fit of i's side that the walk computed (Slurm's i_fit_out).
  static int compare(const Cluster& c, std::size_t i, std::size_t j, int rem_nodes, const std::vector<int>& count,
                     bool& i_fit_out) {
    while (true) {
      const bool i_fit = count[i] >= rem_nodes;
      i_fit_out = i_fit;
      const bool j_fit = count[j] >= rem_nodes;
      if (i_fit && j_fit) {
        if (count[i] < count[j]) return 1;
        if (count[i] > count[j]) return -1;
        break;
      }
      if (i_fit) return 1;
      if (j_fit) return -1;
      // A root is its own parent, as in Slurm's switch table.
      SwitchId up_i = c.switch_parent(SwitchId(static_cast<std::uint32_t>(i)));
      SwitchId up_j = c.switch_parent(SwitchId(static_cast<std::uint32_t>(j)));
      const std::size_t pi = up_i.valid() ? up_i.index() : i;
      const std::size_t pj = up_j.valid() ? up_j.index() : j;
      if ((pi != i || pj != j) && pi != pj) {
        i = pi;
        j = pj;
        continue;
      }
      break;
    }
    if (count[i] > count[j]) return 1;
    if (count[i] < count[j]) return -1;
    if (level(c, i) < level(c, j)) return 1;
    if (level(c, i) > level(c, j)) return -1;
    return 0;
  }
};

}  // namespace

const PlacementPolicy& slurm_tree_policy() {
  static const SlurmTree p(true);
  return p;
}

const PlacementPolicy& slurm_tree_scan_policy() {
  static const SlurmTree p(false);
  return p;
}

}  // namespace toposched
