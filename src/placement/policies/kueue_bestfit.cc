// kueue-bestfit: Kueue's Topology-Aware Scheduling with the BestFit profile
// (pkg/cache/tas_flavor_snapshot.go, findTopologyAssignment), re-implemented from reading it.
//
// The job is a set of pods: --gpus-per-node G gives pods of G GPUs (whole nodes with
// --nodes), otherwise one pod per GPU. Levels are the fabric tiers, top first, then the
// node ("kubernetes.io/hostname"). Each domain's capacity is how many pods fit in it.
//  - Start at the required or preferred level (no constraint = preferred "node").
//  - If one domain of the level holds every pod, take the one with the least capacity that
//    still does (tight fit). Otherwise a required level fails; a preferred one moves one
//    level up and tries again. At the top level, domains are taken from the most capacity
//    down, with the last one the tightest that holds the remainder.
//  - Going down, each chosen domain splits its pods among its children the same way: most
//    capacity first, tightest fit for the last.
// Ranks follow the order pods were assigned.
#include <algorithm>

#include <fmt/format.h>

#include "placement/policies/policies.h"
#include "placement/select_util.h"

namespace toposched {
namespace {

struct Domain {
  bool is_node;
  std::uint32_t id;
  long pods;
};

class KueueBestFit final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "kueue-bestfit"; }
  std::string_view summary() const override { return "Kueue TAS BestFit with required/preferred tiers"; }
  bool handles_tier_constraints() const override { return true; }

  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    const Cluster& c = s.cluster();
    Ctx x{s, r, allowed, {}, {}, r.gpus_per_node > 0 ? r.gpus_per_node : 1};
    const long pods = r.total_gpus / x.pod_gpus;
    x.node_pods.assign(c.node_count(), 0);
    x.switch_pods.assign(c.switch_count(), 0);
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      NodeId n(static_cast<std::uint32_t>(i));
      long p = node_capacity(s, r, allowed, n) / x.pod_gpus;
      x.node_pods[i] = p;
      if (p)
        for (SwitchId sw : s.node_ancestors(n)) x.switch_pods[sw.index()] += p;
    }
    const int top = static_cast<int>(c.tiers().size()) - 1;
    int level = r.required_tier_index    ? *r.required_tier_index
                : r.preferred_tier_index ? *r.preferred_tier_index
                                         : kNodeTier;
    std::vector<GpuId> out;
    while (true) {
      std::vector<Domain> doms = domains_at(x, level);
      long largest = 0;
      for (const Domain& d : doms) largest = std::max(largest, d.pods);
      if (largest >= pods) {
        const Domain* best = nullptr;
        for (const Domain& d : doms)
          if (d.pods >= pods && (!best || d.pods < best->pods)) best = &d;
        assign(x, *best, pods, out);
        return out;
      }
      const std::string lname = level == kNodeTier ? "node" : c.tiers()[static_cast<std::size_t>(level)].name;
      if (r.required_tier_index)
        return make_error(ErrorCode::kInfeasible,
                          fmt::format("needs {} pod(s) of {} GPU(s) in one {} (required tier); the "
                                      "largest free {} holds {}",
                                      pods, x.pod_gpus, lname, lname, largest));
      if (level >= top) {
        // Top level: spread over several domains, best fit.
        if (!split(x, doms, pods, out)) return tl::unexpected(shortage_error(s, r, allowed));
        return out;
      }
      ++level;
    }
  }

 private:
  struct Ctx {
    const AllocationState& s;
    const JobRequest& r;
    const NodeMask& allowed;
    std::vector<long> node_pods;
    std::vector<long> switch_pods;
    int pod_gpus;
  };

  static std::vector<Domain> domains_at(const Ctx& x, int level) {
    const Cluster& c = x.s.cluster();
    std::vector<Domain> out;
    if (level == kNodeTier) {
      for (std::size_t i = 0; i < c.node_count(); ++i)
        if (x.node_pods[i]) out.push_back({true, static_cast<std::uint32_t>(i), x.node_pods[i]});
      return out;
    }
    for (SwitchId sw : switches_at_tier(c, level))
      if (x.switch_pods[sw.index()]) out.push_back({false, sw.value, x.switch_pods[sw.index()]});
    return out;
  }

  // Splits `pods` over `doms`: most capacity first, the last one the tightest that fits.
  static bool split(const Ctx& x, std::vector<Domain> doms, long pods, std::vector<GpuId>& out) {
    std::stable_sort(doms.begin(), doms.end(), [](const Domain& a, const Domain& b) { return a.pods > b.pods; });
    std::vector<char> used(doms.size(), 0);
    while (pods > 0) {
      std::size_t pick = doms.size();
      for (std::size_t i = 0; i < doms.size(); ++i)
        if (!used[i] && doms[i].pods >= pods && (pick == doms.size() || doms[i].pods < doms[pick].pods)) pick = i;
      if (pick == doms.size())
        for (std::size_t i = 0; i < doms.size() && pick == doms.size(); ++i)
          if (!used[i] && doms[i].pods > 0) pick = i;
      if (pick == doms.size()) return false;
      used[pick] = 1;
      long take = std::min(pods, doms[pick].pods);
      assign(x, doms[pick], take, out);
      pods -= take;
    }
    return true;
  }

  static void assign(const Ctx& x, const Domain& d, long pods, std::vector<GpuId>& out) {
    const Cluster& c = x.s.cluster();
    if (d.is_node) {
      take_lowest_free(x.s, NodeId(d.id), static_cast<int>(pods * x.pod_gpus), out);
      return;
    }
    SwitchId sw(d.id);
    std::vector<Domain> kids;
    for (SwitchId ch : c.switch_children(sw))
      if (x.switch_pods[ch.index()]) kids.push_back({false, ch.value, x.switch_pods[ch.index()]});
    for (NodeId n : c.switch_nodes(sw))
      if (x.node_pods[n.index()]) kids.push_back({true, n.value, x.node_pods[n.index()]});
    split(x, std::move(kids), pods, out);
  }
};

}  // namespace

const PlacementPolicy& kueue_bestfit_policy() {
  static const KueueBestFit p;
  return p;
}

}  // namespace toposched
