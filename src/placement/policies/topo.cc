// topo: toposched's own, parallelism-aware policy (docs/placement.md).
//
// Training: the job is cut into TP groups ("units" of tp GPUs), which never leave a node
// (or, when tp is larger than a node, an NVLink domain). PP stages are tp x cp x dp GPUs;
// ranks are tp fastest, then cp, dp, pp (Megatron-LM order).
//  1. Scope: one node when the job fits one: the node where it adds the least expected
//     fragmentation for the usual job mix (fragmentation gradient descent, Weng et al.,
//     ATC'23), then the fewest free GPUs (best fit), then the fullest leaf. Else a switch of
//     the lowest tier that can hold every unit (required tier: no higher than it); up to
//     kCandidates switches of that tier are tried, tightest first (best fit).
//  2. In the scope, each PP stage in turn takes its units with best fit at every tier: the
//     child (switch or node) with the least capacity that still holds the rest of the
//     stage, else the one with the most (equal capacities: fewer free GPUs first), and so on
//     down. A stage thus touches as few leaves and nodes as the free capacity allows, and
//     partly used nodes/leaves are used before whole ones.
//  3. Inside a node the GPUs of a stage are the best connected free subset (most NVLinks,
//     then the closest PCIe class), split into TP groups that are themselves best connected.
//  4. Candidates are ranked by predicted communication time when the cost model estimates
//     the request (predict_comm) and the job has at most kCostRankLimit GPUs (to keep
//     decisions under a millisecond), otherwise by a structural score (stages spanning leaves and tiers). Candidates within
//     kNegligibleStepShare of the step time of the fastest are equals; of those, the one
//     leaving the fewest partly used nodes, then the fullest leaves, wins.
// Pods (gpus_per_pod): every node gives the job whole pods' worth of units, and stages are
// cut at pod boundaries, so each pod's ranks lie on one node; several pods share a node.
// Inference: replicas are independent; each goes to the usable node where it adds the least
// expected fragmentation, the tightest of equals (so whole nodes stay free for training).
// Replicas larger than a node are placed like training jobs with one stage per replica.
// inference-pd places the prefill pool and the decode pool as two stages of one scope (KV
// transfer stays close).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "placement/fragmentation.h"
#include "placement/policies/policies.h"
#include "placement/select_util.h"

namespace toposched {
namespace {

constexpr int kCandidates = 4;
// Jobs up to this many GPUs are ranked with the cost model (when it estimates the request).
constexpr int kCostRankLimit = 256;

// Per-decision scratch: GPUs already chosen on each touched node.
using TakenMasks = NodeMap<std::uint64_t>;

// Chooses k free (and not yet taken) GPUs of node n, best connected, in TP-group order.
void choose_gpus(const AllocationState& s, NodeId n, int k, int group, TakenMasks& taken, std::vector<GpuId>& out) {
  const Cluster& c = s.cluster();
  const NodeType& t = c.node_type(n);
  std::uint64_t& mask = taken[n.value];
  if (t.nvswitch) {
    // Every pair equally connected: best_subset below keeps the first GPUs it is given, so
    // the choice is the first k free ones in local order, already in TP-group order. The
    // same answer without the vectors (the simulator asks this for every node of a
    // 4,096-GPU job at every reservation probe).
    for (int l = 0, got = 0; l < t.gpu_count && got < k; ++l)
      if (s.gpu_free(c.node_gpu(n, l)) && !(mask & (std::uint64_t{1} << l))) {
        mask |= std::uint64_t{1} << l;
        out.push_back(c.node_gpu(n, l));
        ++got;
      }
    return;
  }
  std::vector<int> free;
  for (int l = 0; l < t.gpu_count; ++l)
    if (s.gpu_free(c.node_gpu(n, l)) && !(mask & (std::uint64_t{1} << l))) free.push_back(l);
  auto best_subset = [&](const std::vector<int>& from, int size) {
    if (size >= static_cast<int>(from.size()) || t.nvswitch || size <= 1)
      return std::vector<int>(from.begin(),
                              from.begin() + std::min<std::ptrdiff_t>(size, static_cast<std::ptrdiff_t>(from.size())));
    auto score = [&](const std::vector<int>& p) {
      long sc = 0;
      for (std::size_t i = 0; i < p.size(); ++i)
        for (std::size_t j = i + 1; j < p.size(); ++j) sc += link_score(t, p[i], p[j]);
      return sc;
    };
    const int m = static_cast<int>(from.size());
    std::vector<int> best, pick;
    if (m <= 16) {
      long best_score = -1;
      for (std::uint32_t bits = 0; bits < (1u << m); ++bits) {
        if (std::popcount(bits) != size) continue;
        pick.clear();
        for (int i = 0; i < m; ++i)
          if (bits & (1u << i)) pick.push_back(from[static_cast<std::size_t>(i)]);
        long sc = score(pick);
        if (sc > best_score) {
          best_score = sc;
          best = pick;
        }
      }
      return best;
    }
    best = {from[0]};
    while (static_cast<int>(best.size()) < size) {
      int add = -1;
      long add_score = -1;
      for (int g : from) {
        if (std::find(best.begin(), best.end(), g) != best.end()) continue;
        long sc = 0;
        for (int b : best) sc += link_score(t, g, b);
        if (sc > add_score) {
          add_score = sc;
          add = g;
        }
      }
      best.push_back(add);
    }
    std::sort(best.begin(), best.end());
    return best;
  };
  std::vector<int> chosen = best_subset(free, k);
  // Split into TP groups, each the best connected subset of what is left.
  std::vector<int> ordered;
  while (!chosen.empty()) {
    std::vector<int> g = best_subset(chosen, std::min(group, static_cast<int>(chosen.size())));
    for (int l : g) {
      ordered.push_back(l);
      chosen.erase(std::find(chosen.begin(), chosen.end(), l));
    }
  }
  for (int l : ordered) {
    mask |= std::uint64_t{1} << l;
    out.push_back(c.node_gpu(n, l));
  }
}

struct Plan {
  int unit = 1;        // GPUs per unit (TP group or replica)
  int units = 0;       // in the whole job
  int stages = 1;      // PP stages (or prefill/decode pools)
  bool fixed = false;  // nodes give exactly `per_node` units or none
  int per_node = 0;
  // gpus_per_pod: a node gives a multiple of this many units, so every take (and with it
  // every pod's ranks) covers whole pods: lcm(unit, gpus_per_pod) / unit. 1 without pods.
  int pod_units = 1;
};

struct Candidate {
  std::vector<std::pair<NodeId, int>> takes;  // (node, units) in rank order
  double comm = 0;  // predicted communication per step (µs), or the structural score
  double step = 0;  // predicted step time (µs), compute + communication; 0 when not known
  double frag = 0;
  bool ok = false;
};

// Units (TP groups or replicas) each node can still give the job, less what a candidate has
// taken. A request every node serves with all its free GPUs (indexed(): no node mask, model,
// per-node count or exclusivity) derives them from the free counters, so nothing is O(nodes);
// any other request keeps a per-node array filled by one scan of node_capacity.
class NodeUnits {
 public:
  // Indexed: free_gpus(n) / unit.
  NodeUnits(const AllocationState& s, int unit) : s_(&s), unit_(unit), dense_(false) {}
  // Full scan: the given per-node units.
  explicit NodeUnits(std::vector<int> units) : units_(std::move(units)), dense_(true) {}

  static bool indexed(const JobRequest& r, const NodeMask& allowed) {
    return allowed.empty() && !r.exclusive && r.gpus_per_node == 0 && r.gpus_per_pod == 0 && r.gpu_model.empty();
  }
  bool dense() const { return dense_; }
  int operator[](NodeId n) const {
    if (dense_) return units_[n.index()];
    return s_->free_gpus(n) / unit_ - taken_.get(n.value);
  }
  void take(NodeId n, int u) {
    if (dense_)
      units_[n.index()] -= u;
    else
      taken_[n.value] += u;
  }

 private:
  const AllocationState* s_ = nullptr;
  int unit_ = 1;
  std::vector<int> units_;                       // dense: per node
  NodeMap<int> taken_;                           // indexed: units taken per node
  bool dense_;
};

// A communication difference below this share of the step is not worth leaving nodes
// partly used for: the candidate that fragments less wins (docs/placement.md).
constexpr double kNegligibleStepShare = 0.01;

class Topo final : public PlacementPolicy {
 public:
  Topo() : job_sizes_(default_job_sizes()) {}

  std::string_view name() const override { return "topo"; }
  std::string_view summary() const override { return "parallelism-aware, best fit at every tier"; }
  bool handles_tier_constraints() const override { return true; }

  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    const Cluster& c = s.cluster();
    int max_node = 0;
    for (std::size_t i = 0; i < c.node_type_count(); ++i)
      max_node = std::max(max_node, c.node_type_at(NodeTypeId(static_cast<std::uint32_t>(i))).gpu_count);
    if (r.workload == WorkloadKind::kInference && r.replica_gpus <= max_node && !r.exclusive && r.gpus_per_node == 0 &&
        (r.gpus_per_pod == 0 || r.replica_gpus % r.gpus_per_pod == 0))
      return pack_replicas(s, r, allowed, job_sizes_);
    if (r.workload != WorkloadKind::kTraining &&
        (r.workload == WorkloadKind::kInference || r.replica_gpus > max_node)) {
      // Replicas larger than a node (or on exclusive nodes): one training-like stage each.
      JobRequest as_training = r;
      as_training.workload = WorkloadKind::kTraining;
      as_training.pp = r.total_gpus / r.replica_gpus;
      as_training.tp = largest_divisor_at_most(r.replica_gpus, max_node);
      as_training.cp = 1;
      as_training.ep = 1;
      as_training.dp = r.replica_gpus / as_training.tp;
      return select(s, as_training, allowed);
    }
    Plan plan;
    if (r.workload == WorkloadKind::kInferencePD) {
      plan.unit = r.replica_gpus;
      const int replicas = r.total_gpus / r.replica_gpus;
      plan.stages = replicas % 2 == 0 ? 2 : 1;
    } else {
      plan.unit = r.tp;
      plan.stages = r.pp;
    }
    if (plan.unit > max_node) {
      if (r.gpus_per_pod > 0 && plan.unit % r.gpus_per_pod != 0)
        return make_error(ErrorCode::kInfeasible,
                          fmt::format("a TP group of {} GPUs spans nodes and cannot be cut into whole pods of {} GPUs",
                                      plan.unit, r.gpus_per_pod));
      if (c.domain_count() > 0) return place_in_domains(s, r, allowed, plan);
      // No NVLink domain can hold a TP group: split it over whole nodes, kept together.
      JobRequest smaller = r;
      smaller.tp = largest_divisor_at_most(plan.unit, max_node);
      smaller.dp = r.dp * (r.tp / smaller.tp);
      if (r.tp % smaller.tp != 0)
        return make_error(ErrorCode::kInfeasible,
                          fmt::format("tp={} cannot be split over nodes of {} GPUs", r.tp, max_node));
      return select(s, smaller, allowed);
    }
    plan.units = r.total_gpus / plan.unit;
    // Exclusive without a per-node count takes any number of GPUs from whole free nodes
    // (node_capacity counts only those); only a per-node count fixes the units per node.
    plan.fixed = r.gpus_per_node > 0;
    if (plan.fixed) {
      if (r.gpus_per_node % plan.unit != 0)
        return make_error(ErrorCode::kInfeasible, fmt::format("a TP group of {} GPUs does not divide {} GPUs per node",
                                                              plan.unit, r.gpus_per_node));
      plan.per_node = r.gpus_per_node / plan.unit;
      // Stages that do not end on node boundaries are chosen together, so nodes stay whole.
      // per_node is 0 for --exclusive without --gpus-per-node (any split): nothing to align.
      if (plan.per_node > 0 && (plan.units / plan.stages) % plan.per_node != 0) plan.stages = 1;
    }
    if (r.gpus_per_pod > 0) {
      plan.pod_units = std::lcm(plan.unit, r.gpus_per_pod) / plan.unit;
      // Stages cut at whole pods only (else one stage: every take stays whole pods).
      if ((plan.units / plan.stages) % plan.pod_units != 0) plan.stages = 1;
    }
    auto placed = place_units(s, r, allowed, plan);
    if (!placed && placed.error().code == ErrorCode::kInfeasible && groups_may_span_nodes(c, r, plan))
      return place_in_domains(s, r, allowed, plan);
    return placed;
  }

 private:
  // On multi-node NVLink domains (GB200 NVL72: 18 trays of 4 GPUs per domain) a TP group
  // split over trays of one domain is still on NVLink, at the same bandwidth as inside a
  // tray. So when no node holds the groups, they go inside domains rather than wait for a
  // node to empty (a training job that waited there lost more time queued than any split
  // over NVLink costs; docs/placement.md). Not for a fixed per-node count or a required
  // tier, whose placements say where each group must be.
  static bool groups_may_span_nodes(const Cluster& c, const JobRequest& r, const Plan& plan) {
    return c.domain_count() > 0 && plan.unit > 1 && !plan.fixed && !r.required_tier_index &&
           r.workload == WorkloadKind::kTraining && (r.gpus_per_pod == 0 || plan.unit % r.gpus_per_pod == 0);
  }

  const std::vector<JobSizeWeight> job_sizes_;  // the mix fragmentation is judged against

  static int largest_divisor_at_most(int n, int limit) {
    for (int d = std::min(n, limit); d > 1; --d)
      if (n % d == 0) return d;
    return 1;
  }

  // long: the per-switch unit counts from the free-GPU index, then the scope search over them;
  // both read the same counts, built once per decision
  Result<std::vector<GpuId>> place_units(const AllocationState& s, const JobRequest& r, const NodeMask& allowed,
                                         const Plan& plan) const {
    const Cluster& c = s.cluster();
    std::vector<long> sw_units(c.switch_count(), 0);
    long total = 0;
    int best_node_units = 0;
    std::optional<NodeUnits> units;
    if (NodeUnits::indexed(r, allowed)) {
      // From the free-GPU index: O(buckets x switches), not O(nodes).
      units.emplace(s, plan.unit);
      std::vector<std::pair<int, int>> live;  // (bucket, units per node) of the buckets with units
      for (int b = 0; b < s.bucket_count(); ++b) {
        const int u = s.bucket_free(b) / plan.unit;
        if (u > 0 && !s.bucket_nodes(b).empty()) {
          total += static_cast<long>(u) * static_cast<long>(s.bucket_nodes(b).size());
          best_node_units = std::max(best_node_units, u);
          live.emplace_back(b, u);
        }
      }
      // Buckets with no node count nothing anywhere: only the live ones are summed.
      for (std::size_t sw = 0; sw < c.switch_count(); ++sw)
        for (auto [b, u] : live) sw_units[sw] += u * s.switch_bucket_nodes(SwitchId(static_cast<std::uint32_t>(sw)), b);
    } else {
      std::vector<int> node_units(c.node_count(), 0);
      for (std::size_t i = 0; i < c.node_count(); ++i) {
        NodeId n(static_cast<std::uint32_t>(i));
        int cap = node_capacity(s, r, allowed, n);
        int u = plan.fixed ? (cap > 0 ? plan.per_node : 0) : cap / plan.unit;
        u -= u % plan.pod_units;  // whole pods only
        node_units[i] = u;
        if (!u) continue;
        total += u;
        best_node_units = std::max(best_node_units, u);
        for (SwitchId sw : s.node_ancestors(n)) sw_units[sw.index()] += u;
      }
      units.emplace(std::move(node_units));
    }
    const NodeUnits& node_units = *units;
    const int limit_tier = r.required_tier_index ? *r.required_tier_index : std::numeric_limits<int>::max();
    auto unit_text = [&] {
      return plan.unit == 1
                 ? fmt::format("{} GPUs", r.total_gpus)
                 : fmt::format("{} GPUs as {} groups of {} inside one node each", r.total_gpus, plan.units, plan.unit);
    };
    if (total < plan.units)
      return make_error(ErrorCode::kInfeasible,
                        fmt::format("needs {}; only {} such group(s) are free (largest node holds {})", unit_text(),
                                    total, best_node_units));

    // 1. Scope: one node if the job fits in one.
    std::vector<Candidate> cands;
    if (plan.units <= best_node_units && (!plan.fixed || plan.per_node >= plan.units)) {
      const NodeId best = best_single_node(s, plan, node_units);
      Candidate cand;
      cand.takes.push_back({best, plan.units});
      cand.ok = true;
      cands.push_back(std::move(cand));
    } else if (limit_tier == kNodeTier) {
      return make_error(ErrorCode::kInfeasible,
                        fmt::format("needs {} on one node (required tier); the best node holds {} group(s)",
                                    unit_text(), best_node_units));
    } else {
      const int tiers = static_cast<int>(c.tiers().size());
      long largest_at_limit = 0;
      for (int tier = 0; tier < tiers && tier <= limit_tier && cands.empty(); ++tier) {
        std::vector<SwitchId> fits;
        for (SwitchId sw : switches_at_tier(c, tier)) {
          if (tier == limit_tier) largest_at_limit = std::max(largest_at_limit, sw_units[sw.index()]);
          if (sw_units[sw.index()] >= plan.units) fits.push_back(sw);
        }
        std::stable_sort(fits.begin(), fits.end(),
                         [&](SwitchId a, SwitchId b) { return sw_units[a.index()] < sw_units[b.index()]; });
        if (fits.size() > kCandidates) fits.resize(kCandidates);
        for (SwitchId sw : fits) cands.push_back(build(s, plan, node_units, sw_units, sw));
      }
      if (cands.empty()) {
        if (r.required_tier_index)
          return make_error(
              ErrorCode::kInfeasible,
              fmt::format("needs {} under one {} (required tier); the most free under one is {} group(s)", unit_text(),
                          c.tiers()[static_cast<std::size_t>(limit_tier)].name, largest_at_limit));
        cands.push_back(build(s, plan, node_units, sw_units, SwitchId()));  // whole cluster
      }
    }
    auto best = rank_candidates(s, r, plan, cands);
    if (!best)
      return make_error(ErrorCode::kInfeasible, fmt::format("needs {}; no subtree could hold it", unit_text()));
    return std::move(*best);
  }

  // The node for a job that fits one. First, where the job adds the least expected
  // fragmentation for the usual job mix (fragmentation gradient descent: of 2 and 3 free
  // GPUs, a 1-GPU job takes from 3, leaving 2 that a 2-GPU job can use); then best fit in
  // units and in GPUs (of two nodes that each hold one TP group of 4, the one with 4 free
  // GPUs, not the one with 7 that would strand 3); then the node whose leaf has the fewest
  // free GPUs, so whole leaves stay free.
  NodeId best_single_node(const AllocationState& s, const Plan& plan, const NodeUnits& node_units) const {
    if (!node_units.dense()) return best_single_node_indexed(s, plan);
    const Cluster& c = s.cluster();
    const int job_gpus = plan.units * plan.unit;
    const auto growth = [&](NodeId n) {
      const int free = s.free_gpus(n), all = c.node_gpu_count(n);
      return expected_unusable_on_node(free - job_gpus, all, job_sizes_) - expected_unusable_on_node(free, all, job_sizes_);
    };
    const auto tighter = [&](NodeId a, NodeId b) {
      const double grow_a = growth(a), grow_b = growth(b);
      if (std::abs(grow_a - grow_b) > 1e-9) return grow_a < grow_b;
      if (node_units[a] != node_units[b]) return node_units[a] < node_units[b];
      const int fa = s.free_gpus(a), fb = s.free_gpus(b);
      if (fa != fb) return fa < fb;
      const SwitchId la = c.node_switch(a), lb = c.node_switch(b);
      const long ga = la.valid() ? s.switch_free_gpus(la) : 0, gb = lb.valid() ? s.switch_free_gpus(lb) : 0;
      return ga < gb;
    };
    NodeId best;
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      const NodeId n(static_cast<std::uint32_t>(i));
      if (node_units[n] >= plan.units && (!best.valid() || tighter(n, best))) best = n;
    }
    return best;
  }

  // best_single_node from the free-GPU index (an indexed() request: units = free / unit),
  // the same node the scan picks: the node buckets tied on (growth, units, free GPUs), then
  // the leaf with the fewest free GPUs holding one of their nodes (a switchless node counts
  // 0), then the lowest node id. O(buckets + leaves x tied buckets + the nodes of the tied
  // leaves scanned up to their first match).
  NodeId best_single_node_indexed(const AllocationState& s, const Plan& plan) const {
    const Cluster& c = s.cluster();
    const int job_gpus = plan.units * plan.unit;
    std::vector<int> tied;
    double best_grow = 0;
    int best_units = 0, best_free = 0;
    for (int b = 0; b < s.bucket_count(); ++b) {
      const int free = s.bucket_free(b), u = free / plan.unit;
      if (u < plan.units || s.bucket_nodes(b).empty()) continue;
      const int all = s.bucket_node_gpus(b);
      const double g =
          expected_unusable_on_node(free - job_gpus, all, job_sizes_) - expected_unusable_on_node(free, all, job_sizes_);
      const bool same = !tied.empty() && std::abs(g - best_grow) <= 1e-9 && u == best_units && free == best_free;
      const bool better = tied.empty() || (std::abs(g - best_grow) > 1e-9 ? g < best_grow
                                           : u != best_units              ? u < best_units
                                                                          : free < best_free);
      if (same) {
        tied.push_back(b);
      } else if (better) {
        tied.assign(1, b);
        best_grow = g;
        best_units = u;
        best_free = free;
      }
    }
    if (tied.empty()) return NodeId();
    const auto in_tied = [&](NodeId n) { return std::find(tied.begin(), tied.end(), s.node_bucket(n)) != tied.end(); };
    for (NodeId n : s.switchless_nodes())
      if (in_tied(n)) return n;  // leaf free counts 0: fewer than any leaf holding a free GPU
    std::vector<SwitchId> leaves;
    std::int64_t least = std::numeric_limits<std::int64_t>::max();
    for (SwitchId leaf : s.leaf_switches()) {
      // The switch's own nodes of the tied buckets: its subtree counts, unless it also has
      // child switches (then its own nodes are counted one by one).
      std::int64_t held = 0;
      if (c.switch_children(leaf).empty())
        for (int b : tied) held += s.switch_bucket_nodes(leaf, b);
      else
        held = std::count_if(c.switch_nodes(leaf).begin(), c.switch_nodes(leaf).end(), in_tied);
      if (held == 0) continue;
      const std::int64_t lf = s.switch_free_gpus(leaf);
      if (lf < least) {
        least = lf;
        leaves.clear();
      }
      if (lf == least) leaves.push_back(leaf);
    }
    NodeId best;
    for (SwitchId leaf : leaves)
      for (NodeId n : c.switch_nodes(leaf)) {
        if (best.valid() && n.value >= best.value) break;
        if (in_tied(n)) {
          best = n;
          break;
        }
      }
    return best;
  }

  // 4. The GPUs of the best candidate (nullopt: none is ok): the least communication, except
  // that candidates within a negligible share of the step of it are equals, and of those the
  // one leaving the cluster least fragmented wins.
  static std::optional<std::vector<GpuId>> rank_candidates(const AllocationState& s, const JobRequest& r, const Plan& plan,
                                                           std::vector<Candidate>& cands) {
    std::vector<std::vector<GpuId>> gpus(cands.size());
    const Candidate* fastest = nullptr;
    const bool ranking = std::count_if(cands.begin(), cands.end(), [](const Candidate& k) { return k.ok; }) > 1;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (!cands[i].ok) continue;
      gpus[i] = materialize(s, cands[i], plan);
      if (ranking) score(s, r, plan, cands[i], gpus[i]);
      if (!fastest || cands[i].comm < fastest->comm) fastest = &cands[i];
    }
    if (!fastest) return std::nullopt;
    const double equal_within = std::max(fastest->comm * 1e-3, fastest->step * kNegligibleStepShare);
    std::size_t best = cands.size();
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (!cands[i].ok || cands[i].comm > fastest->comm + equal_within) continue;
      if (best == cands.size() || cands[i].frag < cands[best].frag ||
          (cands[i].frag == cands[best].frag && cands[i].comm < cands[best].comm))
        best = i;
    }
    return std::move(gpus[best]);
  }

  // 2. Per-stage best fit inside the scope (invalid scope = the whole cluster).
  static Candidate build(const AllocationState& s, const Plan& plan, NodeUnits node_units,
                         std::vector<long> sw_units, SwitchId scope) {
    Candidate cand;
    const int per_stage = plan.units / plan.stages;
    for (int st = 0; st < plan.stages; ++st) {
      long need = per_stage;
      take(s, plan, scope, need, node_units, sw_units, cand.takes);
      if (need > 0) return cand;
    }
    cand.ok = true;
    return cand;
  }

  // One child of a switch (or of the whole cluster): a switch or a node with free units.
  struct Child {
    bool is_node;
    std::uint32_t id;
    long units;
    long free_gpus;  // breaks ties between equal unit counts: fewer strands fewer GPUs
  };

  static void take(const AllocationState& s, const Plan& plan, SwitchId sw, long& need, NodeUnits& node_units,
                   std::vector<long>& sw_units, std::vector<std::pair<NodeId, int>>& takes) {
    const Cluster& c = s.cluster();
    std::vector<Child> kids;
    auto add_switch = [&](SwitchId ch) {
      if (sw_units[ch.index()] > 0) kids.push_back({false, ch.value, sw_units[ch.index()], s.switch_free_gpus(ch)});
    };
    auto add_node = [&](NodeId n) {
      if (node_units[n] > 0) kids.push_back({true, n.value, node_units[n], s.free_gpus(n)});
    };
    if (sw.valid()) {
      for (SwitchId ch : c.switch_children(sw)) add_switch(ch);
      for (NodeId n : c.switch_nodes(sw)) add_node(n);
    } else {
      for (SwitchId root : c.root_switches()) add_switch(root);
      for (NodeId n : s.switchless_nodes()) add_node(n);
    }
    take_sorted(s, plan, need, node_units, sw_units, takes, kids);
    while (need > 0) {
      // Tightest child that holds the rest, else the child with the most.
      std::size_t pick = kids.size();
      for (std::size_t i = 0; i < kids.size(); ++i) {
        if (kids[i].units <= 0) continue;
        if (pick == kids.size()) {
          pick = i;
          continue;
        }
        const bool fits = kids[i].units >= need, pick_fits = kids[pick].units >= need;
        const bool same = kids[i].units == kids[pick].units, fewer_free = kids[i].free_gpus < kids[pick].free_gpus;
        if ((fits && !pick_fits) || (fits && pick_fits && (kids[i].units < kids[pick].units || (same && fewer_free))) ||
            (!fits && !pick_fits && (kids[i].units > kids[pick].units || (same && fewer_free))))
          pick = i;
      }
      if (pick == kids.size()) return;
      Child& k = kids[pick];
      take_from_child(s, plan, k, need, node_units, sw_units, takes);
    }
  }

  // Takes up to `need` units from one child: a node's directly, a switch's through take's
  // scan of its subtree (a subtree that gives nothing is used up).
  static void take_from_child(const AllocationState& s, const Plan& plan, Child& k, long& need, NodeUnits& node_units,
                              std::vector<long>& sw_units, std::vector<std::pair<NodeId, int>>& takes) {
    long want = std::min(k.units, need);
    if (k.is_node) {
      NodeId n(k.id);
      node_units.take(n, static_cast<int>(want));
      for (SwitchId a : s.node_ancestors(n)) sw_units[a.index()] -= want;
      if (!takes.empty() && takes.back().first == n)
        takes.back().second += static_cast<int>(want);
      else
        takes.push_back({n, static_cast<int>(want)});
      need -= want;
      k.units -= want;
      return;
    }
    const long before = want;
    take(s, plan, SwitchId(k.id), want, node_units, sw_units, takes);
    const long got = before - want;
    need -= got;
    k.units -= got;
    if (got == 0) k.units = 0;
  }

  // The picks of take's scan below, in O(children log children) instead of O(children x
  // picks): with the children sorted by (units desc, free GPUs asc, position), the scan's
  // choice is the first child when none holds the rest, else the first of the smallest
  // children that do. A child chosen while none holds the rest is used up (and the scan
  // would not see it again); a choice that holds the rest ends the stage. Stops, leaving the
  // rest to the scan, as soon as a subtree gives fewer units than it counted (never with
  // consistent counts).
  static void take_sorted(const AllocationState& s, const Plan& plan, long& need, NodeUnits& node_units,
                          std::vector<long>& sw_units, std::vector<std::pair<NodeId, int>>& takes,
                          std::vector<Child>& kids) {
    std::vector<std::uint32_t> order(kids.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return kids[a].units != kids[b].units ? kids[a].units > kids[b].units : kids[a].free_gpus < kids[b].free_gpus;
    });
    auto first = order.begin();
    while (need > 0) {
      while (first != order.end() && kids[*first].units <= 0) ++first;
      if (first == order.end()) return;
      auto pick = first;
      if (kids[*first].units >= need) {
        auto fits_end = std::partition_point(first, order.end(), [&](std::uint32_t i) { return kids[i].units >= need; });
        const long smallest = kids[*std::prev(fits_end)].units;
        pick = std::partition_point(first, fits_end, [&](std::uint32_t i) { return kids[i].units > smallest; });
      }
      Child& k = kids[*pick];
      take_from_child(s, plan, k, need, node_units, sw_units, takes);
      // Counts and units disagreed (a subtree gave less than it counted): the scan goes on
      // from here, as the sorted order may no longer hold.
      if (need > 0 && (k.units > 0 || pick != first)) return;
    }
  }

  static std::vector<GpuId> materialize(const AllocationState& s, const Candidate& cand, const Plan& plan) {
    TakenMasks taken;
    std::vector<GpuId> out;
    out.reserve(static_cast<std::size_t>(plan.units * plan.unit));
    for (auto [n, u] : cand.takes) choose_gpus(s, n, u * plan.unit, plan.unit, taken, out);
    return out;
  }

  // Lower is better: predicted communication (or the structural score), then fragmentation.
  static void score(const AllocationState& s, const JobRequest& r, const Plan& plan, Candidate& cand,
                    const std::vector<GpuId>& gpus) {
    const Cluster& c = s.cluster();
    std::optional<CommPrediction> pred;
    if (static_cast<int>(gpus.size()) <= kCostRankLimit) pred = predict_comm(s, gpus, r);
    if (pred) {
      cand.comm = pred->step_comm_us;
      cand.step = pred->step_compute_us > 0 ? pred->step_compute_us + pred->step_comm_us : 0;
    } else {
      // Structural: for each stage, the tier that joins its nodes and the leaves it touches.
      const std::size_t stage = gpus.size() / static_cast<std::size_t>(plan.stages);
      double sc = 0;
      for (int st = 0; st < plan.stages; ++st) {
        std::vector<std::uint32_t> leaves;
        NodeId first = c.gpu_node(gpus[static_cast<std::size_t>(st) * stage]);
        int widest = -1;
        for (std::size_t i = static_cast<std::size_t>(st) * stage; i < (static_cast<std::size_t>(st) + 1) * stage;
             i += static_cast<std::size_t>(plan.unit)) {
          NodeId n = c.gpu_node(gpus[i]);
          leaves.push_back(c.node_switch(n).value);
          if (n != first) widest = std::max(widest, c.node_path(first, n).distance());
        }
        std::sort(leaves.begin(), leaves.end());
        leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
        sc += 1e4 * (widest + 1) + 1e2 * static_cast<double>(leaves.size());
      }
      cand.comm = sc;
    }
    // Fragmentation: the change in partly used nodes (a whole node broken counts +1, a
    // partly used one filled -1), then the free capacity left in the leaves touched (best
    // fit prefers leaves that end up fuller).
    double broken = 0, leaf_left = 0;
    std::vector<std::uint32_t> seen_leaves;
    NodeMap<int> taken_on;
    for (auto [n, u] : cand.takes) {
      taken_on[n.value] += u * plan.unit;
      seen_leaves.push_back(c.node_switch(n).value);
    }
    // A sum of small integers: exact in any order.
    taken_on.for_each([&](std::uint32_t node, int took) {
      const NodeId n(node);
      const int before = s.free_gpus(n), after = before - took, all = c.node_gpu_count(n);
      broken += static_cast<double>(after > 0 && after < all) - static_cast<double>(before > 0 && before < all);
    });
    std::sort(seen_leaves.begin(), seen_leaves.end());
    seen_leaves.erase(std::unique(seen_leaves.begin(), seen_leaves.end()), seen_leaves.end());
    for (std::uint32_t l : seen_leaves)
      if (l != SwitchId::kInvalidValue) leaf_left += static_cast<double>(s.switch_free_gpus(SwitchId(l)));
    cand.frag =
        broken * 1e6 + leaf_left - static_cast<double>(gpus.size()) * static_cast<double>(seen_leaves.size() > 0);
  }

  // Inference replicas that fit a node: best fit per replica over the usable nodes.
  static Result<std::vector<GpuId>> pack_replicas(const AllocationState& s, const JobRequest& r,
                                                  const NodeMask& allowed, const std::vector<JobSizeWeight>& job_sizes) {
    const Cluster& c = s.cluster();
    const int size = r.replica_gpus;
    // Min-heaps of the usable nodes by free GPUs (the top is the lowest node id): from the
    // free-GPU index for an indexed request, else from a scan of node_capacity.
    std::vector<std::vector<std::uint32_t>> bucket;
    auto add = [&](int free, std::uint32_t node) {
      if (free < size) return;
      if (bucket.size() <= static_cast<std::size_t>(free)) bucket.resize(static_cast<std::size_t>(free) + 1);
      bucket[static_cast<std::size_t>(free)].push_back(node);
    };
    if (NodeUnits::indexed(r, allowed)) {
      for (int b = 0; b < s.bucket_count(); ++b)
        if (s.bucket_free(b) >= size)
          for (NodeId n : s.bucket_nodes(b)) add(s.bucket_free(b), n.value);
    } else {
      for (std::size_t i = 0; i < c.node_count(); ++i)
        add(node_capacity(s, r, allowed, NodeId(static_cast<std::uint32_t>(i))), static_cast<std::uint32_t>(i));
    }
    const int max_free = bucket.empty() ? 0 : static_cast<int>(bucket.size()) - 1;
    bucket.resize(static_cast<std::size_t>(max_free) + 1);
    for (auto& b : bucket) std::make_heap(b.begin(), b.end(), std::greater<>());
    TakenMasks taken;
    std::vector<GpuId> out;
    const int replicas = r.total_gpus / size;
    for (int k = 0; k < replicas; ++k) {
      // The bucket where a replica adds the least expected fragmentation, the tightest of
      // equals (fragmentation gradient descent, as for single-node training jobs).
      int f = max_free + 1;
      double f_growth = 0;
      for (int b = size; b <= max_free; ++b) {
        if (bucket[static_cast<std::size_t>(b)].empty()) continue;
        const int all = c.node_gpu_count(NodeId(bucket[static_cast<std::size_t>(b)].front()));
        const double g = expected_unusable_on_node(b - size, all, job_sizes) - expected_unusable_on_node(b, all, job_sizes);
        if (f > max_free || g < f_growth - 1e-9) {
          f = b;
          f_growth = g;
        }
      }
      if (f > max_free)
        return make_error(
            ErrorCode::kInfeasible,
            fmt::format("needs {} replicas of {} GPUs, each inside one node; only {} fit", replicas, size, k));
      auto& from = bucket[static_cast<std::size_t>(f)];
      std::pop_heap(from.begin(), from.end(), std::greater<>());
      std::uint32_t node = from.back();
      from.pop_back();
      choose_gpus(s, NodeId(node), size, size, taken, out);
      if (f - size >= size) {
        auto& b = bucket[static_cast<std::size_t>(f - size)];
        b.push_back(node);
        std::push_heap(b.begin(), b.end(), std::greater<>());
      }
    }
    return out;
  }

  // TP groups larger than a node: each inside one accelerator (multi-node NVLink) domain,
  // each PP stage inside one domain when one holds it.
  // long: TP groups to domains, then each group's GPUs in the same pass over the domains' free state
  static Result<std::vector<GpuId>> place_in_domains(const AllocationState& s, const JobRequest& r,
                                                     const NodeMask& allowed, const Plan& plan) {
    const Cluster& c = s.cluster();
    const int groups = r.total_gpus / plan.unit;
    std::vector<long> usable(c.domain_count(), 0);
    long largest = 0;
    long total_groups = 0;
    for (std::size_t d = 0; d < c.domain_count(); ++d) {
      for (NodeId n : c.domain_nodes(DomainId(static_cast<std::uint32_t>(d))))
        usable[d] += node_capacity(s, r, allowed, n);
      largest = std::max(largest, usable[d]);
      total_groups += usable[d] / plan.unit;
    }
    if (total_groups < groups) {
      if (groups == 1 || largest < plan.unit)
        return make_error(
            ErrorCode::kInfeasible,
            fmt::format("needs {} GPUs in one NVLink domain; the largest free one has {}", plan.unit, largest));
      return make_error(ErrorCode::kInfeasible,
                        fmt::format("needs {} groups of {} GPUs, each in one NVLink domain; only {} fit", groups,
                                    plan.unit, total_groups));
    }
    // Each PP stage in one domain when it fits (its DP all-reduce then stays on NVLink):
    // the tightest domain that holds the whole stage; a stage no domain holds is spread
    // best fit (tightest domain holding the rest of it, else the largest).
    std::vector<long> left(c.domain_count(), 0);
    for (std::size_t d = 0; d < c.domain_count(); ++d) left[d] = usable[d] / plan.unit;
    auto pick_domain = [&](long need, bool whole) {
      std::size_t pick = c.domain_count();
      for (std::size_t d = 0; d < c.domain_count(); ++d) {
        if (left[d] == 0 || (whole && left[d] < need)) continue;
        if (pick == c.domain_count()) {
          pick = d;
          continue;
        }
        const long g = left[d], pg = left[pick];
        if ((g >= need && (pg < need || g < pg)) || (g < need && pg < need && g > pg)) pick = d;
      }
      return pick;
    };
    std::vector<std::uint32_t> group_domain;  // per TP group, in rank order
    group_domain.reserve(static_cast<std::size_t>(groups));
    const int per_stage = groups / std::max(1, plan.stages);
    for (int st = 0; st < plan.stages; ++st) {
      long need = per_stage;
      std::size_t whole = pick_domain(need, true);
      while (need > 0) {
        std::size_t d = whole != c.domain_count() ? whole : pick_domain(need, false);
        long take = std::min(need, left[d]);
        group_domain.insert(group_domain.end(), static_cast<std::size_t>(take), static_cast<std::uint32_t>(d));
        left[d] -= take;
        need -= take;
      }
    }
    // Each group's GPUs: the domain's fullest-free nodes first, so it spans few trays.
    std::vector<GpuId> out;
    out.reserve(static_cast<std::size_t>(r.total_gpus));
    TakenMasks taken;
    for (std::uint32_t d : group_domain) {
      std::vector<NodeId> nodes = c.domain_nodes(DomainId(d));
      auto remaining = [&](NodeId n) {
        return std::min(node_capacity(s, r, allowed, n), s.free_gpus(n) - std::popcount(taken.get(n.value)));
      };
      std::stable_sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) { return remaining(a) > remaining(b); });
      int need = plan.unit;
      for (NodeId n : nodes) {
        int k = std::min(need, remaining(n));
        if (r.gpus_per_pod > 0) k -= k % r.gpus_per_pod;  // whole pods (the group is a multiple of one)
        if (k <= 0) continue;
        std::uint64_t& mask = taken[n.value];
        int got = 0;
        for (int l = 0; l < c.node_gpu_count(n) && got < k; ++l) {
          GpuId g = c.node_gpu(n, l);
          if (!s.gpu_free(g) || (mask & (std::uint64_t{1} << l))) continue;
          mask |= std::uint64_t{1} << l;
          out.push_back(g);
          ++got;
        }
        need -= got;
        if (need == 0) break;
      }
    }
    return out;
  }
};

}  // namespace

const PlacementPolicy& topo_policy() {
  static const Topo p;
  return p;
}

}  // namespace toposched
