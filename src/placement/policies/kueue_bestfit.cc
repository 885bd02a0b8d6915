// kueue-bestfit: Kueue's Topology-Aware Scheduling as Kueue v0.20 (commit ff69552e) runs it
// with its default feature gates (TASProfileMixed and TASMultiLayerTopology on,
// TASBalancedPlacement and TASRespectNodeAffinityPreferred off): findTopologyAssignment in
// pkg/cache/scheduler/tas_flavor_snapshot.go, re-implemented from reading it, for one PodSet
// without a leader. kueue-balanced: the same with TASBalancedPlacement on
// (pkg/cache/scheduler/tas_balanced_placement.go, KEP 2724). docs/placement.md lists the
// rules and what is not modelled.
//
// The job is a PodSet: pods of --gpus-per-node G GPUs (whole nodes with --nodes), otherwise
// one pod per GPU. Kueue's levels are the fabric tiers, top first, then the node
// (kubernetes.io/hostname); a node is a domain only when it has a switch at every tier.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>

#include <fmt/format.h>

#include "placement/policies/policies.h"
#include "placement/select_util.h"

namespace toposched {
namespace {

// One Kueue topology domain (Kueue's domain; its per-request counts live in the Snapshot).
struct Domain {
  int parent = -1;
  std::vector<int> children;
  NodeId node;              // valid for the hostname level
  SwitchId sw;              // valid above it
  std::uint32_t order = 0;  // rank of the domain's level values (its path of names) within its level
};

// Kueue's levels and domains of a cluster: one domain per switch (tiers, top first) with an
// eligible node below, one per node whose ancestors cover every tier. Depends only on the
// cluster's names and tree.
struct Tree {
  std::vector<std::string> levels;               // level names, top first, then "node"
  std::vector<Domain> domains;
  std::vector<std::vector<int>> by_level;        // domains of each level
  std::vector<int> node_domain;                  // per node: its hostname-level domain, -1 for none
  std::vector<std::string> node_names, switch_names;
  std::vector<SwitchId> node_switch, switch_parent;
  std::vector<int> switch_tier;

  const std::string& name(int d) const {
    const Domain& x = domains[static_cast<std::size_t>(d)];
    return x.node.valid() ? node_names[x.node.index()] : switch_names[x.sw.index()];
  }
};

int add_domain(Tree& t, int parent, int level, NodeId node, SwitchId sw) {
  const int d = static_cast<int>(t.domains.size());
  t.domains.push_back(Domain{parent, {}, node, sw, 0});
  if (parent >= 0) t.domains[static_cast<std::size_t>(parent)].children.push_back(d);
  t.by_level[static_cast<std::size_t>(level)].push_back(d);
  return d;
}

// Kueue breaks ties by the domain's level values (the names on its path from the top),
// compared as strings: order within a level = (parent's order, own name).
void rank_by_level_values(Tree& t) {
  using Key = std::pair<std::uint32_t, const std::string*>;
  auto less = [](const std::pair<Key, int>& a, const std::pair<Key, int>& b) {
    if (a.first.first != b.first.first) return a.first.first < b.first.first;
    return *a.first.second < *b.first.second;
  };
  std::vector<std::pair<Key, int>> keys;
  for (auto& level : t.by_level) {
    keys.clear();
    for (int d : level) {
      int parent = t.domains[static_cast<std::size_t>(d)].parent;
      keys.push_back({{parent >= 0 ? t.domains[static_cast<std::size_t>(parent)].order : 0, &t.name(d)}, d});
    }
    // Clusters usually list nodes in name order already (dgx-h100-001, -002, ...): one pass.
    if (!std::is_sorted(keys.begin(), keys.end(), less)) std::sort(keys.begin(), keys.end(), less);
    for (std::size_t k = 0; k < keys.size(); ++k)
      t.domains[static_cast<std::size_t>(keys[k].second)].order = static_cast<std::uint32_t>(k);
  }
}

Tree build_tree(const Cluster& c) {
  Tree t;
  const int tiers = static_cast<int>(c.tiers().size());
  for (int k = tiers - 1; k >= 0; --k) t.levels.push_back(c.tiers()[static_cast<std::size_t>(k)].name);
  t.levels.push_back("node");
  t.by_level.assign(t.levels.size(), {});
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    t.node_names.push_back(c.node_name(NodeId(static_cast<std::uint32_t>(i))));
    t.node_switch.push_back(c.node_switch(NodeId(static_cast<std::uint32_t>(i))));
  }
  for (std::size_t i = 0; i < c.switch_count(); ++i) {
    SwitchId sw(static_cast<std::uint32_t>(i));
    t.switch_names.push_back(c.switch_name(sw));
    t.switch_parent.push_back(c.switch_parent(sw));
    t.switch_tier.push_back(c.switch_tier(sw));
  }
  std::vector<int> switch_domain(c.switch_count(), -1);
  t.node_domain.assign(c.node_count(), -1);
  std::vector<SwitchId> chain;
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    NodeId n(static_cast<std::uint32_t>(i));
    chain.clear();
    for (SwitchId sw = c.node_switch(n); sw.valid(); sw = c.switch_parent(sw)) chain.push_back(sw);
    bool complete = static_cast<int>(chain.size()) == tiers;
    for (int k = 0; complete && k < tiers; ++k) complete = c.switch_tier(chain[static_cast<std::size_t>(k)]) == k;
    if (!complete) continue;
    int parent = -1;
    for (int k = tiers - 1; k >= 0; --k) {
      int& d = switch_domain[chain[static_cast<std::size_t>(k)].index()];
      if (d < 0) d = add_domain(t, parent, tiers - 1 - k, NodeId(), chain[static_cast<std::size_t>(k)]);
      parent = d;
    }
    t.node_domain[i] = add_domain(t, parent, tiers, n, SwitchId());
  }
  rank_by_level_values(t);
  return t;
}

// The tree of the state's cluster, kept per thread for the last cluster_key() seen: the
// simulator places hundreds of thousands of jobs on one cluster, and rebuilding the tree (or
// comparing every name with the cached one's, as this once did) cost more than the placement.
const Tree& tree_for(const AllocationState& s) {
  thread_local std::uint64_t key = 0;
  thread_local Tree cached;
  if (key != s.cluster_key()) {
    cached = build_tree(s.cluster());
    key = s.cluster_key();
  }
  return cached;
}

// The request as Kueue sees it (findTopologyAssignmentState).
struct Params {
  long count = 0;        // pods
  long slice_size = 1;   // pods per slice (the outermost layer)
  int slice_level = 0;   // Kueue level index (0 = top) of the outermost slice layer
  int requested_level = 0;
  bool required = false;
  bool unconstrained = false;
  bool least_free = false;  // LeastFreeCapacity (unconstrained under TASProfileMixed) instead of BestFit
  bool balanced = false;    // TASBalancedPlacement (KEP 2724) on
  int pod_gpus = 1;
  // TASMultiLayerTopology: every slice layer (level, size), outermost first, and the slice
  // size at each level below the outermost slice level down to the innermost layer's level
  // (Kueue's sliceSizeAtLevel; 0 = none at that level).
  std::vector<std::pair<int, long>> layers;
  std::vector<long> inner_size_at_level;
};

// Kueue's TASFlavorSnapshot for one request: the domain tree with this request's counts.
// Built by each select() call and used once; never shared between threads. `indexed`: the
// hostname level's counts come from the free-GPU index (only nodes with capacity are
// visited; capacity_indexed requests), otherwise from every node (the reference).
class Snapshot {
 public:
  Snapshot(const AllocationState& s, const JobRequest& r, const NodeMask& allowed, const Params& p, bool indexed)
      : s_(s), p_(p), t_(tree_for(s)), pods_(t_.domains.size(), 0), slices_(t_.domains.size(), 0), indexed_(indexed) {
    if (indexed_)
      fill_counts_indexed(r);
    else
      fill_counts(r, allowed);
  }

  int lowest_level() const { return static_cast<int>(t_.levels.size()) - 1; }
  const std::string& level_name(int level) const { return t_.levels[static_cast<std::size_t>(level)]; }

  // findTopologyAssignment: phase 2a (the level and domains that hold the job, balanced or
  // best fit), then phase 2b (down the tree level by level).
  Result<std::vector<GpuId>> assign() {
    if (t_.by_level.back().empty()) return infeasible("no node has a switch at every fabric tier");
    int level = 0;
    std::vector<int> current;
    // Balanced placement only for a preferred tier (Kueue: !required && !unconstrained); when
    // it finds nothing Kueue falls back to best fit on the untouched counts.
    const bool balanced = p_.balanced && !p_.required && !p_.unconstrained && try_balanced(level, current);
    if (!balanced) {
      TOPOSCHED_TRY(fit, find_level_with_fit_domains(p_.requested_level));
      level = fit.first;
      current = std::move(fit.second);
    }
    TOPOSCHED_TRY(first, update_counts_to_minimum(current, p_.count, p_.slice_size, true));
    current = std::move(first);
    // Down to the slice level (best fit only) the children of every chosen domain are pooled
    // and the whole count is spread over them again (Kueue: "greedily assigning pods/slices to
    // all domains without checking what we've assigned to parent domains").
    for (; !balanced && level < std::min(lowest_level(), p_.slice_level); ++level) {
      std::vector<int> lower;
      for (int d : current) lower.insert(lower.end(), dom(d).children.begin(), dom(d).children.end());
      TOPOSCHED_TRY(next, update_counts_to_minimum(sorted(lower), p_.count, p_.slice_size, true));
      current = std::move(next);
    }
    // At and below the slice level (and everywhere after balanced placement) each domain
    // splits its own pods among its children: in slices of the layer at that level, if any.
    for (; level < lowest_level(); ++level) {
      const long size = level < p_.slice_level ? p_.slice_size : std::max(1L, inner_size(level + 1));
      std::vector<int> next;
      for (int d : current) {
        std::vector<int> kids = sorted(dom(d).children);
        if (size > 1)  // Kueue recomputes the children's slice counts after sorting them
          for (int k : kids) slices(k) = pods(k) / size;
        TOPOSCHED_TRY(part, update_counts_to_minimum(kids, pods(d), size, size > 1));
        next.insert(next.end(), part.begin(), part.end());
      }
      current = std::move(next);
    }
    return gpus_of(current);
  }

 private:
  const AllocationState& s_;
  const Params& p_;
  const Tree& t_;
  std::vector<long> pods_;    // podCount per domain: capacity, then what the assignment gives it
  std::vector<long> slices_;  // sliceCount per domain
  bool indexed_;
  std::vector<int> live_nodes_;  // indexed: the hostname-level domains with pods or slices
  std::vector<long> bucket_pods_;  // indexed: per bucket, the pods each of its nodes holds

  const Domain& dom(int d) const { return t_.domains[static_cast<std::size_t>(d)]; }
  long& pods(int d) { return pods_[static_cast<std::size_t>(d)]; }
  long& slices(int d) { return slices_[static_cast<std::size_t>(d)]; }
  long count_of(int d, bool in_slices) { return in_slices ? slices(d) : pods(d); }
  long inner_size(int level) const {
    return level < static_cast<int>(p_.inner_size_at_level.size())
               ? p_.inner_size_at_level[static_cast<std::size_t>(level)]
               : 0;
  }

  static tl::unexpected<Error> infeasible(std::string m) { return make_error(ErrorCode::kInfeasible, std::move(m)); }

  // Phase 1 (fillInCounts, fillInCountsHelper): pods that fit in each node, summed upwards
  // (with multi-layer slices a child at a layer's level gives only whole inner slices);
  // slices counted at the slice level and summed above it (zero below it).
  void fill_counts(const JobRequest& r, const NodeMask& allowed) {
    for (int level = lowest_level(); level >= 0; --level) {
      const long inner = inner_size(level + 1);
      for (int d : t_.by_level[static_cast<std::size_t>(level)]) {
        if (dom(d).node.valid()) {
          pods(d) = node_capacity(s_, r, allowed, dom(d).node) / p_.pod_gpus;
        } else {
          for (int ch : dom(d).children) {
            pods(d) += inner > 0 ? pods(ch) / inner * inner : pods(ch);
            slices(d) += slices(ch);
          }
        }
        if (level == p_.slice_level) slices(d) = pods(d) / p_.slice_size;
      }
    }
  }

  // fill_counts from the free-GPU index: the hostname level's domains of the nodes with
  // capacity, pushed into their parents; the levels above summed as fill_counts does. The
  // counts are the same: every other node domain holds nothing, and adds nothing.
  void fill_counts_indexed(const JobRequest& r) {
    const int lowest = lowest_level();
    bucket_pods_.assign(static_cast<std::size_t>(s_.bucket_count()), 0);
    for (int b = 0; b < s_.bucket_count(); ++b) {
      const int cap = bucket_capacity(s_, r, b);
      bucket_pods_[static_cast<std::size_t>(b)] = cap / p_.pod_gpus;
      if (cap <= 0) continue;
      for (NodeId n : s_.bucket_nodes(b)) {
        const int d = t_.node_domain[n.index()];
        if (d < 0) continue;
        pods(d) = cap / p_.pod_gpus;
        if (lowest == p_.slice_level) slices(d) = pods(d) / p_.slice_size;
        if (pods(d) > 0 || slices(d) > 0) live_nodes_.push_back(d);
      }
    }
    if (lowest == 0) return;
    const long inner = inner_size(lowest);
    for (int d : live_nodes_) {
      const int up = dom(d).parent;
      pods(up) += inner > 0 ? pods(d) / inner * inner : pods(d);
      slices(up) += slices(d);
    }
    for (int level = lowest - 1; level >= 0; --level) {
      const long inner_here = inner_size(level + 1);
      for (int d : t_.by_level[static_cast<std::size_t>(level)]) {
        if (level < lowest - 1)
          for (int ch : dom(d).children) {
            pods(d) += inner_here > 0 ? pods(ch) / inner_here * inner_here : pods(ch);
            slices(d) += slices(ch);
          }
        if (level == p_.slice_level) slices(d) = pods(d) / p_.slice_size;
      }
    }
  }

  // fillInCountsHelper again after pruning (balanced placement): plain sums, no inner layers.
  void refill(int d, int level) {
    if (!dom(d).children.empty()) {
      pods(d) = slices(d) = 0;
      for (int ch : dom(d).children) {
        refill(ch, level + 1);
        pods(d) += pods(ch);
        slices(d) += slices(ch);
      }
    }
    if (level == p_.slice_level) slices(d) = pods(d) / p_.slice_size;
  }
  void clear(int d) {
    pods(d) = slices(d) = 0;
    for (int ch : dom(d).children) clear(ch);
  }

  // BestFit: most slices first, then the fewest pods (least stranded capacity), then names.
  // LeastFreeCapacity: fewest slices first, then the fewest pods, then names.
  // Domains that hold nothing are left out: wherever Kueue's order puts them, they take no pod
  // and are never the best fit, so the assignment is the same.
  bool before(int a, int b) {
    if (slices(a) != slices(b)) return p_.least_free ? slices(a) < slices(b) : slices(a) > slices(b);
    if (pods(a) != pods(b)) return pods(a) < pods(b);
    return dom(a).order < dom(b).order;
  }
  std::vector<int> sorted(const std::vector<int>& all) {
    std::vector<int> ds;
    ds.reserve(all.size());
    for (int d : all)
      if (pods(d) > 0 || slices(d) > 0) ds.push_back(d);
    std::sort(ds.begin(), ds.end(), [&](int a, int b) { return before(a, b); });
    return ds;
  }
  std::vector<int> children_of(const std::vector<int>& ds) const {
    std::vector<int> out;
    for (int d : ds) out.insert(out.end(), dom(d).children.begin(), dom(d).children.end());
    return out;
  }

  // The first domain with the smallest count that still holds `needed`; the first one when
  // none does (findBestFitDomainBy).
  int best_fit(std::span<const int> ds, long needed, bool in_slices) {
    int best = ds.front();
    long best_count = std::numeric_limits<long>::max();
    for (int d : ds) {
      long have = count_of(d, in_slices);
      if (have >= needed && have < best_count) {
        best = d;
        best_count = have;
      }
    }
    return best;
  }

  std::string not_fit(long fit, long total) const {
    const char* unit = p_.slice_size > 1 ? "slice" : "pod";
    if (fit == 0) return fmt::format("the topology doesn't allow to fit any of {} {}(s)", total, unit);
    return fmt::format("the topology allows to fit only {} out of {} {}(s)", fit, total, unit);
  }

  // multiLayerNotFitMessage: for the domain of `level` with the most slices, how many slices
  // of each layer fit in it.
  std::string multi_layer_not_fit(int level) {
    int best = -1;
    for (int d : t_.by_level[static_cast<std::size_t>(level)])
      if (best < 0 || slices(d) > slices(best) || (slices(d) == slices(best) && dom(d).order < dom(best).order))
        best = d;
    std::string out = "the topology doesn't allow to fit";
    if (best < 0) return out;
    for (auto [layer_level, size] : p_.layers)
      out += fmt::format("; {}/{} slice(s) fit on level {}", slices_in_subtree(best, level, layer_level, size),
                         p_.count / size, level_name(layer_level));
    return out;
  }
  long slices_in_subtree(int d, int level, int target, long size) {
    if (level == target) return pods(d) / size;
    long total = 0;
    for (int ch : dom(d).children) total += slices_in_subtree(ch, level + 1, target, size);
    return total;
  }
  std::string not_fit_at(int level, long fit, long total) {
    return p_.layers.size() > 1 ? multi_layer_not_fit(level) : not_fit(fit, total);
  }

  // Phase 2a (findLevelWithFitDomains): the level and the domains that hold the job.
  Result<std::pair<int, std::vector<int>>> find_level_with_fit_domains(int level) {
    if (t_.by_level[static_cast<std::size_t>(level)].empty())
      return infeasible(fmt::format("no topology domains at level {}", level_name(level)));
    const long needed = p_.count / p_.slice_size;
    // Both searches below pass over domains that hold nothing (when something is needed):
    // indexed, the hostname level's are not visited at all.
    const std::vector<int>& all = indexed_ && needed > 0 && level == lowest_level()
                                      ? live_nodes_
                                      : t_.by_level[static_cast<std::size_t>(level)];
    if (p_.least_free) {
      // The first domain in LeastFreeCapacity order that holds the job, without sorting them all.
      int first = -1;
      if (&all == &live_nodes_)
        first = least_free_first_indexed(needed);
      else
        for (int d : all)
          if (slices(d) >= needed && (first < 0 || before(d, first))) first = d;
      if (first >= 0) return std::pair{level, std::vector<int>{first}};
    }
    if (p_.least_free && indexed_) return least_free_domains(all, level, needed);
    std::vector<int> ds = sorted(all);
    long top_slices = ds.empty() ? 0 : slices(ds.front());
    if (!p_.least_free && top_slices >= needed) return std::pair{level, std::vector<int>{best_fit(ds, needed, true)}};
    if (p_.required)
      return infeasible(fmt::format("{} in one {} (required)", not_fit_at(level, top_slices, needed), level_name(level)));
    if (level > 0 && !p_.unconstrained) return find_level_with_fit_domains(level - 1);
    std::vector<int> chosen;
    long remaining = needed;
    for (std::size_t i = 0; remaining > 0 && i < ds.size(); ++i) {
      int d = ds[i];
      if (!p_.least_free && slices(d) >= remaining) d = best_fit(std::span(ds).subspan(i), remaining, true);
      chosen.push_back(d);
      remaining -= slices(d);
    }
    if (remaining > 0) return infeasible(not_fit_at(level, needed - remaining, needed));
    return std::pair{level, std::move(chosen)};
  }

  // Indexed, at the hostname level: the first node domain in before() order with at least
  // `needed` (> 0) slices. A node domain's slices and pods are its bucket's, so the buckets
  // give the smallest (slices, pods) that qualifies, and only the nodes of the buckets with
  // that key are compared by order (the next key when none of them is a domain). -1: none.
  int least_free_first_indexed(long needed) const {
    std::vector<std::pair<std::pair<long, long>, int>> keyed;  // ((slices, pods), bucket)
    for (int b = 0; b < s_.bucket_count(); ++b) {
      const long pods = bucket_pods_[static_cast<std::size_t>(b)];
      const long slices = lowest_level() == p_.slice_level ? pods / p_.slice_size : 0;
      if (pods > 0 && slices >= needed && !s_.bucket_nodes(b).empty()) keyed.push_back({{slices, pods}, b});
    }
    std::sort(keyed.begin(), keyed.end());
    for (std::size_t i = 0; i < keyed.size();) {
      int first = -1;
      const std::size_t group = i;
      for (; i < keyed.size() && keyed[i].first == keyed[group].first; ++i)
        for (NodeId n : s_.bucket_nodes(keyed[i].second)) {
          const int d = t_.node_domain[n.index()];
          if (d >= 0 && (first < 0 || dom(d).order < dom(first).order)) first = d;
        }
      if (first >= 0) return first;
    }
    return -1;
  }

  // The rest of find_level_with_fit_domains for LeastFreeCapacity (never required, never
  // widened: an unconstrained request) once no single domain holds the job: domains in
  // before() order until the job is covered, drawn from a heap instead of sorting them all
  // (before() is a total order, so the draws are the sorted list's first ones).
  Result<std::pair<int, std::vector<int>>> least_free_domains(const std::vector<int>& all, int level, long needed) {
    std::vector<int> heap;
    for (int d : all)
      if (pods(d) > 0 || slices(d) > 0) heap.push_back(d);
    const auto after = [&](int a, int b) { return before(b, a); };
    std::make_heap(heap.begin(), heap.end(), after);
    std::vector<int> chosen;
    long remaining = needed;
    while (remaining > 0 && !heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), after);
      chosen.push_back(heap.back());
      heap.pop_back();
      remaining -= slices(chosen.back());
    }
    if (remaining > 0) return infeasible(not_fit_at(level, needed - remaining, needed));
    return std::pair{level, std::move(chosen)};
  }

  // updateCountsToMinimumGeneric: gives `count` pods (in slices of `slice_size` when `slices`)
  // to the domains in order, the last one (BestFit) the tightest that holds the rest.
  Result<std::vector<int>> update_counts_to_minimum(const std::vector<int>& ds, long count, long slice_size,
                                                    bool in_slices) {
    std::vector<int> out;
    long remaining = in_slices ? count / slice_size : count;
    if (remaining == 0) return out;  // a domain given nothing (LeastFreeCapacity passes over empty ones)
    const long unit = in_slices ? slice_size : 1;
    for (std::size_t i = 0; i < ds.size(); ++i) {
      int d = ds[i];
      if (!p_.least_free && count_of(d, in_slices) >= remaining)
        d = best_fit(std::span(ds).subspan(i), remaining, in_slices);
      const long have = count_of(d, in_slices);
      out.push_back(d);
      if (have >= remaining) {
        pods(d) = remaining * unit;
        if (in_slices) slices(d) = remaining;
        return out;
      }
      pods(d) = have * unit;
      remaining -= have;
    }
    return infeasible(fmt::format("kueue-bestfit: {} pod(s) left over while descending the topology", remaining));
  }

  // ---- TASBalancedPlacement (pkg/cache/scheduler/tas_balanced_placement.go), for a PodSet
  // without a leader. Kueue works on deep copies of the candidate subtrees; here the counts
  // are saved and restored around each candidate instead (the subtrees are disjoint).

  struct Greedy {
    bool fits = false;
    long domains = 0;  // how many domains best fit takes, most slices first
    int last = -1;     // the last of them
  };
  // evaluateGreedyAssignment.
  Greedy evaluate_greedy(const std::vector<int>& ds, long needed) {
    Greedy g;
    long remaining = needed;
    for (int d : sorted(ds)) {
      if (remaining <= 0 || slices(d) <= 0) break;
      ++g.domains;
      g.last = d;
      remaining -= slices(d);
    }
    g.fits = remaining <= 0;
    return g;
  }

  // pruneDomainsBelowThreshold: children (then the domains) with fewer slices than the
  // threshold are emptied, the domains' counts summed again.
  void prune(const std::vector<int>& ds, long threshold, int level) {
    for (int d : ds)
      for (int ch : dom(d).children)
        if (slices(ch) < threshold) clear(ch);
    for (int d : ds) {
      refill(d, level);
      if (slices(d) < threshold) clear(d);
    }
  }

  // calculateDomainsEntropy over the children's pods; summed in ascending order so that the
  // result does not depend on the order the children are listed in.
  double entropy(int d) {
    std::vector<long> counts;
    long total = 0;
    for (int ch : dom(d).children) {
      counts.push_back(pods(ch));
      total += pods(ch);
    }
    if (total == 0) return 0.0;
    std::sort(counts.begin(), counts.end());
    double e = 0.0;
    for (long c : counts)
      if (c > 0) {
        const double p = static_cast<double>(c) / static_cast<double>(total);
        e += -p * std::log2(p);
      }
    return e;
  }

  // selectOptimalDomainSetToFit: of the sets of as many domains as best fit needs, the one
  // that leaves the fewest pods over; first found in the order given (by slices then entropy
  // of the children, or by name).
  std::vector<int> select_optimal_domain_set(const std::vector<int>& ds, long needed, bool by_entropy) {
    const Greedy g = evaluate_greedy(ds, needed);
    if (!g.fits) return {};
    std::vector<int> ordered = ds;
    if (by_entropy) {
      std::vector<double> ent(t_.domains.size(), 0.0);
      for (int d : ordered) ent[static_cast<std::size_t>(d)] = entropy(d);
      std::sort(ordered.begin(), ordered.end(), [&](int a, int b) {
        if (slices(a) != slices(b)) return slices(a) > slices(b);
        const double ea = ent[static_cast<std::size_t>(a)], eb = ent[static_cast<std::size_t>(b)];
        if (ea != eb) return ea > eb;
        return dom(a).order < dom(b).order;
      });
    } else {
      std::sort(ordered.begin(), ordered.end(), [&](int a, int b) { return dom(a).order < dom(b).order; });
    }
    const std::size_t n = static_cast<std::size_t>(g.domains);
    std::vector<std::map<long, std::vector<int>>> with(n + 1);  // pods left to place -> domains
    with[0][needed * p_.slice_size] = {};
    for (int d : ordered) {
      if (slices(d) <= 0) continue;
      for (std::size_t i = n; i > 0; --i)
        for (const auto& [left, chosen] : with[i - 1]) {
          if (left <= 0) continue;
          const long after = left - pods(d);
          if (with[i].count(after)) continue;
          std::vector<int> next = chosen;
          next.push_back(d);
          with[i].emplace(after, std::move(next));
        }
    }
    auto it = with[n].upper_bound(0);  // the largest "left" that is <= 0: the least overshoot
    if (it == with[n].begin()) return {};
    return std::prev(it)->second;
  }

  // placeSlicesOnDomainsBalanced: every chosen domain gets the threshold, the extra slices go
  // to them in best-fit order, as many as each holds.
  std::vector<int> place_slices_balanced(const std::vector<int>& ds, long needed, long threshold) {
    std::vector<int> chosen = select_optimal_domain_set(ds, needed, false);
    if (chosen.empty() || needed < static_cast<long>(chosen.size()) * threshold) return {};
    chosen = sorted(chosen);
    long extra = needed - static_cast<long>(chosen.size()) * threshold;
    for (int d : chosen) {
      const long take = extra > 0 ? std::min(slices(d) - threshold, extra) : 0;
      slices(d) = threshold + take;
      pods(d) = slices(d) * p_.slice_size;
      extra -= take;
    }
    if (extra > 0) return {};
    return chosen;
  }

  // findBestDomainsForBalancedPlacement + applyBalancedPlacementAlgorithm: the domain one
  // level above the requested one whose children give the highest balance threshold (the
  // largest minimum of slices per used domain; ties: fewer domains at the requested level),
  // then the threshold on each used domain. False (counts untouched) when none qualifies.
  bool try_balanced(int& level, std::vector<int>& out) {
    const long needed = p_.count / p_.slice_size;
    if (needed <= 0) return false;
    const int requested = p_.requested_level;
    std::vector<std::vector<int>> groups;
    if (requested == 0) {
      groups.push_back(t_.by_level[0]);
    } else {
      std::vector<int> higher = t_.by_level[static_cast<std::size_t>(requested - 1)];
      std::sort(higher.begin(), higher.end(), [&](int a, int b) { return dom(a).order < dom(b).order; });
      for (int h : higher) groups.push_back(dom(h).children);
    }
    const std::vector<long> orig_pods = pods_, orig_slices = slices_;
    std::vector<long> best_pods, best_slices;
    long best_threshold = 0, best_domains = 0;
    const std::vector<int>* best_group = nullptr;
    for (const std::vector<int>& group : groups) {
      pods_ = orig_pods;
      slices_ = orig_slices;
      const Greedy lower = evaluate_greedy(requested < p_.slice_level ? children_of(group) : group, needed);
      if (!lower.fits) continue;
      const long threshold = std::min(needed / lower.domains, slices(lower.last));
      if (threshold < best_threshold) continue;
      prune(group, threshold, requested);
      const Greedy after = evaluate_greedy(group, needed);
      if (!after.fits) continue;
      if (threshold > best_threshold || after.domains < best_domains) {
        best_threshold = threshold;
        best_domains = after.domains;
        best_group = &group;
        best_pods = pods_;
        best_slices = slices_;
      }
    }
    auto give_up = [&] {
      pods_ = orig_pods;
      slices_ = orig_slices;
      return false;
    };
    if (best_threshold <= 0) return give_up();
    pods_ = std::move(best_pods);
    slices_ = std::move(best_slices);
    std::vector<int> fit = *best_group;
    int fit_level = requested;
    if (requested < p_.slice_level) {
      std::vector<int> chosen = select_optimal_domain_set(fit, needed, true);
      if (chosen.empty()) return give_up();
      fit = children_of(chosen);
      fit_level = requested + 1;
    }
    std::vector<int> placed = place_slices_balanced(fit, needed, best_threshold);
    if (placed.empty()) return give_up();
    level = fit_level;
    out = std::move(placed);
    return true;
  }

  // The assignment: nodes in the order of their level values, each with its pods' GPUs.
  std::vector<GpuId> gpus_of(std::vector<int> leaves) {
    std::sort(leaves.begin(), leaves.end(), [&](int a, int b) { return dom(a).order < dom(b).order; });
    std::vector<GpuId> out;
    for (int d : leaves)
      if (pods(d) > 0) take_lowest_free(s_, dom(d).node, static_cast<int>(pods(d)) * p_.pod_gpus, out);
    return out;
  }
};

// Kueue level index of a toposched tier index (kNodeTier = the lowest level).
int kueue_level(const Cluster& c, int tier) {
  const int tiers = static_cast<int>(c.tiers().size());
  return tier == kNodeTier ? tiers : tiers - 1 - tier;
}

// buildSliceSizeAtLevel: each inner layer's size at every level from just below the layer
// above down to its own level.
void add_slice_layers(const Cluster& c, const JobRequest& r, Params& p) {
  if (!r.slice_tier_index) return;
  p.layers.emplace_back(p.slice_level, p.slice_size);
  p.inner_size_at_level.assign(static_cast<std::size_t>(kueue_level(c, kNodeTier)) + 1, 0);
  int prev = p.slice_level;
  for (const JobRequest::SliceLayer& layer : r.inner_slices) {
    const int level = kueue_level(c, layer.tier_index.value_or(kNodeTier));
    for (int l = prev + 1; l <= level; ++l) p.inner_size_at_level[static_cast<std::size_t>(l)] = layer.size;
    p.layers.emplace_back(level, layer.size);
    prev = level;
  }
}

Params params_of(const Cluster& c, const JobRequest& r, bool balanced) {
  Params p;
  p.balanced = balanced;
  p.pod_gpus = r.pod_gpus();
  p.count = r.total_gpus / p.pod_gpus;
  const int lowest = kueue_level(c, kNodeTier);
  p.slice_size = r.slice_size > 0 ? r.slice_size : 1;
  p.slice_level = r.slice_tier_index ? kueue_level(c, *r.slice_tier_index) : lowest;
  p.required = r.required_tier_index.has_value();
  // Kueue's levelKey: required, else preferred, else a slice-only request starts at the top,
  // else (explicit or implied unconstrained) at the hostname level.
  if (r.required_tier_index) {
    p.requested_level = kueue_level(c, *r.required_tier_index);
  } else if (r.preferred_tier_index) {
    p.requested_level = kueue_level(c, *r.preferred_tier_index);
  } else if (r.slice_tier_index) {
    p.requested_level = 0;
    p.unconstrained = true;
  } else {
    p.requested_level = lowest;
    p.unconstrained = true;
  }
  p.least_free = p.unconstrained;  // TASProfileMixed, on by default since Kueue v0.15
  add_slice_layers(c, r, p);
  return p;
}

// kueue-bestfit: Kueue's default gates; kueue-balanced: the same with TASBalancedPlacement on.
class KueueBestFit final : public PlacementPolicy {
 public:
  // `may_index`: read the free-GPU index where it gives each node's capacity (the default);
  // false keeps the scan of every node, the reference the indexed search is tested against.
  KueueBestFit(bool balanced, bool may_index) : balanced_(balanced), may_index_(may_index) {}
  std::string_view name() const override { return balanced_ ? "kueue-balanced" : "kueue-bestfit"; }
  std::string_view summary() const override {
    return balanced_ ? "Kueue TAS with TASBalancedPlacement (KEP 2724): even spread under a preferred tier"
                     : "Kueue TAS (v0.20 default gates): BestFit, LeastFreeCapacity when unconstrained, slices";
  }
  bool handles_tier_constraints() const override { return true; }
  bool supports_slices() const override { return true; }

  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    const Params p = params_of(s.cluster(), r, balanced_);
    Snapshot snap(s, r, allowed, p, may_index_ && capacity_indexed(r, allowed));
    return snap.assign();
  }

 private:
  bool balanced_;
  bool may_index_;
};

}  // namespace

const PlacementPolicy& kueue_bestfit_policy() {
  static const KueueBestFit p(false, true);
  return p;
}

const PlacementPolicy& kueue_bestfit_scan_policy() {
  static const KueueBestFit p(false, false);
  return p;
}

const PlacementPolicy& kueue_balanced_policy() {
  static const KueueBestFit p(true, true);
  return p;
}

const PlacementPolicy& kueue_balanced_scan_policy() {
  static const KueueBestFit p(true, false);
  return p;
}

}  // namespace toposched
