// slurm-block against the project's reading of Slurm's topology/block plugin:
// src/plugins/topology/block/eval_nodes_block.c and src/plugins/select/cons_tres/job_test.c
// at Slurm 26.05.3 (tag slurm-26-05-3-1, commit 56fe8678) and 25.11.7 (slurm-25-11-7-1).
// Line numbers below are eval_nodes_block.c at 26.05.3 unless said otherwise.
//
// The oracle here reads the topology.conf that `export --to slurm-block` writes (BlockName
// lines in file order, BlockSizes) as Slurm's block_record.c does, and predicts from it, for
// every submission of a random sequence (with releases), the block eval_nodes_block picks:
//   - the level: ceil(log2(base blocks needed)) rounded up to a configured level
//     (_get_block_level, 226-244), the whole topology when none is that large;
//   - the blocks of that level whose max_llblock fullest lower-level blocks hold the job
//     (626-661); of those the one with the fewest available nodes, the last of equals
//     (`bnc <= block_node_cnt`, 672-679); none: the job pends (688-694), no widening;
//   - for a job that fits one base block, the nodes themselves: the first ones in node order
//     (1045-1075); for a GPU-count job, nodes in node order until K GPUs (gres_sched_test);
//   - --segment: each segment through the same choice on the nodes left (1101-1128);
//   - 26.05 only: a one-node job takes the first node that fits (job_test.c _get_one_res,
//     801-870, called at 1024-1026); 25.11.7's job_test.c has no _get_one_res.
// Each job shape runs 60 random submissions; every prediction is checked.
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "formats/slurm_block.h"
#include "placement/placement.h"
#include "placement/select_util.h"
#include "topology/hostlist.h"
#include "topology/presets.h"
#include "support/policy_run.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

// The topology.conf as Slurm's block_record.c reads it.
struct Conf {
  std::vector<std::vector<NodeId>> bblocks;  // file order
  int base = 0;
  std::set<int> levels;  // log2(size / base)
};

Conf read_conf(const Cluster& c, const std::vector<long>& sizes) {
  ExportOptions o;
  o.block_sizes = sizes;
  auto out = write_slurm_block(c, o);
  EXPECT_TRUE(out) << out.error().message;
  Conf conf;
  std::istringstream in(out->text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("BlockName=")) {
      std::vector<NodeId> nodes;
      auto at = line.find(" Nodes=");
      if (at != std::string::npos) {
        auto names = expand_hostlist(line.substr(at + 7));
        EXPECT_TRUE(names) << line;
        if (names)
          for (const auto& n : *names) nodes.push_back(*c.find_node(n));
      }
      std::sort(nodes.begin(), nodes.end());
      conf.bblocks.push_back(nodes);
    } else if (line.starts_with("BlockSizes=")) {
      std::stringstream list(line.substr(11));
      std::string x;
      while (std::getline(list, x, ',')) {
        const int size = std::stoi(x);
        if (conf.base == 0) conf.base = size;
        int k = 0;
        while ((conf.base << k) < size) ++k;
        conf.levels.insert(k);
      }
    }
  }
  return conf;
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The prediction for one job (or segment) of `n` nodes on `avail`: the base blocks of the
// chosen block, empty when the job pends.
struct Choice {
  int first = -1, last = -1;  // bblock range [first, last)
};
Choice predict_block(const Conf& conf, const std::vector<char>& avail, int n) {
  const int count = static_cast<int>(conf.bblocks.size());
  int need = 0;
  while ((1 << need) < ceil_div(n, conf.base)) ++need;
  int level = -1, ll = 0;
  for (int k : conf.levels)
    if (k >= need) {
      level = k;
      break;
    }
  for (int k : conf.levels)
    if (need > 0 && k <= need - 1) ll = k;
  const int per_block = level < 0 ? count : 1 << level, per_ll = 1 << ll;
  const int max_ll = ceil_div(n, per_ll * conf.base);
  auto on = [&](int i) {
    int k = 0;
    for (NodeId x : conf.bblocks[static_cast<std::size_t>(i)]) k += avail[x.index()];
    return k;
  };
  Choice best;
  int best_nodes = 0;
  for (int start = 0; start < count; start += per_block) {
    const int end = std::min(count, start + per_block);
    int bnc = 0;
    std::vector<int> lls;
    for (int i = start; i < end; i += per_ll) {
      int k = 0;
      for (int j = i; j < std::min(end, i + per_ll); ++j) k += on(j);
      lls.push_back(k);
      bnc += k;
    }
    int usable = bnc;
    if (per_block != per_ll * max_ll) {
      std::sort(lls.rbegin(), lls.rend());
      usable = 0;
      for (int j = 0; j < std::min<int>(max_ll, static_cast<int>(lls.size())); ++j) usable += lls[static_cast<std::size_t>(j)];
    }
    if (usable < n) continue;
    if (best.first < 0 || bnc <= best_nodes) {
      best = {start, end};
      best_nodes = bnc;
    }
  }
  return best;
}

struct Shape {
  std::string name;
  std::string release;           // "" = 26.05
  std::vector<long> block_sizes;  // "" = the export's
  std::function<JobRequest(std::mt19937&)> draw;
};

std::vector<char> available(const AllocationState& s, const JobRequest& r) {
  std::vector<char> a(s.cluster().node_count(), 0);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = node_capacity(s, r, {}, NodeId(static_cast<std::uint32_t>(i))) > 0;
  return a;
}

std::vector<NodeId> nodes_in_order(const Cluster& c, const std::vector<GpuId>& gpus) {
  std::vector<NodeId> out;
  for (GpuId g : gpus)
    if (out.empty() || out.back() != c.gpu_node(g)) out.push_back(c.gpu_node(g));
  return out;
}

bool inside(const Conf& conf, const Choice& b, NodeId n) {
  for (int i = b.first; i < b.last; ++i)
    for (NodeId x : conf.bblocks[static_cast<std::size_t>(i)])
      if (x == n) return true;
  return false;
}

// Runs `submissions` random jobs of one shape (releasing a random running job now and then)
// and checks each answer against the prediction; `checked` counts the submissions checked.
void run_shape(const Cluster& c, const Shape& shape, int submissions, unsigned seed, int& checked) {
  SCOPED_TRACE(shape.name);
  const Conf conf = read_conf(c, shape.block_sizes);
  const PlacementPolicy& policy = **find_policy("slurm-block");
  AllocationState s(c);
  std::mt19937 rng(seed);
  std::vector<std::string> running;
  for (int k = 0; k < submissions; ++k) {
    if (!running.empty() && rng() % 3 == 0) {
      const std::size_t j = rng() % running.size();
      EXPECT_TRUE(s.release(running[j]));
      running.erase(running.begin() + static_cast<long>(j));
    }
    JobRequest r = shape.draw(rng);
    r.job_id = fmt::format("j{}", k);
    r.slurm_version = shape.release;
    r.block_sizes = shape.block_sizes;
    auto norm = normalize(r, c);
    ASSERT_TRUE(norm) << norm.error().message;
    SCOPED_TRACE(fmt::format("submission {}: nodes {} gpus {} gpn {} segment {}", k, r.nodes, r.gpus, r.gpus_per_node,
                             r.segment));
    std::vector<char> avail = available(s, *norm);
    auto got = policy.select(s, *norm, {});
    ++checked;
    const bool one_node_path = shape.release != "25.11" && norm->nodes == 1;
    if (one_node_path) {  // _get_one_res: the first node that fits, in node order
      auto first = std::find(avail.begin(), avail.end(), 1);
      if (first == avail.end()) {
        EXPECT_FALSE(got);
        continue;
      }
      ASSERT_TRUE(got) << got.error().message;
      EXPECT_EQ(nodes_in_order(c, *got), std::vector<NodeId>{NodeId(static_cast<std::uint32_t>(first - avail.begin()))});
    } else if (norm->nodes == 0) {  // --gpus=K: one base block, nodes in node order until K GPUs
      const Choice b = predict_block(conf, avail, 1);
      std::vector<NodeId> expect;
      int gpus = 0;
      if (b.first >= 0)
        for (NodeId n : conf.bblocks[static_cast<std::size_t>(b.first)])
          if (avail[n.index()] && gpus < norm->total_gpus) {
            expect.push_back(n);
            gpus += node_capacity(s, *norm, {}, n);
          }
      if (b.first < 0 || gpus < norm->total_gpus) {
        EXPECT_FALSE(got) << "predicted to pend; placed on " << got->size() << " GPUs";
        continue;
      }
      ASSERT_TRUE(got) << got.error().message;
      EXPECT_EQ(nodes_in_order(c, *got), expect);
    } else {
      // Segments one after the other on the nodes left: a segment within one base block is
      // predicted node by node (its first available nodes), a larger one by its block only.
      const int seg = norm->segment > 0 ? norm->segment : norm->nodes;
      const std::vector<NodeId> got_nodes = got ? nodes_in_order(c, *got) : std::vector<NodeId>{};
      std::vector<char> left = avail;
      bool pends = false;
      std::vector<std::pair<Choice, std::vector<NodeId>>> parts;  // block, exact nodes (or empty)
      for (int part = 0; part < norm->nodes / seg && !pends; ++part) {
        const Choice b = predict_block(conf, left, seg);
        if (b.first < 0) {
          pends = true;
          break;
        }
        std::vector<NodeId> expect;
        if (b.last - b.first == 1) {
          for (NodeId n : conf.bblocks[static_cast<std::size_t>(b.first)])
            if (left[n.index()] && static_cast<int>(expect.size()) < seg) expect.push_back(n);
          for (NodeId n : expect) left[n.index()] = 0;
        } else if (got_nodes.size() >= static_cast<std::size_t>((part + 1) * seg)) {
          for (int i = part * seg; i < (part + 1) * seg; ++i) left[got_nodes[static_cast<std::size_t>(i)].index()] = 0;
        }
        parts.emplace_back(b, std::move(expect));
      }
      if (pends) {
        EXPECT_FALSE(got) << "predicted to pend (segment " << parts.size() + 1 << ": no block of its level has room)";
        continue;
      }
      ASSERT_TRUE(got) << got.error().message;
      ASSERT_EQ(static_cast<int>(got_nodes.size()), norm->nodes);
      for (std::size_t part = 0; part < parts.size(); ++part) {
        std::vector<NodeId> mine(got_nodes.begin() + static_cast<long>(part) * seg,
                                 got_nodes.begin() + static_cast<long>(part + 1) * seg);
        for (NodeId n : mine) EXPECT_TRUE(inside(conf, parts[part].first, n)) << c.node_name(n) << " outside the predicted block";
        if (!parts[part].second.empty()) {
          EXPECT_EQ(mine, parts[part].second) << "segment " << part;
        }
      }
    }
    if (got) {
      EXPECT_TRUE(s.allocate(r.job_id, *got));
      running.push_back(r.job_id);
    }
  }
}

using toposched::testing::nodes_job;

TEST(SlurmBlockRules, RandomSubmissionsFollowThePluginsChoice) {
  // 8 NVL72 racks of 18 trays: base blocks of 18 nodes, BlockSizes=18,36,72,144.
  const Cluster c = preset("gb200-nvl72?racks=8&racks_per_su=4");
  std::vector<Shape> shapes = {
      {"exclusive -N (26.05)", "", {}, [](std::mt19937& g) { return nodes_job(1 + static_cast<int>(g() % 40)); }},
      {"exclusive -N (25.11: no one-node path)", "25.11", {},
       [](std::mt19937& g) { return nodes_job(1 + static_cast<int>(g() % 24)); }},
      {"exclusive -N, BlockSizes=18,72 (no 36 level)", "", {18, 72},
       [](std::mt19937& g) { return nodes_job(1 + static_cast<int>(g() % 60)); }},
      {"--segment", "", {},
       [](std::mt19937& g) {
         const int seg[] = {2, 3, 6, 9};
         JobRequest r = nodes_job(0);
         r.segment = seg[g() % 4];
         r.nodes = r.segment * (1 + static_cast<int>(g() % 5));
         return r;
       }},
      {"--gpus-per-node", "", {},
       [](std::mt19937& g) {
         JobRequest r = nodes_job(1 + static_cast<int>(g() % 20));
         r.gpus_per_node = 1 + static_cast<int>(g() % 4);
         r.exclusive = false;
         return r;
       }},
      {"--gpus (GPU count, shared nodes)", "", {},
       [](std::mt19937& g) {
         JobRequest r;
         r.gpus = 1 + static_cast<int>(g() % 80);
         return r;
       }},
  };
  unsigned seed = 1;
  for (const Shape& shape : shapes) {
    int checked = 0;
    run_shape(c, shape, 60, seed++, checked);
    EXPECT_GE(checked, 40) << shape.name;
  }
}

// The rules one at a time, each on a state where it decides.
class SlurmBlockCase : public ::testing::Test {
 protected:
  Cluster c = preset("gb200-nvl72?racks=4&racks_per_su=4");  // 4 racks of 18 trays, one block each
  AllocationState s{c};
  const PlacementPolicy& policy = **find_policy("slurm-block");

  // Takes `k` whole trays of rack `rack` (from its first tray on).
  void fill_rack(int rack, int k) {
    std::vector<GpuId> g;
    for (int n = 0; n < k; ++n)
      for (int l = 0; l < 4; ++l) g.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(rack * 18 + n)), l));
    ASSERT_TRUE(s.allocate(fmt::format("fill-{}-{}", rack, k), g));
  }
  std::set<int> racks_of(const std::vector<GpuId>& gpus) {
    std::set<int> out;
    for (GpuId g : gpus) out.insert(static_cast<int>(c.gpu_node(g).index() / 18));
    return out;
  }
  Result<std::vector<GpuId>> run(const JobRequest& r) { return toposched::testing::normalize_and_select(policy, s, r); }
};

// 672-679: `bnc <= block_node_cnt`: of equally tight blocks the last in file order.
TEST_F(SlurmBlockCase, TiesGoToTheLastBlock) {
  auto got = run(nodes_job(4));
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(racks_of(*got), std::set<int>{3});
  fill_rack(1, 10);  // rack 1: 8 free, the tightest that holds 6
  got = run(nodes_job(6));
  ASSERT_TRUE(got);
  EXPECT_EQ(racks_of(*got), std::set<int>{1});
}

// 688-694: no block of the job's level has room: the job pends; no larger level is tried.
TEST_F(SlurmBlockCase, NoWideningThePendsInstead) {
  for (int rack = 0; rack < 4; ++rack) fill_rack(rack, 8);  // 10 free per rack, 40 in all
  auto got = run(nodes_job(12));                              // one base block of 18 needed
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("pends"), std::string::npos) << got.error().message;
  got = run(nodes_job(20));  // two base blocks: a 36-node block holds 20
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(racks_of(*got).size(), 2u);
}

// BlockSizes=18,72: a 20-node job needs 2 base blocks; there is no 36 level, so its block
// is the whole 72 (226-244), and inside it the llblock limit (2 base blocks) still holds.
TEST_F(SlurmBlockCase, LevelsAreTheFilesOnly) {
  fill_rack(0, 9);
  fill_rack(1, 9);
  fill_rack(2, 9);
  JobRequest r = nodes_job(20);
  r.block_sizes = {18, 72};
  auto got = run(r);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(racks_of(*got).size(), 2u);  // rack 3 (18 free) and one 9-free rack: two llblocks at most
  EXPECT_TRUE(racks_of(*got).contains(3));
  r.block_sizes = {18, 36, 72};
  got = run(r);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(racks_of(*got), (std::set<int>{2, 3}));  // the 36-blocks: {0,1} has 18 free, {2,3} 27: the tighter that holds 20
}

// 1101-1128: segments one at a time, each through the block choice again (so they may land
// in different blocks); --consolidate-segments keeps them in one block of the job's level.
TEST_F(SlurmBlockCase, SegmentsOneAtATimeUnlessConsolidated) {
  fill_rack(3, 12);  // rack 3: 6 free (the tightest for a 6-node segment), racks 0-2: 18
  JobRequest r = nodes_job(12);
  r.segment = 6;
  auto got = run(r);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(racks_of(*got), (std::set<int>{2, 3}));  // segment 1 in rack 3, segment 2 in the last 18-free rack
  r.consolidate_segments = true;
  got = run(r);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(racks_of(*got).size(), 1u) << "consolidated: one 18-node block holds both segments";
}

// job_test.c 1024-1026 (26.05): a one-node job takes the first free node, ignoring blocks;
// 25.11 puts it in the tightest block.
TEST_F(SlurmBlockCase, OneNodeJobsIn2605TakeTheFirstNode) {
  fill_rack(2, 17);  // rack 2 has one free tray: the tightest block
  auto got = run(nodes_job(1));
  ASSERT_TRUE(got);
  EXPECT_EQ(c.gpu_node(got->front()), NodeId(0));
  JobRequest r = nodes_job(1);
  r.slurm_version = "25.11";
  got = run(r);
  ASSERT_TRUE(got);
  EXPECT_EQ(c.gpu_node(got->front()), NodeId(2 * 18 + 17));
}

// --gpus=K without -N: one node at least, so one base block, chosen by its available nodes;
// 80 GPUs never come from one 72-GPU rack, and K GPUs that the chosen block lacks pend.
TEST_F(SlurmBlockCase, GpuCountJobsComeFromOneBaseBlock) {
  JobRequest r;
  r.gpus = 80;
  ASSERT_FALSE(run(r));
  r.gpus = 20;
  auto got = run(r);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(racks_of(*got), std::set<int>{3});
  EXPECT_EQ(nodes_in_order(c, *got).size(), 5u);
  fill_rack(0, 16);  // rack 0: 2 trays (8 GPUs) free, the fewest available nodes
  got = run(r);      // chosen by nodes, it lacks the GPUs: Slurm pends the job
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("one base block"), std::string::npos) << got.error().message;
}

TEST_F(SlurmBlockCase, VersionsWithoutAModelAreRefused) {
  JobRequest r = nodes_job(2);
  r.slurm_version = "22.05";
  auto got = run(r);
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("23.11"), std::string::npos);
  r.slurm_version = "23.02";
  EXPECT_FALSE(normalize(r, c));
}

}  // namespace
}  // namespace toposched
