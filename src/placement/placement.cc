#include "placement/placement.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "placement/policies/policies.h"
#include "placement/select_util.h"
#include "topology/hostlist.h"

namespace toposched {

const std::vector<const PlacementPolicy*>& placement_policies() {
  static const std::vector<const PlacementPolicy*> all = {
      &first_fit_policy(),   &random_policy(),        &slurm_tree_policy(),
      &slurm_block_policy(), &kueue_bestfit_policy(), &topo_policy(),
  };
  return all;
}

const std::vector<const PlacementPolicy*>& policy_variants() {
  static const std::vector<const PlacementPolicy*> all = {&kueue_balanced_policy()};
  return all;
}

const Registry<const PlacementPolicy*>& policy_registry() {
  static const Registry<const PlacementPolicy*> policies = [] {
    std::vector<Registry<const PlacementPolicy*>::Row> rows;
    for (const PlacementPolicy* p : placement_policies()) rows.push_back({std::string(p->name()), std::string(p->summary()), p});
    for (const PlacementPolicy* p : policy_variants()) rows.push_back({std::string(p->name()), std::string(p->summary()), p});
    return Registry<const PlacementPolicy*>("policy", std::move(rows));
  }();
  return policies;
}

Result<const PlacementPolicy*> find_policy(std::string_view name) { return policy_registry().find(name); }

namespace {
// The GPUs in increasing id order (duplicates kept): what std::sort gives, by an LSD radix
// sort (8 bits a pass, as many passes as the largest id needs) for jobs of hundreds or
// thousands of GPUs, which the simulator's reservation probes check many times a run.
std::vector<GpuId> sorted_gpus(std::span<const GpuId> gpus) {
  std::vector<GpuId> v(gpus.begin(), gpus.end());
  if (v.size() < 256) {
    std::sort(v.begin(), v.end());
    return v;
  }
  std::uint32_t largest = 0;
  for (GpuId g : v) largest = std::max(largest, g.value);
  std::vector<GpuId> tmp(v.size());
  for (int shift = 0; shift < 32 && (largest >> shift) != 0; shift += 8) {
    std::array<std::size_t, 257> count{};
    for (GpuId g : v) ++count[((g.value >> shift) & 0xffu) + 1];
    for (std::size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
    for (GpuId g : v) tmp[count[(g.value >> shift) & 0xffu]++] = g;
    v.swap(tmp);
  }
  return v;
}

// check_placement's answer when it is "valid", in one pass without sorting, for a request
// that constrains nothing per tier or switch count and nothing per node beyond a GPU count
// (the simulator's and most front ends' requests): every GPU in range, free, seen once (a
// per-thread stamp per GPU), on a node of the requested model, and with gpus_per_node, that
// many on every node used (counted per node under the same stamp). False means "not shown
// valid": check_placement then runs its full check, which finds the same first fault in the
// same (sorted) order.
bool plainly_valid(const AllocationState& state, const JobRequest& r, std::span<const GpuId> gpus) {
  if (r.exclusive || r.gpus_per_pod > 0 || r.required_tier_index || r.max_switches > 0) return false;
  const Cluster& c = state.cluster();
  thread_local std::vector<std::uint32_t> seen;  // per GPU: the stamp of the last check that saw it
  thread_local std::uint32_t stamp = 0;
  if (seen.size() < c.gpu_count()) seen.resize(c.gpu_count(), 0);
  if (++stamp == 0) {  // wrapped: no stale stamp may equal a new one
    std::fill(seen.begin(), seen.end(), 0);
    stamp = 1;
  }
  thread_local std::vector<std::uint32_t> node_seen;  // per node: the stamp of the last check that counted it
  thread_local std::vector<int> node_count;           // per node: the job's GPUs on it, under node_seen's stamp
  thread_local std::vector<NodeId> nodes;             // the nodes counted by this check
  const bool per_node = r.gpus_per_node > 0;
  if (per_node && node_seen.size() < c.node_count()) {
    node_seen.resize(c.node_count(), 0);
    node_count.resize(c.node_count(), 0);
  }
  if (stamp == 1) std::fill(node_seen.begin(), node_seen.end(), 0);  // the GPU stamps restarted
  nodes.clear();
  NodeId last;
  for (GpuId g : gpus) {
    if (!g.valid() || g.index() >= c.gpu_count() || seen[g.index()] == stamp || !state.gpu_free(g)) return false;
    seen[g.index()] = stamp;
    const NodeId n = c.gpu_node(g);
    if (n != last && !model_matches(r, c, n)) return false;
    last = n;
    if (per_node) {
      if (node_seen[n.index()] != stamp) {
        node_seen[n.index()] = stamp;
        node_count[n.index()] = 0;
        nodes.push_back(n);
      }
      ++node_count[n.index()];
    }
  }
  for (NodeId n : nodes)
    if (node_count[n.index()] != r.gpus_per_node) return false;
  return true;
}
// gpus_per_pod: pod k holds ranks [k*G, (k+1)*G), all on one node (the GPUs are known to
// be in the cluster).
Result<void> check_pods(const Cluster& c, const JobRequest& r, std::span<const GpuId> gpus) {
  if (r.gpus_per_pod <= 0) return {};
  const std::size_t pod = static_cast<std::size_t>(r.gpus_per_pod);
  for (std::size_t first = 0; first < gpus.size(); first += pod) {
    const NodeId n = c.gpu_node(gpus[first]);
    for (std::size_t i = first + 1; i < std::min(first + pod, gpus.size()); ++i)
      if (c.gpu_node(gpus[i]) != n)
        return make_error(
            ErrorCode::kInfeasible,
            fmt::format("pod {} (ranks {}-{}) spans nodes {} and {}; each pod's GPUs must be on one node", first / pod,
                        first, first + pod - 1, c.node_name(n), c.node_name(c.gpu_node(gpus[i]))));
  }
  return {};
}
}  // namespace

Result<void> check_placement(const AllocationState& state, const JobRequest& r, std::span<const GpuId> gpus) {
  const Cluster& c = state.cluster();
  auto fail = [](std::string m) { return make_error(ErrorCode::kInfeasible, std::move(m)); };
  if (static_cast<int>(gpus.size()) != r.total_gpus)
    return fail(fmt::format("placement has {} GPUs, the job needs {}", gpus.size(), r.total_gpus));
  if (plainly_valid(state, r, gpus)) return {};
  // Sorted copy: duplicates are neighbours, and a node's GPUs are contiguous ids.
  const std::vector<GpuId> sorted = sorted_gpus(gpus);
  std::vector<std::pair<NodeId, int>> per_node;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    GpuId g = sorted[i];
    if (!g.valid() || g.index() >= c.gpu_count()) return fail("placement names a GPU outside the cluster");
    if (i > 0 && sorted[i - 1] == g) return fail(fmt::format("GPU {} appears twice", g.value));
    if (!state.gpu_free(g))
      return fail(fmt::format("GPU {}:{} is not free", c.node_name(c.gpu_node(g)), c.gpu_local_index(g)));
    NodeId n = c.gpu_node(g);
    if (!per_node.empty() && per_node.back().first == n) {
      ++per_node.back().second;
      continue;
    }
    if (!model_matches(r, c, n))
      return fail(fmt::format("node {} has {} GPUs, not '{}'", c.node_name(n), c.node_type(n).gpu_model, r.gpu_model));
    per_node.emplace_back(n, 1);
  }
  std::vector<std::uint32_t> leaves;
  for (auto [n, count] : per_node) {
    if (r.exclusive && count != c.node_gpu_count(n) && r.gpus_per_node == c.node_gpu_count(n))
      return fail(
          fmt::format("exclusive job uses {} of node {}'s {} GPUs", count, c.node_name(n), c.node_gpu_count(n)));
    if (r.exclusive && !state.node_whole_free(n))
      return fail(fmt::format("exclusive job shares node {}", c.node_name(n)));
    if (r.gpus_per_node > 0 && count != r.gpus_per_node)
      return fail(fmt::format("node {} holds {} GPUs of the job, not {}", c.node_name(n), count, r.gpus_per_node));
    leaves.push_back(c.node_switch(n).value);
  }
  std::sort(leaves.begin(), leaves.end());
  leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
  if (r.required_tier_index) {
    int tier = *r.required_tier_index;
    if (tier == kNodeTier) {
      if (per_node.size() != 1) return fail("required tier 'node': the GPUs are on more than one node");
    } else {
      SwitchId first;
      for (auto [node, count] : per_node) {
        SwitchId s = ancestor_at_tier(state, node, tier);
        if (!s.valid() || (first.valid() && s != first))
          return fail(fmt::format("required tier '{}': the GPUs are not under one switch of that tier",
                                  c.tiers()[static_cast<std::size_t>(tier)].name));
        first = s;
      }
    }
  }
  if (r.max_switches > 0 && static_cast<int>(leaves.size()) > r.max_switches)
    return fail(fmt::format("uses {} leaf switches, more than --switches={}", leaves.size(), r.max_switches));
  return check_pods(c, r, gpus);
}

namespace {

// Runs the policy under the required tier: one switch (or node) of that tier at a time, in
// id order, skipping those without enough free GPUs; the first success wins.
Result<std::vector<GpuId>> select_in_tier(const AllocationState& s, const JobRequest& r, const PlacementPolicy& p,
                                          int tier) {
  const Cluster& c = s.cluster();
  std::string tier_name = tier == kNodeTier ? "node" : c.tiers()[static_cast<std::size_t>(tier)].name;
  std::int64_t largest = 0;
  if (tier == kNodeTier) {
    NodeMask mask(c.node_count(), 0);
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      NodeId n(static_cast<std::uint32_t>(i));
      int cap = node_capacity(s, r, {}, n);
      largest = std::max<std::int64_t>(largest, cap);
      if (cap < r.total_gpus) continue;
      mask[i] = 1;
      auto got = p.select(s, r, mask);
      mask[i] = 0;
      if (got) return got;
    }
  } else {
    for (SwitchId sw : switches_at_tier(c, tier)) {
      std::int64_t free = s.switch_free_gpus(sw);
      largest = std::max(largest, free);
      if (free < r.total_gpus) continue;
      auto got = p.select(s, r, subtree_mask(c, sw));
      if (got) return got;
    }
  }
  return make_error(ErrorCode::kInfeasible,
                    fmt::format("needs {} GPUs under one {} (required tier); the most free under one is {}",
                                r.total_gpus, tier_name, largest));
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

// The local GPU indices of each of a placement's nodes, in rank order, in one flat array:
// node i's are at(i) (a vector per node cost thousands of allocations per large job).
struct NodeLocals {
  std::vector<int> flat;
  std::vector<std::uint32_t> start;  // node i's indices are flat[start[i], start[i + 1])
  std::span<const int> at(std::size_t i) const { return {flat.data() + start[i], flat.data() + start[i + 1]}; }
};

// long: every field of a placement's explanation from one rank order, which each step shares
// The path levels among a placement's GPUs, by distance: every pair inside a node, and
// between nodes (each node against the first and its neighbour in node order: the widest
// level always shows up among those).
std::map<int, std::string> spanned_levels(const Cluster& c, const std::vector<NodeId>& nodes,
                                          const NodeLocals& locals) {
  std::map<int, std::string> levels;
  auto note = [&](const Path& path) {
    // level_name builds a string: only for a level not seen yet.
    if (!levels.contains(path.distance())) levels.emplace(path.distance(), c.level_name(path));
  };
  // A path inside a node depends only on the node's type and the two local indices, so a
  // node whose type and local indices were seen already adds no level.
  std::vector<std::pair<NodeTypeId, std::size_t>> seen;  // (type, index into locals) of each pattern walked
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeTypeId type = c.node_type_id(nodes[i]);
    const std::span<const int> mine = locals.at(i);
    if (std::any_of(seen.begin(), seen.end(),
                    [&](const auto& x) { return x.first == type && std::ranges::equal(locals.at(x.second), mine); }))
      continue;
    seen.emplace_back(type, i);
    for (std::size_t a = 0; a < mine.size(); ++a)
      for (std::size_t b = a + 1; b < mine.size(); ++b)
        note(c.path(c.node_gpu(nodes[i], mine[a]), c.node_gpu(nodes[i], mine[b])));
  }
  std::vector<NodeId> sorted = nodes;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    note(c.node_path(sorted[0], sorted[i]));
    note(c.node_path(sorted[i - 1], sorted[i]));
  }
  return levels;
}

// The most leaf switches (an invalid switch counting as one) any of the `pp` stages of
// consecutive ranks touches.
int max_stage_leaves(const Cluster& c, const std::vector<GpuId>& gpus, int pp) {
  const std::size_t stage = gpus.size() / static_cast<std::size_t>(pp);
  std::vector<std::uint32_t> sl;
  int most = 0;
  for (int st = 0; st < pp && stage > 0; ++st) {
    sl.clear();
    // Consecutive ranks mostly share a node, so a switch equal to the last one pushed is
    // skipped: the count of distinct switches is the same, the sort shorter.
    for (std::size_t i = static_cast<std::size_t>(st) * stage; i < (static_cast<std::size_t>(st) + 1) * stage; ++i) {
      const std::uint32_t sw = c.node_switch(c.gpu_node(gpus[i])).value;
      if (sl.empty() || sl.back() != sw) sl.push_back(sw);
    }
    std::sort(sl.begin(), sl.end());
    most = std::max(most, static_cast<int>(std::unique(sl.begin(), sl.end()) - sl.begin()));
  }
  return most;
}

// The nodes of `gpus` in first-rank order, and each node's local GPU indices in rank order.
// A node's position is found through a per-thread table indexed by node and stamped per
// call (no hashing per GPU: jobs of thousands of GPUs come through here).
void nodes_in_rank_order(const Cluster& c, const std::vector<GpuId>& gpus, std::vector<NodeId>& nodes,
                         NodeLocals& locals) {
  thread_local std::vector<std::uint32_t> stamp;  // per node: the call that last saw it
  thread_local std::vector<std::uint32_t> pos;    // per node: its index in `nodes` then
  thread_local std::uint32_t call = 0;
  if (stamp.size() < c.node_count()) stamp.resize(c.node_count(), 0), pos.resize(c.node_count(), 0);
  if (++call == 0) {  // wrapped: no stale stamp may equal a new one
    std::fill(stamp.begin(), stamp.end(), 0);
    call = 1;
  }
  // Pass 1: the nodes in first-rank order and how many GPUs each holds; pass 2: each
  // node's local indices in rank order, into its slice of `flat`.
  for (GpuId g : gpus) {
    const NodeId n = c.gpu_node(g);
    if (stamp[n.index()] != call) {
      stamp[n.index()] = call;
      pos[n.index()] = static_cast<std::uint32_t>(nodes.size());
      nodes.push_back(n);
      locals.start.push_back(0);
    }
    ++locals.start[pos[n.index()]];
  }
  std::uint32_t next = 0;
  for (std::uint32_t& st : locals.start) next += std::exchange(st, next);  // counts to starts
  locals.start.push_back(next);
  locals.flat.resize(gpus.size());
  std::vector<std::uint32_t> fill(locals.start.begin(), locals.start.end() - 1);
  for (GpuId g : gpus) locals.flat[fill[pos[c.gpu_node(g).index()]]++] = c.gpu_local_index(g);
}

void describe(const AllocationState& s, const JobRequest& r, Placement& p, const PlacementPolicy& policy) {
  const Cluster& c = s.cluster();
  const auto& gpus = p.gpus_by_rank;
  // Nodes in first-rank order with their local indices in rank order.
  std::vector<NodeId> nodes;
  NodeLocals locals;
  nodes_in_rank_order(c, gpus, nodes, locals);
  std::vector<std::string> names;
  names.reserve(nodes.size());
  p.cuda_visible_devices.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    names.push_back(c.node_name(nodes[i]));
    std::string dev;
    for (int l : locals.at(i)) {
      if (!dev.empty()) dev += ',';
      char buf[16];
      dev.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, l).ptr - buf));
    }
    p.cuda_visible_devices.emplace_back(names.back(), std::move(dev));
  }
  p.nodes_hostlist = compress_hostlist(names);
  p.node_count = static_cast<int>(nodes.size());

  const std::map<int, std::string> levels = spanned_levels(c, nodes, locals);
  std::vector<std::uint32_t> leaves;
  for (NodeId n : nodes)
    if (c.node_switch(n).valid()) leaves.push_back(c.node_switch(n).value);
  std::sort(leaves.begin(), leaves.end());
  p.leaf_switch_count = static_cast<int>(std::unique(leaves.begin(), leaves.end()) - leaves.begin());
  for (auto& [d, name] : levels) {
    p.levels_spanned.push_back(name);
    if (name.starts_with("tier:")) p.tiers_spanned.push_back(name.substr(5));
  }

  // TP groups and PP stages (training ranks: tp fastest, pp slowest).
  const int tp = std::max(1, r.tp);
  for (std::size_t g0 = 0; g0 + static_cast<std::size_t>(tp) <= gpus.size(); g0 += static_cast<std::size_t>(tp)) {
    NodeId n0 = c.gpu_node(gpus[g0]);
    DomainId d0 = c.node_domain(n0);
    for (std::size_t k = 1; k < static_cast<std::size_t>(tp); ++k) {
      NodeId n = c.gpu_node(gpus[g0 + k]);
      if (n != n0 && (!d0.valid() || c.node_domain(n) != d0)) {
        ++p.tp_groups_split;
        break;
      }
    }
  }
  const int pp = r.workload == WorkloadKind::kTraining ? std::max(1, r.pp) : 1;
  p.max_stage_leaves = max_stage_leaves(c, gpus, pp);

  std::string text =
      fmt::format("Policy {} ({}) placed job {}: {} GPUs on {} node{} ({})", policy.name(), policy.summary(), p.job_id,
                  gpus.size(), p.node_count, p.node_count == 1 ? "" : "s", p.nodes_hostlist);
  text += fmt::format(" under {} leaf switch{}", p.leaf_switch_count, p.leaf_switch_count == 1 ? "" : "es");
  text += fmt::format("; the GPUs talk over {}.", levels.empty() ? "nothing (one GPU)" : join(p.levels_spanned, ", "));
  if (r.workload == WorkloadKind::kTraining) {
    text += fmt::format(" Ranks follow tp={} cp={} ep={} dp={} pp={} (tp fastest, pp slowest): ", r.tp, r.cp, r.ep,
                        r.dp, r.pp);
    text += p.tp_groups_split == 0 ? fmt::format("every TP group of {} stays inside one node or NVLink domain", tp)
                                   : fmt::format("{} TP group(s) span nodes", p.tp_groups_split);
    text += fmt::format(", and each of the {} PP stage(s) touches at most {} leaf switch(es).", pp, p.max_stage_leaves);
  } else {
    text += fmt::format(" {} replica(s) of {} GPUs each.", r.total_gpus / std::max(1, r.replica_gpus), r.replica_gpus);
  }
  if (p.predicted_comm_us)
    text += fmt::format(" Predicted communication per step: {:.1f} us ({:.2f}x the ideal {:.1f} us).",
                        *p.predicted_comm_us, p.slowdown.value_or(1.0), p.ideal_comm_us.value_or(0.0));
  else
    text += " No communication prediction (the cost model has no estimate for this parallel plan and model class).";
  p.explanation = std::move(text);
}

}  // namespace

Result<std::vector<GpuId>> choose_gpus(const AllocationState& state, const JobRequest& r,
                                       const PlacementPolicy& policy) {
  if (r.segment > 0 && !policy.supports_segments())
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("policy {} does not implement --segment (slurm-block does)", policy.name()));
  if (r.slice_size > 0 && !policy.supports_slices())
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("policy {} does not implement Kueue slices (--slice-size, --slice-tier; "
                                  "kueue-bestfit does)",
                                  policy.name()));
  if (r.total_gpus > state.total_free_gpus())
    return make_error(ErrorCode::kInfeasible, fmt::format("needs {} GPUs; only {} of {} are free", r.total_gpus,
                                                          state.total_free_gpus(), state.cluster().gpu_count()));
  Result<std::vector<GpuId>> gpus = make_error(ErrorCode::kInfeasible, "no placement");
  if (policy.handles_tier_constraints()) {
    gpus = policy.select(state, r, {});
  } else if (r.required_tier_index) {
    gpus = select_in_tier(state, r, policy, *r.required_tier_index);
  } else if (r.preferred_tier_index) {
    gpus = select_in_tier(state, r, policy, *r.preferred_tier_index);
    if (!gpus) gpus = policy.select(state, r, {});
  } else {
    gpus = policy.select(state, r, {});
  }
  if (!gpus) return tl::unexpected(gpus.error());
  if (auto ok = check_placement(state, r, *gpus); !ok)
    return make_error(ErrorCode::kInfeasible, fmt::format("policy {}: {}", policy.name(), ok.error().message));
  return gpus;
}

Result<Placement> place(const AllocationState& state, const JobRequest& raw, const PlacementPolicy& policy,
                        PlaceDetail detail) {
  auto norm = raw.total_gpus > 0 ? Result<JobRequest>(raw) : normalize(raw, state.cluster());
  if (!norm) return tl::unexpected(norm.error());
  const JobRequest& r = *norm;
  TOPOSCHED_TRY(gpus, choose_gpus(state, r, policy));
  Placement p;
  p.job_id = r.job_id;
  p.policy = std::string(policy.name());
  p.gpus_by_rank = std::move(gpus);
  if (detail == PlaceDetail::kGpusOnly) return p;
  if (auto pred = predict_comm(state, p.gpus_by_rank, r)) {
    p.predicted_comm_us = pred->step_comm_us;
    p.ideal_comm_us = pred->ideal_step_comm_us;
    p.slowdown = pred->ideal_step_comm_us > 0 ? pred->step_comm_us / pred->ideal_step_comm_us : 1.0;
  }
  describe(state, r, p, policy);
  return p;
}

}  // namespace toposched
