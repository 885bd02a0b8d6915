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

// One Kueue topology domain and its per-request state (Kueue's domain + domainState).
struct Domain {
  int parent = -1;
  std::vector<int> children;
  NodeId node;              // valid for the hostname level
  SwitchId sw;              // valid above it
  std::uint32_t order = 0;  // rank of the domain's level values (its path of names) within its level
  long pods = 0;            // podCount: capacity, then what the assignment gives it
  long slices = 0;          // sliceCount
};

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
      : s_(s), p_(p) {
    build_tree();
    fill_counts(r, allowed);
  }

  int lowest_level() const { return static_cast<int>(levels_.size()) - 1; }
  const std::string& level_name(int level) const { return levels_[static_cast<std::size_t>(level)]; }

  Result<std::vector<GpuId>> assign() {
    if (levels_by_domain_.back().empty()) return infeasible("no node has a switch at every fabric tier");
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
        TOPOSCHED_TRY(part, update_counts_to_minimum(sorted(dom(d).children), dom(d).pods, 1, false));
        next.insert(next.end(), part.begin(), part.end());
      }
      current = std::move(next);
    }
    return gpus_of(current);
  }

 private:
  const AllocationState& s_;
  const Params& p_;
  std::vector<std::string> levels_;                 // level names, top first
  std::vector<Domain> domains_;
  std::vector<std::vector<int>> levels_by_domain_;  // domains of each level

  Domain& dom(int d) { return domains_[static_cast<std::size_t>(d)]; }

  static tl::unexpected<Error> infeasible(std::string m) { return make_error(ErrorCode::kInfeasible, std::move(m)); }

  // Kueue's levels and domains: one per switch (tiers, top first) with an eligible node below,
  // one per node whose ancestors cover every tier.
  void build_tree() {
    const Cluster& c = s_.cluster();
    const int tiers = static_cast<int>(c.tiers().size());
    for (int t = tiers - 1; t >= 0; --t) levels_.push_back(c.tiers()[static_cast<std::size_t>(t)].name);
    levels_.push_back("node");
    levels_by_domain_.assign(levels_.size(), {});
    std::vector<int> switch_domain(c.switch_count(), -1);
    std::vector<SwitchId> chain;
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      NodeId n(static_cast<std::uint32_t>(i));
      chain.clear();
      for (SwitchId sw = c.node_switch(n); sw.valid(); sw = c.switch_parent(sw)) chain.push_back(sw);
      bool complete = static_cast<int>(chain.size()) == tiers;
      for (int t = 0; complete && t < tiers; ++t) complete = c.switch_tier(chain[static_cast<std::size_t>(t)]) == t;
      if (!complete) continue;
      int parent = -1;
      for (int t = tiers - 1; t >= 0; --t) {
        int& d = switch_domain[chain[static_cast<std::size_t>(t)].index()];
        if (d < 0) d = add_domain(parent, tiers - 1 - t, NodeId(), chain[static_cast<std::size_t>(t)]);
        parent = d;
      }
      add_domain(parent, tiers, n, SwitchId());
    }
    rank_by_level_values();
  }

  int add_domain(int parent, int level, NodeId node, SwitchId sw) {
    const int d = static_cast<int>(domains_.size());
    domains_.push_back(Domain{parent, {}, node, sw, 0, 0, 0});
    if (parent >= 0) dom(parent).children.push_back(d);
    levels_by_domain_[static_cast<std::size_t>(level)].push_back(d);
    return d;
  }

  const std::string& domain_name(int d) {
    const Cluster& c = s_.cluster();
    return dom(d).node.valid() ? c.node_name(dom(d).node) : c.switch_name(dom(d).sw);
  }

  // Kueue breaks ties by the domain's level values (the names on its path from the top),
  // compared as strings: order within a level = (parent's order, own name).
  void rank_by_level_values() {
    using Key = std::pair<std::uint32_t, const std::string*>;
    auto less = [](const std::pair<Key, int>& a, const std::pair<Key, int>& b) {
      if (a.first.first != b.first.first) return a.first.first < b.first.first;
      return *a.first.second < *b.first.second;
    };
    std::vector<std::pair<Key, int>> keys;
    for (auto& level : levels_by_domain_) {
      keys.clear();
      for (int d : level) keys.push_back({{dom(d).parent >= 0 ? dom(dom(d).parent).order : 0, &domain_name(d)}, d});
      // Clusters usually list nodes in name order already (dgx-h100-001, -002, ...): one pass.
      if (!std::is_sorted(keys.begin(), keys.end(), less)) std::sort(keys.begin(), keys.end(), less);
      for (std::size_t k = 0; k < keys.size(); ++k) dom(keys[k].second).order = static_cast<std::uint32_t>(k);
    }
  }

  // Phase 1 (fillInCounts): pods that fit in each node, summed upwards; slices counted at the
  // slice level and summed above it (zero below it).
  void fill_counts(const JobRequest& r, const NodeMask& allowed) {
    for (int level = lowest_level(); level >= 0; --level)
      for (int d : levels_by_domain_[static_cast<std::size_t>(level)]) {
        Domain& x = dom(d);
        if (x.node.valid()) {
          x.pods = node_capacity(s_, r, allowed, x.node) / p_.pod_gpus;
        } else {
          x.pods = 0;
          x.slices = 0;
          for (int ch : x.children) {
            x.pods += dom(ch).pods;
            x.slices += dom(ch).slices;
          }
        }
        if (level == p_.slice_level) x.slices = x.pods / p_.slice_size;
      }
  }

  // BestFit: most slices first, then the fewest pods (least stranded capacity), then names.
  // LeastFreeCapacity: fewest slices first, then the fewest pods, then names.
  std::vector<int> sorted(std::vector<int> ds) {
    std::sort(ds.begin(), ds.end(), [&](int a, int b) {
      const Domain& x = dom(a);
      const Domain& y = dom(b);
      if (x.slices != y.slices) return p_.least_free ? x.slices < y.slices : x.slices > y.slices;
      if (x.pods != y.pods) return x.pods < y.pods;
      return x.order < y.order;
    });
    return ds;
  }

  // The first domain with the smallest count that still holds `needed`; the first one when
  // none does (findBestFitDomainBy).
  int best_fit(std::span<const int> ds, long needed, bool slices) {
    int best = ds.front();
    long best_count = std::numeric_limits<long>::max();
    for (int d : ds) {
      long have = slices ? dom(d).slices : dom(d).pods;
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
    std::vector<int> ds = sorted(levels_by_domain_[static_cast<std::size_t>(level)]);
    if (ds.empty()) return infeasible(fmt::format("no topology domains at level {}", level_name(level)));
    const long needed = p_.count / p_.slice_size;
    if (p_.least_free) {
      for (int d : ds)
        if (dom(d).slices >= needed) return std::pair{level, std::vector<int>{d}};
    }
    int top = ds.front();
    if (!p_.least_free && dom(top).slices >= needed) top = best_fit(ds, needed, true);
    if (dom(top).slices >= needed) return std::pair{level, std::vector<int>{top}};
    if (p_.required)
      return infeasible(fmt::format("{} in one {} (required)", not_fit(dom(top).slices, needed), level_name(level)));
    if (level > 0 && !p_.unconstrained) return find_level_with_fit_domains(level - 1);
    std::vector<int> chosen;
    long remaining = needed;
    for (std::size_t i = 0; remaining > 0 && i < ds.size(); ++i) {
      int d = ds[i];
      if (!p_.least_free && dom(d).slices >= remaining) d = best_fit(std::span(ds).subspan(i), remaining, true);
      chosen.push_back(d);
      remaining -= dom(d).slices;
    }
    if (remaining > 0) return infeasible(not_fit(needed - remaining, needed));
    return std::pair{level, std::move(chosen)};
  }

  // updateCountsToMinimumGeneric: gives `count` pods (in slices of `slice_size` when `slices`)
  // to the domains in order, the last one (BestFit) the tightest that holds the rest.
  Result<std::vector<int>> update_counts_to_minimum(const std::vector<int>& ds, long count, long slice_size,
                                                    bool slices) {
    std::vector<int> out;
    long remaining = slices ? count / slice_size : count;
    if (remaining == 0) return out;  // a domain given nothing (LeastFreeCapacity passes over empty ones)
    for (std::size_t i = 0; i < ds.size(); ++i) {
      int d = ds[i];
      long have = slices ? dom(d).slices : dom(d).pods;
      if (!p_.least_free && have >= remaining) {
        d = best_fit(std::span(ds).subspan(i), remaining, slices);
        have = slices ? dom(d).slices : dom(d).pods;
      }
      out.push_back(d);
      if (have >= remaining) {
        dom(d).pods = remaining * (slices ? slice_size : 1);
        if (slices) dom(d).slices = remaining;
        return out;
      }
      dom(d).pods = have * (slices ? slice_size : 1);
      remaining -= have;
    }
    return infeasible(fmt::format("kueue-bestfit: {} pod(s) left over while descending the topology", remaining));
  }

  // The assignment: nodes in the order of their level values, each with its pods' GPUs.
  std::vector<GpuId> gpus_of(std::vector<int> leaves) {
    std::sort(leaves.begin(), leaves.end(), [&](int a, int b) { return dom(a).order < dom(b).order; });
    std::vector<GpuId> out;
    for (int d : leaves)
      if (dom(d).pods > 0) take_lowest_free(s_, dom(d).node, static_cast<int>(dom(d).pods) * p_.pod_gpus, out);
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
