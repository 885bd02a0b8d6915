// slurm-tree against the project's reading of Slurm's topology/tree plugin:
// src/plugins/topology/tree/eval_nodes_tree.c (_eval_nodes_topo, 773-1441;
// _topo_compare_switches, 60-106; _topo_choose_best_switch, 108-140; _decrement_node_cnt,
// 756-771), src/plugins/topology/tree/switch_record.c (switch_record_validate: levels,
// parents and switches_dist, 420-620) and src/plugins/select/cons_tres/job_test.c
// (_get_one_res, 801-870, taken at 1024-1026) at Slurm 26.05.3 (tag slurm-26-05-3-1), and
// src/plugins/select/cons_tres/job_test.c of 22.05.8 (_topo_choose_best_switch, 1436-1460).
//
// The oracle reads the topology.conf that `export --to slurm-tree` writes, builds Slurm's
// switch table from it (file order is the switch index; a switch with nodes is level 0, one
// above 1 + its highest child; parent-child distance 1, the rest through
// _check_better_path's shortest paths), and runs _eval_nodes_topo's steps on it for every
// submission of a random sequence (with releases):
//   - the top switch: the last switch of the highest level whose available nodes suffice
//     (908-950); every other switch is cut to the nodes under it (1006-1011);
//   - leaves one at a time (1340-1431): a leaf with no nodes, or at infinite distance, is
//     never chosen; the first candidate is the current best; a later one replaces it when
//     it is closer and (24.05.3+) the last fit _topo_compare_switches computed holds, or
//     (22.05) it compares at least as well, or when it is equally close and compares
//     better; the chosen leaf's distances are added to every switch's;
//   - its nodes in node order until the job is satisfied (1385-1424); then (24.05.3+)
//     _decrement_node_cnt takes the leaf's nodes off every switch above it, and the leaf's
//     count becomes 0 (1425-1428);
//   - 26.05: a job of one node takes the first node that fits (job_test.c 1024-1026; tree's
//     topology_p_allow_one_node returns true since 26.05, and 25.11.7 has none);
//   - GPU-count jobs (--gpus=K): rem_nodes = min(min, req) = 1 (825-828), done when the
//     nodes taken hold K GPUs; GPUs are handed out in node order, each node all it has.
//     The three passes over node sets (nodes that alone hold K, then idle nodes, then all)
//     come from the real slurmctld 22.05 agreement test, not from the source (docs/placement.md).
// Each job shape runs 60 random submissions on a three-level tree; every prediction is
// checked.
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "formats/slurm_tree.h"
#include "placement/placement.h"
#include "placement/select_util.h"
#include "topology/hostlist.h"
#include "topology/presets.h"
#include "support/policy_run.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

constexpr long kInfinite = std::numeric_limits<int>::max() / 4;

using toposched::testing::preset;

// Slurm's switch table as switch_record_validate builds it from topology.conf.
struct SwitchTable {
  std::vector<int> level, parent;            // parent -1: SWITCH_NO_PARENT
  std::vector<std::vector<char>> has_node;   // node bitmap (leaves' nodes, unions above)
  std::vector<std::vector<long>> dist;       // switches_dist
  int size() const { return static_cast<int>(level.size()); }
};

SwitchTable read_tree_conf(const Cluster& c) {
  auto out = write_slurm_tree(c, ExportOptions{});
  EXPECT_TRUE(out) << out.error().message;
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> children;
  std::vector<std::vector<NodeId>> leaf_nodes;
  std::istringstream in(out->text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("SwitchName=")) continue;
    const auto space = line.find(' ');
    names.push_back(line.substr(11, space - 11));
    children.emplace_back();
    leaf_nodes.emplace_back();
    const std::string rest = line.substr(space + 1);
    if (rest.starts_with("Nodes=")) {
      auto list = expand_hostlist(rest.substr(6));
      EXPECT_TRUE(list) << line;
      if (list)
        for (const auto& n : *list) leaf_nodes.back().push_back(*c.find_node(n));
    } else if (rest.starts_with("Switches=")) {
      auto list = expand_hostlist(rest.substr(9));
      EXPECT_TRUE(list) << line;
      if (list) children.back() = *list;
    }
  }
  const int n = static_cast<int>(names.size());
  SwitchTable t;
  t.level.assign(static_cast<std::size_t>(n), -1);
  t.parent.assign(static_cast<std::size_t>(n), -1);
  t.has_node.assign(static_cast<std::size_t>(n), std::vector<char>(c.node_count(), 0));
  t.dist.assign(static_cast<std::size_t>(n), std::vector<long>(static_cast<std::size_t>(n), kInfinite));
  auto index_of = [&](const std::string& name) {
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  std::function<void(int)> fill = [&](int i) {
    if (t.level[static_cast<std::size_t>(i)] >= 0) return;
    if (children[static_cast<std::size_t>(i)].empty()) {
      t.level[static_cast<std::size_t>(i)] = 0;
      for (NodeId x : leaf_nodes[static_cast<std::size_t>(i)]) t.has_node[static_cast<std::size_t>(i)][x.index()] = 1;
      return;
    }
    int level = 0;
    for (const auto& child_name : children[static_cast<std::size_t>(i)]) {
      const int k = index_of(child_name);
      EXPECT_LT(k, n) << child_name;
      fill(k);
      t.parent[static_cast<std::size_t>(k)] = i;
      level = std::max(level, t.level[static_cast<std::size_t>(k)] + 1);
      for (std::size_t x = 0; x < c.node_count(); ++x)
        t.has_node[static_cast<std::size_t>(i)][x] |= t.has_node[static_cast<std::size_t>(k)][x];
      t.dist[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)] = 1;
      t.dist[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)] = 1;
    }
    t.level[static_cast<std::size_t>(i)] = level;
  };
  for (int i = 0; i < n; ++i) fill(i);
  for (int i = 0; i < n; ++i) t.dist[static_cast<std::size_t>(i)][static_cast<std::size_t>(i)] = 0;
  for (int i = 0; i < n; ++i)  // _check_better_path(i, j, k): i is the intermediate switch
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k) {
        const long via = t.dist[static_cast<std::size_t>(j)][static_cast<std::size_t>(i)] +
                         t.dist[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
        auto& d = t.dist[static_cast<std::size_t>(j)][static_cast<std::size_t>(k)];
        d = std::min(d, std::min(via, kInfinite));
      }
  return t;
}

enum class Release { k2205, k2511, k2605 };

struct Oracle {
  const SwitchTable& t;
  Release release;

  // _topo_compare_switches: > 0 when i fits better than j; `i_fit` is the last fit of i's side.
  int compare(int i, int j, int rem, const std::vector<int>& cnt, bool& i_fit) const {
    while (true) {
      i_fit = cnt[static_cast<std::size_t>(i)] >= rem;
      const bool j_fit = cnt[static_cast<std::size_t>(j)] >= rem;
      if (i_fit && j_fit) {
        if (cnt[static_cast<std::size_t>(i)] != cnt[static_cast<std::size_t>(j)])
          return cnt[static_cast<std::size_t>(i)] < cnt[static_cast<std::size_t>(j)] ? 1 : -1;
        break;
      }
      if (i_fit) return 1;
      if (j_fit) return -1;
      const int pi = t.parent[static_cast<std::size_t>(i)], pj = t.parent[static_cast<std::size_t>(j)];
      if ((pi != i || pj != j) && pi != pj && pi >= 0 && pj >= 0) {
        i = pi;
        j = pj;
        continue;
      }
      break;
    }
    if (cnt[static_cast<std::size_t>(i)] != cnt[static_cast<std::size_t>(j)])
      return cnt[static_cast<std::size_t>(i)] > cnt[static_cast<std::size_t>(j)] ? 1 : -1;
    if (t.level[static_cast<std::size_t>(i)] != t.level[static_cast<std::size_t>(j)])
      return t.level[static_cast<std::size_t>(i)] < t.level[static_cast<std::size_t>(j)] ? 1 : -1;
    return 0;
  }

  // _topo_choose_best_switch for candidate leaf i.
  void choose(const std::vector<long>& dist, const std::vector<int>& cnt, int rem, int i, int& best) const {
    const auto ui = static_cast<std::size_t>(i);
    if (best == -1 || dist[ui] >= kInfinite || cnt[ui] == 0) {
      if (cnt[ui] > 0 && dist[ui] < kInfinite) best = i;
      return;
    }
    bool i_fit = false;
    const int tcs = compare(i, best, rem, cnt, i_fit);
    const auto ub = static_cast<std::size_t>(best);
    const bool closer = release == Release::k2205 ? (dist[ui] < dist[ub] && tcs >= 0) : (dist[ui] < dist[ub] && i_fit);
    if (closer || (dist[ui] == dist[ub] && tcs > 0)) best = i;
  }

  // _eval_nodes_topo on the available nodes `cap` (GPUs each gives; 0 = not available):
  // the nodes taken, in the order taken; empty when the job pends.
  std::vector<NodeId> eval(const std::vector<int>& cap, int rem_nodes, int gpus_per_job) const {
    const int n = t.size();
    auto count_under = [&](int sw) {
      int k = 0;
      for (std::size_t x = 0; x < cap.size(); ++x) k += t.has_node[static_cast<std::size_t>(sw)][x] && cap[x] > 0;
      return k;
    };
    int top = -1;
    for (int i = 0; i < n; ++i) {
      const int k = count_under(i);
      if (k == 0 || k < rem_nodes) continue;
      if (top == -1 || t.level[static_cast<std::size_t>(i)] >= t.level[static_cast<std::size_t>(top)]) top = i;
    }
    if (top < 0) return {};
    std::vector<char> best_nodes(cap.size(), 0);
    int best_count = 0;
    long best_gpus = 0;
    for (std::size_t x = 0; x < cap.size(); ++x)
      if (cap[x] > 0 && t.has_node[static_cast<std::size_t>(top)][x]) {
        best_nodes[x] = 1;
        ++best_count;
        best_gpus += cap[x];
      }
    if (best_count < rem_nodes || best_gpus < gpus_per_job) return {};  // not `sufficient`
    std::vector<int> cnt(static_cast<std::size_t>(n), 0);
    for (int i = 0; i < n; ++i)
      for (std::size_t x = 0; x < cap.size(); ++x)
        cnt[static_cast<std::size_t>(i)] += t.has_node[static_cast<std::size_t>(i)][x] && best_nodes[x];
    std::vector<long> dist(static_cast<std::size_t>(n), 0);
    std::vector<NodeId> taken;
    long gpus = 0;
    int prev_rem = rem_nodes + 1;
    while (prev_rem != rem_nodes) {
      prev_rem = rem_nodes;
      int best = -1;
      for (int i = 0; i < n; ++i)
        if (t.level[static_cast<std::size_t>(i)] == 0) choose(dist, cnt, rem_nodes, i, best);
      if (best < 0) break;
      for (int k = 0; k < n; ++k) {
        const long d = t.dist[static_cast<std::size_t>(best)][static_cast<std::size_t>(k)];
        auto& into = dist[static_cast<std::size_t>(k)];
        into = (d >= kInfinite || into >= kInfinite) ? kInfinite : into + d;
      }
      for (std::size_t x = 0; x < cap.size(); ++x) {
        if (!t.has_node[static_cast<std::size_t>(best)][x] || !best_nodes[x]) continue;
        best_nodes[x] = 0;
        taken.push_back(NodeId(static_cast<std::uint32_t>(x)));
        gpus += cap[x];
        if (--rem_nodes <= 0 && gpus >= gpus_per_job) return taken;
      }
      if (release != Release::k2205) {  // _decrement_node_cnt
        const int all = cnt[static_cast<std::size_t>(best)];
        for (int up = best; up >= 0; up = t.parent[static_cast<std::size_t>(up)])
          cnt[static_cast<std::size_t>(up)] = std::max(0, cnt[static_cast<std::size_t>(up)] - all);
      }
      cnt[static_cast<std::size_t>(best)] = 0;
    }
    return {};
  }
};

struct Shape {
  std::string name;
  Release release;
  std::function<JobRequest(std::mt19937&)> draw;
};

std::string version_of(Release r) {
  switch (r) {
    case Release::k2205: return "22.05";
    case Release::k2511: return "25.11";
    case Release::k2605: return "";
  }
  return "";
}

std::vector<NodeId> sorted_nodes(const Cluster& c, const std::vector<GpuId>& gpus) {
  std::vector<NodeId> out;
  for (GpuId g : gpus) out.push_back(c.gpu_node(g));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The nodes the plugin gives the request on state `s`; empty when it pends.
std::vector<NodeId> predict(const Oracle& oracle, const AllocationState& s, const JobRequest& r) {
  const Cluster& c = s.cluster();
  std::vector<int> cap(c.node_count(), 0);
  for (std::size_t x = 0; x < cap.size(); ++x) cap[x] = node_capacity(s, r, {}, NodeId(static_cast<std::uint32_t>(x)));
  if (oracle.release == Release::k2605 && r.nodes == 1) {  // _get_one_res
    for (std::size_t x = 0; x < cap.size(); ++x)
      if (cap[x] > 0) return {NodeId(static_cast<std::uint32_t>(x))};
    return {};
  }
  if (r.nodes > 0) {
    std::vector<NodeId> got = oracle.eval(cap, r.nodes, 0);
    std::sort(got.begin(), got.end());
    return got;
  }
  // --gpus=K: the observed passes, each through the whole evaluation.
  std::vector<std::vector<int>> passes;
  std::vector<int> whole_job = cap, idle = cap;
  for (std::size_t x = 0; x < cap.size(); ++x) {
    if (whole_job[x] < r.total_gpus) whole_job[x] = 0;
    if (!s.node_whole_free(NodeId(static_cast<std::uint32_t>(x)))) idle[x] = 0;
  }
  for (const auto& pass : {whole_job, idle, cap}) {
    std::vector<NodeId> taken = oracle.eval(pass, 1, r.total_gpus);
    if (taken.empty()) continue;
    std::sort(taken.begin(), taken.end());
    std::vector<NodeId> giving;  // GPUs in node order, each node all it has, until K
    int left = r.total_gpus;
    for (NodeId x : taken) {
      if (left <= 0) break;
      giving.push_back(x);
      left -= pass[x.index()];
    }
    return giving;
  }
  return {};
}

void run_shape(const Cluster& c, const SwitchTable& table, const Shape& shape, int submissions, unsigned seed,
               int& checked) {
  SCOPED_TRACE(shape.name);
  const Oracle oracle{table, shape.release};
  const PlacementPolicy& policy = **find_policy("slurm-tree");
  AllocationState s(c);
  std::mt19937 rng(seed);
  std::vector<std::string> running;
  int placed = 0, pended = 0;
  for (int k = 0; k < submissions; ++k) {
    if (!running.empty() && rng() % 3 == 0) {
      const std::size_t j = rng() % running.size();
      EXPECT_TRUE(s.release(running[j]));
      running.erase(running.begin() + static_cast<long>(j));
    }
    JobRequest r = shape.draw(rng);
    r.job_id = fmt::format("j{}", k);
    r.slurm_version = version_of(shape.release);
    auto norm = normalize(r, c);
    ASSERT_TRUE(norm) << norm.error().message;
    SCOPED_TRACE(fmt::format("submission {}: nodes {} gpus {} gpn {}", k, norm->nodes, norm->total_gpus,
                             norm->gpus_per_node));
    const std::vector<NodeId> expect = predict(oracle, s, *norm);
    auto got = policy.select(s, *norm, {});
    ++checked;
    if (expect.empty()) {
      EXPECT_FALSE(got) << "predicted to pend";
      ++pended;
      continue;
    }
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(sorted_nodes(c, *got), expect);
    EXPECT_TRUE(s.allocate(r.job_id, *got));
    running.push_back(r.job_id);
    ++placed;
  }
  // The sequence must exercise both outcomes, or it checks little.
  EXPECT_GT(placed, submissions / 4);
  EXPECT_GT(pended, 0);
}

using toposched::testing::nodes_job;

TEST(SlurmTreeRules, RandomSubmissionsFollowThePluginsChoice) {
  // Rack switches of 3 servers, 4 racks per pod, 3 pods under one aggregation switch: 36
  // nodes of 8 GPUs on three levels, so leaves compare through their pods.
  const Cluster c = preset("llama3-24k?pods=3&racks=4&servers_per_rack=3");
  const SwitchTable table = read_tree_conf(c);
  ASSERT_EQ(table.size(), 12 + 3 + 1);
  auto exclusive = [](std::mt19937& g) { return nodes_job(1 + static_cast<int>(g() % 16)); };
  auto per_node = [](std::mt19937& g) {
    JobRequest r = nodes_job(1 + static_cast<int>(g() % 12));
    r.gpus_per_node = 1 + static_cast<int>(g() % 8);
    r.exclusive = false;
    return r;
  };
  auto gpu_count = [](std::mt19937& g) {
    JobRequest r;
    r.gpus = 1 + static_cast<int>(g() % 60);
    return r;
  };
  const std::vector<Shape> shapes = {
      {"exclusive -N (26.05)", Release::k2605, exclusive},
      {"exclusive -N (25.11: no one-node path)", Release::k2511, exclusive},
      {"exclusive -N (22.05)", Release::k2205, exclusive},
      {"-N --gpus-per-node (26.05)", Release::k2605, per_node},
      {"-N --gpus-per-node (25.11)", Release::k2511, per_node},
      {"--gpus (GPU count, shared nodes, 26.05)", Release::k2605, gpu_count},
      {"--gpus (GPU count, shared nodes, 22.05)", Release::k2205, gpu_count},
  };
  unsigned seed = 1;
  for (const Shape& shape : shapes) {
    int checked = 0;
    run_shape(c, table, shape, 60, seed++, checked);
    EXPECT_GE(checked, 40) << shape.name;
  }
}

// The rules one at a time, each on a state where it decides.
class SlurmTreeCase : public ::testing::Test {
 protected:
  // Two pods of three 4-server racks: leaves r1..r3 (pod 1), r4..r6 (pod 2).
  Cluster c = preset("llama3-24k?pods=2&racks=3&servers_per_rack=4");
  AllocationState s{c};
  const PlacementPolicy& policy = **find_policy("slurm-tree");

  void fill(int node) {
    std::vector<GpuId> g;
    for (int l = 0; l < 8; ++l) g.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(node)), l));
    ASSERT_TRUE(s.allocate(fmt::format("fill-{}", node), g));
  }
  std::vector<int> racks(const std::vector<GpuId>& gpus) {
    std::vector<int> out;
    for (NodeId n : sorted_nodes(c, gpus))
      if (out.empty() || out.back() != static_cast<int>(n.index() / 4)) out.push_back(static_cast<int>(n.index() / 4));
    return out;
  }
  Result<std::vector<GpuId>> run(const JobRequest& r) { return toposched::testing::normalize_and_select(policy, s, r); }
};

// job_test.c 1024-1026: in 26.05 a one-node job takes the first free node, even when a
// tighter leaf has one; 25.11 picks the tightest leaf.
TEST_F(SlurmTreeCase, OneNodeJobsIn2605TakeTheFirstNode) {
  for (int n : {20, 21, 22}) fill(n);  // rack 6 has one free server (23): the tightest leaf
  auto got = run(nodes_job(1));
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(c.gpu_node(got->front()), NodeId(0));
  JobRequest r = nodes_job(1);
  r.slurm_version = "25.11";
  got = run(r);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(c.gpu_node(got->front()), NodeId(23));
}

// 756-771, 1425-1427: after a leaf is used up, its pod counts only the nodes left in it.
// Free servers: pod 1 racks 4, 1, 1 (6 in all); pod 2 racks 3, 2, 2 (7). An 8-node job: no
// leaf or pod fits, so the first leaf is the fullest rack of the pod with more nodes (rack
// 4, 3 nodes; 5 still needed). 24.05.3+ then counts pod 2 as 4: its closer racks walk up to
// a pod that does not fit, so they are not "closer and fit", and rack 1 (4 free) comes next;
// the last node comes from the tighter-fitting rack of the two now equally far: rack 2.
// Without the decrement pod 2 would count 7, which fits 5, and the closer rack 5 would be
// taken (racks 1, 4, 5). 22.05 gets racks 1, 2, 4 another way: both pods fit 5 and its
// comparison prefers the tighter pod 1, so the closer rack does not compare at least as well.
TEST_F(SlurmTreeCase, ChosenLeavesLeaveTheirPodsCounts) {
  for (int n : {4, 5, 6, 8, 9, 10, 12, 16, 17, 20, 21}) fill(n);
  for (std::string version : {"", "25.11"}) {
    JobRequest r = nodes_job(8);
    r.slurm_version = version;
    auto got = run(r);
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(racks(*got), (std::vector<int>{0, 1, 3})) << version;
  }
  JobRequest old = nodes_job(8);
  old.slurm_version = "22.05";
  auto got = run(old);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(racks(*got), (std::vector<int>{0, 1, 3}));
}

}  // namespace
}  // namespace toposched
