// The indexed searches of slurm-tree, slurm-block and kueue-bestfit / kueue-balanced (they read the free-GPU
// index instead of scanning every node, docs/design.md "Free-GPU index") against the scans
// they replaced (slurm_tree_scan_policy() and its peers): on random sequences of requests,
// allocations and releases, every decision must be the same, GPUs and rank order, or the
// same error. A count per bucket or per switch that the index got wrong changes which leaf,
// block or domain wins, and so the GPUs, on some step of these sequences.
#include <optional>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "placement/policies/policies.h"
#include "placement/select_util.h"
#include "support/preset_cluster.h"
#include "support/two_leaf_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

// Nodes of 8 and 4 GPUs (two models) under leaves of different sizes, in two trees (a core
// over one spine, and a spine alone: slurm-tree's top switch is then not always a root of
// everything), listed in an order that is not the tree's; two nodes hang from a spine
// directly, one from no switch at all.
Cluster mixed_cluster() {
  ClusterBuilder b("mixed");
  NodeType big = testing::h100_node_type();
  NodeType small = big;
  small.name = "a100x4";
  small.gpu_model = "A100-SXM4";
  small.gpu_count = 4;
  small.gpu_links = NodeType::full_nvlink_mesh(4, 12);
  small.nics.resize(4);
  for (Nic& nic : small.nics) nic.gpu_affinity.resize(4, LinkClass::kNode);
  const NodeTypeId t8 = b.add_node_type(big), t4 = b.add_node_type(small);
  const int leaf = b.add_tier(Tier{"leaf", 0, 0.5, 1.0});
  const int spine = b.add_tier(Tier{"spine", 0, 0.5, 1.0});
  const int core = b.add_tier(Tier{"core", 0, 0.5, 1.0});
  const SwitchId top = b.add_switch("core", core);
  std::vector<SwitchId> leaves;
  for (int sp = 0; sp < 2; ++sp) {
    const SwitchId s = b.add_switch(fmt::format("spine{}", sp), spine);
    if (sp == 0) b.connect(s, top);  // spine1 is a root of its own: the fabric is a forest
    for (int l = 0; l < 3; ++l) {
      leaves.push_back(b.add_switch(fmt::format("leaf{}{}", sp, l), leaf));
      b.connect(leaves.back(), s);
    }
    b.attach(b.add_node(fmt::format("direct{}", sp), t8), s);
  }
  const int per_leaf[] = {4, 6, 3, 5, 4, 2};
  for (int k = 0; k < 6; ++k)  // leaves filled round robin: node order interleaves them
    for (int l = 0; l < 6; ++l)
      if (k < per_leaf[l])
        b.attach(b.add_node(fmt::format("n{}-{}", l, k), (k + l) % 3 == 0 ? t4 : t8),
                 leaves[static_cast<std::size_t>(l)]);
  b.add_node("loose", t8);
  auto c = std::move(b).build();
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message);
  return std::move(*c);
}

JobRequest random_request(std::mt19937& rng, const std::string& policy, const Cluster& c) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  JobRequest r;
  const int shape = pick(10);
  if (shape < 6) {
    const int sizes[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 64, 96};
    r.gpus = sizes[pick(13)];
    if (pick(6) == 0 && r.gpus % 8 == 0) r.gpus_per_node = 8;
    if (pick(8) == 0 && r.gpus % 4 == 0) {
      r.gpus_per_node = 4;
      r.exclusive = pick(2) == 0;
    }
  } else {
    r.nodes = 1 + pick(shape == 9 ? 12 : 4);
    r.gpus_per_node = pick(2) == 0 ? 8 : 4;
    if (policy == "slurm-block" && r.nodes > 1 && pick(3) == 0) {
      r.segment = r.nodes % 2 == 0 ? 2 : 1;
      r.consolidate_segments = pick(2) == 0;
    }
  }
  if (pick(12) == 0) r.gpu_model = pick(2) == 0 ? "h100" : "a100";  // not indexed: both scan
  if (policy == "slurm-tree") r.slurm_version = pick(3) == 0 ? "22.05" : "";
  if (policy == "slurm-block") r.slurm_version = pick(3) == 0 ? "25.11" : "";
  if (policy.starts_with("kueue") && !c.tiers().empty()) {
    const int t = pick(6);
    const std::string tier = c.tiers()[static_cast<std::size_t>(pick(static_cast<int>(c.tiers().size())))].name;
    if (t == 0) r.required_tier = tier;
    if (t == 1) r.preferred_tier = tier;
    if (t == 2 && r.gpus > 0 && r.gpus_per_node == 0 && r.gpus % 2 == 0) {
      r.slice_size = 2;
      r.slice_tier = "node";
      r.preferred_tier = tier;
    }
  }
  return r;
}

struct Pair {
  const PlacementPolicy* indexed;
  const PlacementPolicy* scan;
};

// Runs `steps` random decisions with both searches on one state; returns how many placed a
// job (each compared GPU for GPU; failures compared by message).
int compare_sequence(const Cluster& c, Pair p, std::uint32_t seed, int steps) {
  std::mt19937 rng(seed);
  AllocationState s(c);
  std::vector<std::string> running;
  int placed = 0;
  for (int step = 0; step < steps; ++step) {
    // Release now and then; more often when the cluster is nearly full.
    if (!running.empty() && (rng() % 3 == 0 || s.total_free_gpus() * 10 < static_cast<std::int64_t>(c.gpu_count()))) {
      const std::size_t k = rng() % running.size();
      EXPECT_TRUE(s.release(running[k]).has_value());
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
    }
    JobRequest r = random_request(rng, std::string(p.indexed->name()), c);
    r.job_id = fmt::format("j{}", step);
    auto norm = normalize(r, c);
    if (!norm) continue;
    auto a = choose_gpus(s, *norm, *p.indexed);
    auto b = choose_gpus(s, *norm, *p.scan);
    EXPECT_EQ(a.has_value(), b.has_value()) << p.indexed->name() << " seed " << seed << " step " << step << ": "
                                            << (a ? "" : a.error().message) << (b ? "" : b.error().message);
    if (!a || !b) {
      if (!a && !b) {
        EXPECT_EQ(a.error().message, b.error().message) << p.indexed->name() << " step " << step;
      }
      continue;
    }
    EXPECT_EQ(*a, *b) << p.indexed->name() << " seed " << seed << " step " << step << " gpus " << r.gpus << " nodes "
                      << r.nodes;
    if (*a != *b) return placed;  // one report per sequence
    ++placed;
    EXPECT_TRUE(s.allocate(r.job_id, *a).has_value());
    running.push_back(r.job_id);
  }
  return placed;
}

const Pair kPairs[] = {{&slurm_tree_policy(), &slurm_tree_scan_policy()},
                       {&slurm_block_policy(), &slurm_block_scan_policy()},
                       {&kueue_bestfit_policy(), &kueue_bestfit_scan_policy()},
                       {&kueue_balanced_policy(), &kueue_balanced_scan_policy()}};

TEST(IndexedSearch, SameDecisionsAsTheScanOnRandomSequences) {
  const Cluster clusters[] = {mixed_cluster(), preset("dgx-h100?nodes=48&su_size=8"), preset("gb200-nvl72?racks=4"),
                              preset("llama3-24k?pods=2&racks=4&servers_per_rack=2")};
  for (const Cluster& c : clusters)
    for (const Pair& p : kPairs)
      for (std::uint32_t seed = 1; seed <= 4; ++seed) {
        const int placed = compare_sequence(c, p, seed, 300);
        // Most steps place a job: the comparison is not only of errors.
        EXPECT_GT(placed, 60) << p.indexed->name() << " on " << c.name() << " seed " << seed;
      }
}

// slurm-block keeps, per thread, the counts per base block of the last state it saw and the
// block it chose on them per job size (keyed by AllocationState::stamp), for the many
// decisions of a backfill pass on one state. Here several requests are asked on each state
// (most fail and change nothing, so later ones reuse the counts), and decisions alternate
// between two copies of one state that change apart, as the simulator's live and probe
// states do: every answer must still be the scan's.
TEST(IndexedSearch, SlurmBlockCountsReusedOnlyForTheSameState) {
  const Cluster clusters[] = {preset("dgx-h100?nodes=48&su_size=8"), preset("gb200-nvl72?racks=4"), mixed_cluster()};
  for (const Cluster& c : clusters) {
    std::mt19937 rng(17);
    AllocationState states[2] = {AllocationState(c), AllocationState(c)};
    std::vector<std::string> running[2];
    int asked = 0, placed = 0, repeated = 0;
    for (int step = 0; step < 400; ++step) {
      if (step % 50 == 0) {  // one state becomes a copy of the other: the same stamp, then apart
        const int from = static_cast<int>(rng() % 2);
        states[1 - from] = states[from];
        running[1 - from] = running[from];
      }
      const std::size_t which = rng() % 2;
      AllocationState& s = states[which];
      std::vector<std::string>& jobs = running[which];
      if (!jobs.empty() && (rng() % 4 == 0 || s.total_free_gpus() * 10 < static_cast<std::int64_t>(c.gpu_count()))) {
        const std::size_t k = rng() % jobs.size();
        ASSERT_TRUE(s.release(jobs[k]).has_value());
        jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(k));
      }
      const std::uint64_t stamp = s.stamp();
      std::optional<JobRequest> to_place;
      for (int ask = 0; ask < 4; ++ask) {
        JobRequest r = random_request(rng, "slurm-block", c);
        r.job_id = fmt::format("j{}-{}", step, ask);
        auto norm = normalize(r, c);
        if (!norm) continue;
        auto a = choose_gpus(s, *norm, slurm_block_policy());
        auto b = choose_gpus(s, *norm, slurm_block_scan_policy());
        ++asked;
        repeated += ask > 0;
        ASSERT_EQ(a.has_value(), b.has_value()) << c.name() << " step " << step << " ask " << ask;
        if (a) {
          ASSERT_EQ(*a, *b) << c.name() << " step " << step << " ask " << ask;
          if (!to_place) {
            to_place = *norm;
            ASSERT_TRUE(s.allocate(r.job_id, *a).has_value());
            jobs.push_back(r.job_id);
            ++placed;
          }
        } else {
          EXPECT_EQ(a.error().message, b.error().message) << c.name() << " step " << step;
        }
        if (!to_place) {
          EXPECT_EQ(s.stamp(), stamp);  // deciding changes nothing
        }
      }
    }
    EXPECT_GT(placed, 100) << c.name();
    EXPECT_GT(repeated, 600) << c.name();
  }
}

// The index serves every request without a GPU model or a node mask (both depend on the
// node, not its bucket); the others are decided by the scan.
TEST(IndexedSearch, IndexedOnlyWithoutModelOrMask) {
  JobRequest r;
  EXPECT_TRUE(capacity_indexed(r, {}));
  r.gpu_model = "h100";
  EXPECT_FALSE(capacity_indexed(r, {}));
  r.gpu_model.clear();
  EXPECT_FALSE(capacity_indexed(r, NodeMask{1, 0}));
}

// bucket_capacity agrees with node_capacity on every node, for the request kinds that change it.
TEST(IndexedSearch, BucketCapacityIsNodeCapacity) {
  const Cluster c = mixed_cluster();
  AllocationState s(c);
  std::mt19937 rng(5);
  for (std::size_t g = 0; g < c.gpu_count(); ++g)
    if (rng() % 2 == 0) {
      ASSERT_TRUE(s.allocate(fmt::format("g{}", g), std::vector<GpuId>{GpuId(static_cast<std::uint32_t>(g))}));
    }
  std::vector<JobRequest> kinds(6);
  kinds[1].exclusive = true;
  kinds[2].gpus_per_node = 4;
  kinds[3].gpus_per_node = 8;
  kinds[4].exclusive = true;
  kinds[4].gpus_per_node = 4;
  kinds[5].exclusive = true;
  kinds[5].gpus_per_node = 8;
  int nonzero = 0;
  for (const JobRequest& r : kinds)
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      const NodeId n(static_cast<std::uint32_t>(i));
      EXPECT_EQ(bucket_capacity(s, r, s.node_bucket(n)), node_capacity(s, r, {}, n)) << c.node_name(n);
      nonzero += node_capacity(s, r, {}, n) > 0;
    }
  EXPECT_GT(nonzero, 10);
}

// slurm-block's FreedStateCheck (the simulator's reservation probes ask it before building a
// probe state): on random states, with random running jobs freed and taken back one at a
// time, its answer must be kFails exactly when the scan, on a copy of the state with those
// jobs released, fails with "no block of the level has room", and kFits only when the scan
// places the job (always, for whole-node requests on levels without a lower-level limit).
TEST(IndexedSearch, SlurmBlockFreedStateCheckIsTheScans) {
  const Cluster clusters[] = {preset("dgx-h100?nodes=48&su_size=8"), preset("gb200-nvl72?racks=4"), mixed_cluster()};
  for (const Cluster& c : clusters) {
    std::mt19937 rng(23);
    int checks = 0, no_room = 0, placed = 0, fits = 0;
    for (int round = 0; round < 40; ++round) {
      // A random base state: jobs placed by first-fit until about 60-95% of the GPUs are taken.
      AllocationState base(c);
      std::vector<std::string> running;
      const double target = 0.6 + 0.35 * static_cast<double>(rng() % 100) / 100.0;
      for (int j = 0; j < 400 && base.total_free_gpus() > (1 - target) * static_cast<double>(c.gpu_count()); ++j) {
        JobRequest r = random_request(rng, "first-fit", c);
        r.job_id = fmt::format("b{}", j);
        auto norm = normalize(r, c);
        if (!norm) continue;
        auto g = choose_gpus(base, *norm, first_fit_policy());
        if (!g) continue;
        ASSERT_TRUE(base.allocate(r.job_id, *g).has_value());
        running.push_back(r.job_id);
      }
      for (int ask = 0; ask < 4; ++ask) {
        JobRequest r = random_request(rng, "slurm-block", c);
        r.job_id = "asked";
        auto norm = normalize(r, c);
        if (!norm) continue;
        std::unique_ptr<FreedStateCheck> check = slurm_block_policy().freed_state_check(base, *norm);
        // Only the one-segment requests the index answers, and not the one-node path, have one.
        const bool expect_check =
            norm->segment == 0 && norm->gpu_model.empty() && !(norm->nodes == 1 && norm->slurm_version != "25.11");
        EXPECT_EQ(check != nullptr, expect_check) << c.name() << " nodes " << norm->nodes;
        if (!check) continue;
        std::vector<char> freed(running.size(), 0);
        for (int step = 0; step < 30 && !running.empty(); ++step) {
          const std::size_t k = rng() % running.size();
          const std::vector<GpuId> gpus(base.job_gpus(running[k]).begin(), base.job_gpus(running[k]).end());
          freed[k] ? check->unfree_gpus(gpus) : check->free_gpus(gpus);
          freed[k] ^= 1;
          AllocationState probe = base;
          for (std::size_t i = 0; i < running.size(); ++i)
            if (freed[i]) {
              ASSERT_TRUE(probe.release(running[i]).has_value());
            }
          auto got = choose_gpus(probe, *norm, slurm_block_scan_policy());
          if (probe.total_free_gpus() < norm->total_gpus) {  // choose_gpus' count fails first
            EXPECT_FALSE(got.has_value());
            continue;
          }
          const bool scan_no_room = !got && got.error().message.find("no block of the level") != std::string::npos;
          const FreedStateCheck::Answer answer = check->answer();
          if (answer == FreedStateCheck::Answer::kFits) {
            ASSERT_TRUE(got.has_value()) << c.name() << " round " << round << " step " << step << ": "
                                         << got.error().message;
            ++fits;
          }
          ASSERT_EQ(answer == FreedStateCheck::Answer::kFails, scan_no_room)
              << c.name() << " round " << round << " step " << step << " nodes " << norm->nodes << " gpus "
              << norm->total_gpus << (got ? "" : ": " + got.error().message);
          ++checks;
          no_room += scan_no_room;
          placed += got.has_value();
        }
      }
    }
    // Both answers occur: the comparison is not one-sided (no room is rarer on the GB200
    // racks, four base blocks of 18 nodes).
    EXPECT_GT(no_room, 10) << c.name();
    EXPECT_GT(checks - no_room, 100) << c.name();
    EXPECT_GT(placed, 50) << c.name();
    EXPECT_GT(fits, 50) << c.name();
  }
}

}  // namespace
}  // namespace toposched
