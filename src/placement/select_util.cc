#include "placement/select_util.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "placement/policies/policies.h"

namespace toposched {

int node_capacity(const AllocationState& s, const JobRequest& r, const NodeMask& allowed, NodeId n) {
  if (!node_allowed(allowed, n) || !model_matches(r, s.cluster(), n)) return 0;
  const int free = s.free_gpus(n);
  // Whole pods only: a multiple of gpus_per_pod (gpus_per_node, when set, is one).
  const int whole_pods = r.gpus_per_pod > 0 ? free - free % r.gpus_per_pod : free;
  if (r.exclusive) {
    if (!s.node_whole_free(n)) return 0;
    return r.gpus_per_node > 0 ? (s.cluster().node_gpu_count(n) >= r.gpus_per_node ? r.gpus_per_node : 0) : whole_pods;
  }
  if (r.gpus_per_node > 0) return free >= r.gpus_per_node ? r.gpus_per_node : 0;
  return whole_pods;
}

int bucket_capacity(const AllocationState& s, const JobRequest& r, int b) {
  const int free = s.bucket_free(b), all = s.bucket_node_gpus(b);
  if (r.exclusive) {
    if (free != all) return 0;
    return r.gpus_per_node > 0 ? (all >= r.gpus_per_node ? r.gpus_per_node : 0) : free;
  }
  if (r.gpus_per_node > 0) return free >= r.gpus_per_node ? r.gpus_per_node : 0;
  return free;
}

void take_lowest_free(const AllocationState& s, NodeId n, int k, std::vector<GpuId>& out) {
  const Cluster& c = s.cluster();
  for (int l = 0, n_gpus = c.node_gpu_count(n); l < n_gpus && k > 0; ++l) {
    GpuId g = c.node_gpu(n, l);
    if (s.gpu_free(g)) {
      out.push_back(g);
      --k;
    }
  }
}

Result<std::vector<GpuId>> first_node_that_fits(const AllocationState& s, const JobRequest& r, const NodeMask& allowed) {
  for (std::size_t i = 0; i < s.cluster().node_count(); ++i) {
    const NodeId n(static_cast<std::uint32_t>(i));
    const int k = node_capacity(s, r, allowed, n);
    if (k == 0) continue;
    std::vector<GpuId> out;
    take_lowest_free(s, n, k, out);
    return out;
  }
  return tl::unexpected(shortage_error(s, r, allowed));
}

int link_score(const NodeType& t, int a, int b) {
  const GpuLink& l = t.link(a, b);
  switch (l.cls) {
    case LinkClass::kSelf:
      return 0;
    case LinkClass::kNVLink:
      return 1000 + 10 * l.nvlinks;
    case LinkClass::kPix:
      return 50;
    case LinkClass::kPxb:
      return 40;
    case LinkClass::kPhb:
      return 30;
    case LinkClass::kNode:
      return 20;
    case LinkClass::kSys:
      return 0;
  }
  return 0;
}

void take_best_connected(const AllocationState& s, NodeId n, int k, std::vector<GpuId>& out) {
  const Cluster& c = s.cluster();
  const NodeType& t = c.node_type(n);
  const int count = t.gpu_count;
  std::vector<int> free;
  for (int l = 0; l < count; ++l)
    if (s.gpu_free(c.node_gpu(n, l))) free.push_back(l);
  if (k <= 0) return;
  if (k >= static_cast<int>(free.size()) || t.nvswitch || k == 1) {
    // Every subset is equally connected on an NVSwitch baseboard; lowest indices then.
    for (int i = 0; i < k && i < static_cast<int>(free.size()); ++i)
      out.push_back(c.node_gpu(n, free[static_cast<std::size_t>(i)]));
    return;
  }
  auto subset_score = [&](const std::vector<int>& pick) {
    long score = 0;
    for (std::size_t i = 0; i < pick.size(); ++i)
      for (std::size_t j = i + 1; j < pick.size(); ++j) score += link_score(t, pick[i], pick[j]);
    return score;
  };
  const int m = static_cast<int>(free.size());
  std::vector<int> best;
  if (m <= 16) {
    // Exact: every k-subset of the free GPUs (at most C(16,8) = 12,870).
    long best_score = -1;
    std::vector<int> pick;
    for (std::uint32_t mask = 0; mask < (1u << m); ++mask) {
      if (std::popcount(mask) != k) continue;
      pick.clear();
      for (int i = 0; i < m; ++i)
        if (mask & (1u << i)) pick.push_back(free[static_cast<std::size_t>(i)]);
      long sc = subset_score(pick);
      if (sc > best_score) {
        best_score = sc;
        best = pick;
      }
    }
  } else {
    // Greedy: start from the best pair, add the GPU that adds the most.
    best = {free[0]};
    std::vector<char> used(static_cast<std::size_t>(count), 0);
    used[static_cast<std::size_t>(free[0])] = 1;
    while (static_cast<int>(best.size()) < k) {
      int pick = -1;
      long pick_score = -1;
      for (int g : free) {
        if (used[static_cast<std::size_t>(g)]) continue;
        long sc = 0;
        for (int b : best) sc += link_score(t, g, b);
        if (sc > pick_score) {
          pick_score = sc;
          pick = g;
        }
      }
      used[static_cast<std::size_t>(pick)] = 1;
      best.push_back(pick);
    }
    std::sort(best.begin(), best.end());
  }
  for (int l : best) out.push_back(c.node_gpu(n, l));
}

SwitchId ancestor_at_tier(const AllocationState& s, NodeId n, int tier) {
  for (SwitchId sw : s.node_ancestors(n))
    if (s.cluster().switch_tier(sw) == tier) return sw;
  return SwitchId();
}

std::vector<SwitchId> switches_at_tier(const Cluster& c, int tier) {
  std::vector<SwitchId> out;
  for (std::size_t i = 0; i < c.switch_count(); ++i) {
    SwitchId s(static_cast<std::uint32_t>(i));
    if (c.switch_tier(s) == tier) out.push_back(s);
  }
  return out;
}

NodeMask subtree_mask(const Cluster& c, SwitchId s) {
  NodeMask m(c.node_count(), 0);
  for (NodeId n : c.switch_subtree_nodes(s)) m[n.index()] = 1;
  return m;
}

}  // namespace toposched
