// kueue-bestfit: Kueue's Topology-Aware Scheduling as Kueue v0.20 (commit ff69552e) runs it
// with its default feature gates (TASProfileMixed on, TASBalancedPlacement and
// TASRespectNodeAffinityPreferred off): findTopologyAssignment in
// pkg/cache/scheduler/tas_flavor_snapshot.go, re-implemented from reading it, for one PodSet
// without a leader. docs/placement.md lists the rules and what is not modelled.
//
// The job is a PodSet: pods of --gpus-per-node G GPUs (whole nodes with --nodes), otherwise
// one pod per GPU. Kueue's levels are the fabric tiers, top first, then the node
// (kubernetes.io/hostname); a node is a domain only when it has a switch at every tier.
#include <algorithm>
#include <limits>
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
// cluster's names and tree, which it keeps a copy of to recognise the cluster again.
struct Tree {
  std::vector<std::string> levels;               // level names, top first, then "node"
  std::vector<Domain> domains;
  std::vector<std::vector<int>> by_level;        // domains of each level
  std::vector<std::string> node_names, switch_names;
  std::vector<SwitchId> node_switch, switch_parent;
  std::vector<int> switch_tier;

  const std::string& name(int d) const {
    const Domain& x = domains[static_cast<std::size_t>(d)];
    return x.node.valid() ? node_names[x.node.index()] : switch_names[x.sw.index()];
  }
};

bool describes(const Tree& t, const Cluster& c) {
  if (t.node_names.size() != c.node_count() || t.switch_names.size() != c.switch_count() ||
      t.levels.size() != c.tiers().size() + 1)
    return false;
  for (std::size_t i = 0; i < c.tiers().size(); ++i)
    if (t.levels[c.tiers().size() - 1 - i] != c.tiers()[i].name) return false;
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    NodeId n(static_cast<std::uint32_t>(i));
    if (t.node_switch[i] != c.node_switch(n) || t.node_names[i] != c.node_name(n)) return false;
  }
  for (std::size_t i = 0; i < c.switch_count(); ++i) {
    SwitchId sw(static_cast<std::uint32_t>(i));
    if (t.switch_parent[i] != c.switch_parent(sw) || t.switch_tier[i] != c.switch_tier(sw) ||
        t.switch_names[i] != c.switch_name(sw))
      return false;
  }
  return true;
}

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
    add_domain(t, parent, tiers, n, SwitchId());
  }
  rank_by_level_values(t);
  return t;
}

// The tree of `c`, kept per thread: the simulator places hundreds of thousands of jobs on one
// cluster, and rebuilding it each time cost more than the placement.
const Tree& tree_for(const Cluster& c) {
  thread_local Tree cached;
  if (!describes(cached, c)) cached = build_tree(c);
  return cached;
}

// The request as Kueue sees it (findTopologyAssignmentState).
struct Params {
  long count = 0;        // pods
  long slice_size = 1;   // pods per slice
  int slice_level = 0;   // Kueue level index (0 = top)
  int requested_level = 0;
  bool required = false;
  bool unconstrained = false;
  bool least_free = false;  // LeastFreeCapacity (unconstrained under TASProfileMixed) instead of BestFit
  int pod_gpus = 1;
};

// Kueue's TASFlavorSnapshot for one request: the domain tree with this request's counts.
// Built by each select() call and used once; never shared between threads.
class Snapshot {
 public:
  Snapshot(const AllocationState& s, const JobRequest& r, const NodeMask& allowed, const Params& p)
      : s_(s), p_(p), t_(tree_for(s.cluster())), pods_(t_.domains.size(), 0), slices_(t_.domains.size(), 0) {
    fill_counts(r, allowed);
  }

  int lowest_level() const { return static_cast<int>(t_.levels.size()) - 1; }
  const std::string& level_name(int level) const { return t_.levels[static_cast<std::size_t>(level)]; }

  Result<std::vector<GpuId>> assign() {
    if (t_.by_level.back().empty()) return infeasible("no node has a switch at every fabric tier");
    auto fit = find_level_with_fit_domains(p_.requested_level);
    if (!fit) return tl::unexpected(fit.error());
    auto [level, chosen] = std::move(*fit);
    TOPOSCHED_TRY(current, update_counts_to_minimum(chosen, p_.count, p_.slice_size, true));
    // Down to the slice level the children of every chosen domain are pooled and the whole
    // count is spread over them again (Kueue: "greedily assigning pods/slices to all domains
    // without checking what we've assigned to parent domains").
    for (; level < std::min(lowest_level(), p_.slice_level); ++level) {
      std::vector<int> lower;
      for (int d : current) lower.insert(lower.end(), dom(d).children.begin(), dom(d).children.end());
      TOPOSCHED_TRY(next, update_counts_to_minimum(sorted(lower), p_.count, p_.slice_size, true));
      current = std::move(next);
    }
    // At and below the slice level each domain splits its own pods among its children.
    for (; level < lowest_level(); ++level) {
      std::vector<int> next;
      for (int d : current) {
        TOPOSCHED_TRY(part, update_counts_to_minimum(sorted(dom(d).children), pods(d), 1, false));
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

  const Domain& dom(int d) const { return t_.domains[static_cast<std::size_t>(d)]; }
  long& pods(int d) { return pods_[static_cast<std::size_t>(d)]; }
  long& slices(int d) { return slices_[static_cast<std::size_t>(d)]; }
  long count_of(int d, bool in_slices) { return in_slices ? slices(d) : pods(d); }

  static tl::unexpected<Error> infeasible(std::string m) { return make_error(ErrorCode::kInfeasible, std::move(m)); }

  // Phase 1 (fillInCounts): pods that fit in each node, summed upwards; slices counted at the
  // slice level and summed above it (zero below it).
  void fill_counts(const JobRequest& r, const NodeMask& allowed) {
    for (int level = lowest_level(); level >= 0; --level)
      for (int d : t_.by_level[static_cast<std::size_t>(level)]) {
        if (dom(d).node.valid()) {
          pods(d) = node_capacity(s_, r, allowed, dom(d).node) / p_.pod_gpus;
        } else {
          for (int ch : dom(d).children) {
            pods(d) += pods(ch);
            slices(d) += slices(ch);
          }
        }
        if (level == p_.slice_level) slices(d) = pods(d) / p_.slice_size;
      }
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

  // Phase 2a (findLevelWithFitDomains): the level and the domains that hold the job.
  Result<std::pair<int, std::vector<int>>> find_level_with_fit_domains(int level) {
    const std::vector<int>& all = t_.by_level[static_cast<std::size_t>(level)];
    if (all.empty()) return infeasible(fmt::format("no topology domains at level {}", level_name(level)));
    const long needed = p_.count / p_.slice_size;
    if (p_.least_free) {
      // The first domain in LeastFreeCapacity order that holds the job, without sorting them all.
      int first = -1;
      for (int d : all)
        if (slices(d) >= needed && (first < 0 || before(d, first))) first = d;
      if (first >= 0) return std::pair{level, std::vector<int>{first}};
    }
    std::vector<int> ds = sorted(all);
    long top_slices = ds.empty() ? 0 : slices(ds.front());
    if (!p_.least_free && top_slices >= needed) return std::pair{level, std::vector<int>{best_fit(ds, needed, true)}};
    if (p_.required)
      return infeasible(fmt::format("{} in one {} (required)", not_fit(top_slices, needed), level_name(level)));
    if (level > 0 && !p_.unconstrained) return find_level_with_fit_domains(level - 1);
    std::vector<int> chosen;
    long remaining = needed;
    for (std::size_t i = 0; remaining > 0 && i < ds.size(); ++i) {
      int d = ds[i];
      if (!p_.least_free && slices(d) >= remaining) d = best_fit(std::span(ds).subspan(i), remaining, true);
      chosen.push_back(d);
      remaining -= slices(d);
    }
    if (remaining > 0) return infeasible(not_fit(needed - remaining, needed));
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

Params params_of(const Cluster& c, const JobRequest& r) {
  Params p;
  p.pod_gpus = r.gpus_per_node > 0 ? r.gpus_per_node : 1;
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
  return p;
}

class KueueBestFit final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "kueue-bestfit"; }
  std::string_view summary() const override {
    return "Kueue TAS (v0.20 default gates): BestFit, LeastFreeCapacity when unconstrained, slices";
  }
  bool handles_tier_constraints() const override { return true; }
  bool supports_slices() const override { return true; }

  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    const Params p = params_of(s.cluster(), r);
    Snapshot snap(s, r, allowed, p);
    return snap.assign();
  }
};

}  // namespace

const PlacementPolicy& kueue_bestfit_policy() {
  static const KueueBestFit p;
  return p;
}

}  // namespace toposched
