// GroupCollectiveCosts (the per-group cache behind estimate_job_comm) against the direct
// estimate: on many seeded groups and job placements, on clusters with NVSwitch nodes,
// accelerator domains, PCIe-only nodes, oversubscribed tiers and two node types, every time
// must equal estimate_collective's bit for bit (EXPECT_EQ on doubles, no tolerance), and
// every error must be the same error.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cost/collective.h"
#include "cost/job_comm.h"
#include "support/preset_cluster.h"
#include "support/two_leaf_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

// Two node types (8-GPU NVSwitch H100 and 4-GPU PCIe-only) under oversubscribed leaves.
Cluster mixed_cluster() {
  ClusterBuilder b("mixed");
  const NodeTypeId h100 = b.add_node_type(testing::h100_node_type());
  NodeType pcie;
  pcie.name = "pcie4";
  pcie.gpu_model = "A100-PCIE";
  pcie.gpu_count = 4;
  pcie.pcie_GBps = 31.5;
  // No NVLink: GPU pairs meet at a PCIe host bridge (same half) or across sockets.
  pcie.gpu_links = NodeType::full_nvlink_mesh(4, 0);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      pcie.gpu_links[static_cast<std::size_t>(a * 4 + b)] = {
          a == b ? LinkClass::kSelf : a / 2 == b / 2 ? LinkClass::kPhb : LinkClass::kSys, 0};
  // Uneven NIC shares: GPU 0 has NIC 0 to itself, GPUs 1-3 share NIC 1. Groups on the same
  // nodes with other local GPUs then differ in egress.
  for (int k = 0; k < 2; ++k) {
    Nic nic{fmt::format("mlx5_{}", k), 200, {}, -1, true};
    for (int g = 0; g < 4; ++g) nic.gpu_affinity.push_back((g == 0) == (k == 0) ? LinkClass::kPix : LinkClass::kSys);
    pcie.nics.push_back(nic);
  }
  const NodeTypeId slow = b.add_node_type(pcie);
  const int leaf = b.add_tier(Tier{"leaf", 0, 0.5, 2.0});
  const int spine = b.add_tier(Tier{"spine", 0, 0.5, 1.5});
  const SwitchId top = b.add_switch("spine", spine);
  for (int l = 0; l < 4; ++l) {
    const SwitchId s = b.add_switch(fmt::format("leaf{}", l), leaf);
    b.connect(s, top);
    for (int n = 0; n < 6; ++n) b.attach(b.add_node(fmt::format("n{}{}", l, n), n % 3 == 2 ? slow : h100), s);
  }
  auto c = std::move(b).build();
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message);
  return std::move(*c);
}

std::vector<Cluster> clusters() {
  std::vector<Cluster> out;
  out.push_back(preset("dgx-h100?nodes=64"));
  out.push_back(preset("gb200-nvl72?racks=4&racks_per_su=2"));  // multi-node NVLink islands
  out.push_back(preset("synthetic?nodes=48&gpus_per_node=4&nvlinks=0&fanout=4,4"));
  out.push_back(preset("dgx-a100?nodes=40&su_size=10"));
  out.push_back(mixed_cluster());
  return out;
}

// A group drawn the ways a job's placement makes them: part of one node in any order, whole
// nodes, one GPU on each of several nodes, a few GPUs on each of a few nodes, anywhere; and
// faults: a GPU twice, a GPU outside the cluster. A small pool of nodes makes shapes repeat.
std::vector<GpuId> draw_group(const Cluster& c, std::mt19937_64& rng, std::vector<NodeId>& last_spread) {
  auto node = [&] { return NodeId(static_cast<std::uint32_t>(rng() % std::min<std::size_t>(c.node_count(), 12))); };
  auto local_perm = [&](NodeId n) {
    std::vector<int> l(static_cast<std::size_t>(c.node_gpu_count(n)));
    for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<int>(i);
    std::shuffle(l.begin(), l.end(), rng);
    return l;
  };
  std::vector<GpuId> g;
  switch (rng() % 8) {
    case 0: {  // part of one node, any order (a TP group), possibly one GPU
      const NodeId n = node();
      auto l = local_perm(n);
      l.resize(1 + rng() % l.size());
      for (int i : l) g.push_back(c.node_gpu(n, i));
      break;
    }
    case 1: {  // whole nodes
      const std::size_t k = 1 + rng() % 4;
      for (std::size_t i = 0; i < k; ++i) {
        const NodeId n = node();
        if (std::any_of(g.begin(), g.end(), [&](GpuId x) { return c.gpu_node(x) == n; })) continue;
        for (int l = 0; l < c.node_gpu_count(n); ++l) g.push_back(c.node_gpu(n, l));
      }
      break;
    }
    case 2:
    case 3: {  // one GPU on each of several nodes (PP and DP groups), same local index or not;
               // half of the time on the previous such group's nodes (the next DP group of a stage)
      const int same = static_cast<int>(rng() % 2);
      auto local = [&](NodeId n) {
        return same ? 0 : static_cast<int>(rng() % static_cast<std::uint64_t>(c.node_gpu_count(n)));
      };
      if (!last_spread.empty() && rng() % 2) {
        for (NodeId n : last_spread) g.push_back(c.node_gpu(n, local(n)));
        break;
      }
      last_spread.clear();
      for (std::size_t i = 0, k = 2 + rng() % 8; i < k; ++i) {
        const NodeId n(static_cast<std::uint32_t>(rng() % c.node_count()));
        if (std::any_of(g.begin(), g.end(), [&](GpuId x) { return c.gpu_node(x) == n; })) continue;
        g.push_back(c.node_gpu(n, local(n)));
        last_spread.push_back(n);
      }
      break;
    }
    case 4: {  // a few GPUs on each of a few nodes
      for (std::size_t i = 0, k = 2 + rng() % 3; i < k; ++i) {
        const NodeId n = node();
        if (std::any_of(g.begin(), g.end(), [&](GpuId x) { return c.gpu_node(x) == n; })) continue;
        auto l = local_perm(n);
        l.resize(1 + rng() % l.size());
        for (int x : l) g.push_back(c.node_gpu(n, x));
      }
      std::shuffle(g.begin(), g.end(), rng);
      break;
    }
    case 5: {  // anywhere
      std::vector<GpuId> all;
      for (std::uint32_t i = 0; i < c.gpu_count(); ++i) all.push_back(GpuId(i));
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(1 + rng() % std::min<std::size_t>(all.size(), 40));
      g = all;
      break;
    }
    case 6: {  // a GPU twice (inside one node, or across nodes)
      const NodeId n = node();
      auto l = local_perm(n);
      for (int i : l) g.push_back(c.node_gpu(n, i));
      if (rng() % 2) g.push_back(c.node_gpu(NodeId((n.value + 1) % static_cast<std::uint32_t>(c.node_count())), 0));
      g.push_back(g[rng() % g.size()]);
      std::shuffle(g.begin(), g.end(), rng);
      break;
    }
    default: {  // a GPU outside the cluster
      const NodeId n = node();
      g.push_back(c.node_gpu(n, 0));
      g.push_back(GpuId(static_cast<std::uint32_t>(c.gpu_count() + rng() % 5)));
      break;
    }
  }
  return g;
}

TEST(GroupCollectiveCosts, EqualsEstimateCollectiveBitForBit) {
  const std::vector<std::vector<Collective>> collective_sets = {
      {Collective::kAllReduce},  {Collective::kAllGather, Collective::kReduceScatter},
      {Collective::kAllToAll},   {Collective::kSendRecv},
      {Collective::kBroadcast},  {Collective::kReduce, Collective::kAllReduce},
  };
  const double sizes[] = {0, 1, 4096, 3.3e6, 1.6e8, 2.1e9};
  CostOptions shared;
  shared.network_share = 0.37;
  shared.share_accounts_for_oversubscription = true;
  std::mt19937_64 rng(20261207);
  long compared = 0, errors = 0;
  for (const Cluster& c : clusters()) {
    for (const CostOptions& options : {CostOptions{}, shared}) {
      GroupCollectiveCosts costs(c, options);  // one per cluster: later groups hit earlier entries
      std::vector<NodeId> last_spread;
      for (int draw = 0; draw < 1500; ++draw) {
        const std::vector<GpuId> group = draw_group(c, rng, last_spread);
        const auto& set = collective_sets[rng() % collective_sets.size()];
        const double bytes = sizes[rng() % std::size(sizes)];
        Result<double> direct = 0.0;
        for (Collective coll : set) {
          auto e = estimate_collective(c, group, coll, bytes, Algorithm::kAuto, options);
          if (!e) {
            direct = tl::unexpected(e.error());
            break;
          }
          *direct += e->time_us;
        }
        auto cached = costs.time_us(group, set, bytes);
        ASSERT_EQ(direct.has_value(), cached.has_value())
            << c.name() << " draw " << draw << ": " << (direct ? cached.error().message : direct.error().message);
        if (direct) {
          EXPECT_EQ(*direct, *cached) << c.name() << " draw " << draw << ", " << group.size() << " GPUs";
          ++compared;
        } else {
          EXPECT_EQ(direct.error().message, cached.error().message);
          ++errors;
        }
      }
    }
  }
  // The draws reached both the estimates and the faults.
  EXPECT_GT(compared, 10000);
  EXPECT_GT(errors, 1000);
}

TEST(GroupCollectiveCosts, BadRequestsFailAsEstimateCollectiveDoes) {
  const Cluster c = preset("dgx-h100?nodes=2");
  GroupCollectiveCosts costs(c, CostOptions{});
  const std::vector<GpuId> two = {c.node_gpu(NodeId(0), 0), c.node_gpu(NodeId(0), 1)};
  const Collective ar[] = {Collective::kAllReduce};
  for (double bytes : {-1.0, std::numeric_limits<double>::infinity()}) {
    auto direct = estimate_collective(c, two, Collective::kAllReduce, bytes);
    auto cached = costs.time_us(two, ar, bytes);
    ASSERT_FALSE(direct.has_value());
    ASSERT_FALSE(cached.has_value());
    EXPECT_EQ(direct.error().message, cached.error().message);
  }
  auto empty = costs.time_us({}, ar, 1e6);
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().message, estimate_collective(c, {}, Collective::kAllReduce, 1e6).error().message);
}

// A job's per-kind time: the slowest group of the kind, each group costed directly.
double direct_kind_time(const Cluster& c, std::span<const GpuId> gpus, const ParallelPlan& plan, const GroupComm& g) {
  std::vector<Collective> colls;
  for (std::size_t start = 0; start <= g.collective.size();) {
    const std::size_t plus = std::min(g.collective.find('+', start), g.collective.size());
    auto parsed = parse_collective(std::string_view(g.collective).substr(start, plus - start));
    EXPECT_TRUE(parsed.has_value()) << g.collective;
    if (parsed) colls.push_back(*parsed);
    start = plus + 1;
  }
  double worst = 0;
  for (int r = 0; r < plan.gpus(); ++r) {
    auto members = group_of_rank(plan, g.kind, r);
    EXPECT_TRUE(members.has_value());
    if (!members || members->front() != r) continue;
    std::vector<GpuId> ranks;
    for (int m : *members) ranks.push_back(gpus[static_cast<std::size_t>(m)]);
    double per_call = 0;
    for (Collective coll : colls) {
      auto e = estimate_collective(c, ranks, coll, g.bytes);
      EXPECT_TRUE(e.has_value());
      if (e) per_call += e->time_us;
    }
    worst = std::max(worst, per_call * g.calls);
  }
  return worst;
}

TEST(GroupCollectiveCosts, JobEstimatesEqualPerGroupDirectEstimates) {
  struct Job {
    ParallelPlan plan;
    const char* model;
  };
  std::vector<Job> jobs;
  auto plan = [](int tp, int pp, int dp, int ep = 1, int cp = 1) {
    ParallelPlan p;
    p.tp = tp, p.pp = pp, p.dp = dp, p.ep = ep, p.cp = cp;
    return p;
  };
  jobs.push_back({plan(8, 4, 4), "llm-dense"});
  jobs.push_back({plan(4, 2, 4, 1, 2), "llm-dense"});
  jobs.push_back({plan(2, 2, 2, 4), "llm-moe"});
  jobs.push_back({plan(1, 1, 48), "dp-vision"});
  jobs.push_back({plan(8, 1, 6), "inference"});
  ParallelPlan reordered = plan(4, 4, 4);
  reordered.order = "dp-tp-cp-ep-pp";
  jobs.push_back({reordered, "llm-dense"});
  std::mt19937_64 rng(34);
  int compared = 0;
  for (const Cluster& c : clusters()) {
    for (const Job& job : jobs) {
      const auto model = workload_class(job.model);
      ASSERT_TRUE(model.has_value());
      const std::size_t n = static_cast<std::size_t>(job.plan.gpus());
      if (n > c.gpu_count()) continue;
      for (int seed = 0; seed < 6; ++seed) {
        // Seeded placements: packed in node order from a random node, whole random nodes in
        // random order, or GPUs scattered anywhere.
        std::vector<GpuId> all;
        for (std::uint32_t i = 0; i < c.gpu_count(); ++i) all.push_back(GpuId(i));
        std::vector<GpuId> gpus;
        if (seed % 3 == 0) {
          const std::size_t first = rng() % (all.size() - n + 1);
          gpus.assign(all.begin() + static_cast<std::ptrdiff_t>(first), all.begin() + static_cast<std::ptrdiff_t>(first + n));
        } else if (seed % 3 == 1) {
          std::vector<std::uint32_t> nodes(c.node_count());
          for (std::size_t i = 0; i < nodes.size(); ++i) nodes[i] = static_cast<std::uint32_t>(i);
          std::shuffle(nodes.begin(), nodes.end(), rng);
          for (std::uint32_t node : nodes)
            for (int l = 0; l < c.node_gpu_count(NodeId(node)) && gpus.size() < n; ++l) gpus.push_back(c.node_gpu(NodeId(node), l));
        } else {
          std::shuffle(all.begin(), all.end(), rng);
          gpus.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
        }
        auto est = estimate_job_comm(c, gpus, job.plan, *model);
        ASSERT_TRUE(est.has_value()) << est.error().message;
        for (const GroupComm& g : est->groups) {
          EXPECT_EQ(g.time_us, direct_kind_time(c, gpus, job.plan, g))
              << c.name() << ", " << job.model << ", kind " << g.kind << ", seed " << seed;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 300);
}

}  // namespace
}  // namespace toposched
