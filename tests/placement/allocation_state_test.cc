// AllocationState: counters, gang semantics, release, snapshots, invariants, state files.
#include <gtest/gtest.h>

#include "placement/allocation_state.h"
#include "placement/state_file.h"
#include "topology/presets.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

std::vector<GpuId> node_gpus(const Cluster& c, std::uint32_t node, int from, int to) {
  std::vector<GpuId> out;
  for (int l = from; l < to; ++l) out.push_back(c.node_gpu(NodeId(node), l));
  return out;
}

TEST(AllocationState, CountersFollowAllocateAndRelease) {
  Cluster c = preset("dgx-h100?nodes=64");  // 2 leaves of 32 nodes, one spine
  AllocationState s(c);
  SwitchId leaf0 = c.node_switch(NodeId(0));
  SwitchId spine = c.switch_parent(leaf0);
  ASSERT_TRUE(spine.valid());
  EXPECT_EQ(s.total_free_gpus(), 512);
  EXPECT_EQ(s.switch_free_gpus(leaf0), 256);
  EXPECT_EQ(s.switch_free_nodes(spine), 64);

  ASSERT_TRUE(s.allocate("a", node_gpus(c, 0, 0, 3)));
  EXPECT_EQ(s.free_gpus(NodeId(0)), 5);
  EXPECT_FALSE(s.node_whole_free(NodeId(0)));
  EXPECT_EQ(s.switch_free_gpus(leaf0), 253);
  EXPECT_EQ(s.switch_free_nodes(leaf0), 31);
  EXPECT_EQ(s.switch_free_nodes(spine), 63);
  EXPECT_EQ(s.total_free_nodes(), 63);
  EXPECT_EQ(s.gpu_owner(c.node_gpu(NodeId(0), 1)), "a");
  EXPECT_TRUE(s.gpu_free(c.node_gpu(NodeId(0), 3)));
  ASSERT_TRUE(s.check_invariants());

  auto released = s.release("a");
  ASSERT_TRUE(released);
  EXPECT_EQ(released->size(), 3u);
  EXPECT_TRUE(s.same_counters(AllocationState(c)));
  EXPECT_FALSE(s.release("a"));
}

TEST(AllocationState, FreeGpuIndexFollowsAllocateAndRelease) {
  Cluster c = preset("dgx-h100?nodes=64");  // 8-GPU nodes: one GPU-count slot, buckets 0..8
  AllocationState s(c);
  ASSERT_EQ(s.bucket_count(), 9);
  const SwitchId leaf0 = c.node_switch(NodeId(0)), leaf1 = c.node_switch(NodeId(32));
  EXPECT_EQ(s.bucket_nodes(8).size(), 64u);
  EXPECT_EQ(s.leaf_switches().size(), 2u);
  EXPECT_TRUE(s.switchless_nodes().empty());

  ASSERT_TRUE(s.allocate("a", node_gpus(c, 0, 0, 3)));   // node 0: 5 free
  ASSERT_TRUE(s.allocate("b", node_gpus(c, 33, 0, 8)));  // node 33: none free
  ASSERT_TRUE(s.allocate("c", node_gpus(c, 1, 0, 3)));   // node 1: 5 free
  EXPECT_EQ(s.node_bucket(NodeId(0)), 5);
  EXPECT_EQ(s.bucket_free(s.node_bucket(NodeId(33))), 0);
  EXPECT_EQ(s.bucket_node_gpus(5), 8);
  EXPECT_EQ(s.bucket_nodes(5).size(), 2u);
  EXPECT_EQ(s.bucket_nodes(8).size(), 61u);
  EXPECT_EQ(s.switch_bucket_nodes(leaf0, 5), 2);
  EXPECT_EQ(s.switch_bucket_nodes(leaf1, 5), 0);
  EXPECT_EQ(s.switch_bucket_nodes(leaf1, 0), 1);
  EXPECT_EQ(s.switch_bucket_nodes(c.switch_parent(leaf0), 8), 61);
  ASSERT_TRUE(s.check_invariants());

  ASSERT_TRUE(s.release("a"));  // node 0 leaves bucket 5; node 1 stays listed
  EXPECT_EQ(s.bucket_nodes(5).size(), 1u);
  EXPECT_EQ(s.bucket_nodes(5)[0], NodeId(1));
  ASSERT_TRUE(s.check_invariants());
  ASSERT_TRUE(s.release("b"));
  ASSERT_TRUE(s.release("c"));
  EXPECT_TRUE(s.same_counters(AllocationState(c)));
}

TEST(AllocationState, GangAllocationIsAllOrNothing) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  ASSERT_TRUE(s.allocate("a", node_gpus(c, 1, 0, 2)));
  AllocationState before = s.snapshot();
  // Second GPU list overlaps job a on node 1: nothing of it may be taken.
  std::vector<GpuId> wanted = node_gpus(c, 0, 0, 8);
  wanted.push_back(c.node_gpu(NodeId(1), 1));
  auto r = s.allocate("b", wanted);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInfeasible);
  EXPECT_NE(r.error().message.find("'a'"), std::string::npos) << r.error().message;
  EXPECT_TRUE(s.same_counters(before));
  EXPECT_TRUE(s.gpu_free(c.node_gpu(NodeId(0), 0)));
  EXPECT_FALSE(s.has_job("b"));
  // The same GPU twice, an unknown GPU, a reused id, an empty list: all refused.
  std::vector<GpuId> twice = {c.node_gpu(NodeId(2), 0), c.node_gpu(NodeId(2), 0)};
  EXPECT_FALSE(s.allocate("c", twice));
  EXPECT_FALSE(s.allocate("d", std::vector<GpuId>{GpuId(99999)}));
  EXPECT_FALSE(s.allocate("a", node_gpus(c, 3, 0, 1)));
  EXPECT_FALSE(s.allocate("e", std::vector<GpuId>{}));
  EXPECT_TRUE(s.same_counters(before));
  EXPECT_TRUE(s.check_invariants());
}

// allocate/release count consecutive GPUs of one node as a run: GPUs in rank order that
// leave a node and come back, or take a node's GPUs out of local order, must still count
// each GPU once (the run test compares GPU ids with the node's range, not node ids).
TEST(AllocationState, RunsOfOneNodeInAnyOrderCountEachGpuOnce) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  AllocationState empty = s.snapshot();
  const std::vector<GpuId> zigzag = {c.node_gpu(NodeId(0), 3), c.node_gpu(NodeId(1), 0), c.node_gpu(NodeId(0), 1),
                                     c.node_gpu(NodeId(0), 7), c.node_gpu(NodeId(1), 7), c.node_gpu(NodeId(1), 6),
                                     c.node_gpu(NodeId(3), 7), c.node_gpu(NodeId(3), 0)};
  ASSERT_TRUE(s.allocate("z", zigzag));
  EXPECT_EQ(s.free_gpus(NodeId(0)), 5);
  EXPECT_EQ(s.free_gpus(NodeId(1)), 5);
  EXPECT_EQ(s.free_gpus(NodeId(2)), 8);
  EXPECT_EQ(s.free_gpus(NodeId(3)), 6);
  EXPECT_EQ(s.total_free_gpus(), 32 - 8);
  EXPECT_TRUE(s.check_invariants());
  auto back = s.release("z");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, zigzag);
  EXPECT_TRUE(s.same_counters(empty));
  EXPECT_TRUE(s.check_invariants());
}

TEST(AllocationState, DomainCountersOnNvl72) {
  Cluster c = preset("gb200-nvl72?racks=2");
  AllocationState s(c);
  DomainId d0 = c.node_domain(NodeId(0));
  ASSERT_TRUE(d0.valid());
  EXPECT_EQ(s.domain_free_gpus(d0), 72);
  ASSERT_TRUE(s.allocate("a", node_gpus(c, 0, 0, 4)));
  ASSERT_TRUE(s.allocate("b", node_gpus(c, 1, 0, 1)));
  EXPECT_EQ(s.domain_free_gpus(d0), 67);
  EXPECT_EQ(s.domain_free_nodes(d0), 16);
  ASSERT_TRUE(s.release("a"));
  EXPECT_EQ(s.domain_free_nodes(d0), 17);
  EXPECT_TRUE(s.check_invariants());
}

TEST(AllocationState, SnapshotRestore) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  AllocationState snap = s.snapshot();
  ASSERT_TRUE(s.allocate("a", node_gpus(c, 0, 0, 8)));
  s.restore(snap);
  EXPECT_TRUE(s.same_counters(AllocationState(c)));
  EXPECT_FALSE(s.has_job("a"));
  EXPECT_TRUE(s.gpu_free(c.node_gpu(NodeId(0), 0)));
}

// stamp() names the content: copies carry it, every change draws a new one, and two copies
// that change apart never share one (the probe state and the live state of the simulator
// are such copies, and slurm-block's per-thread counts are keyed by it).
TEST(AllocationState, StampNamesTheContent) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState a(c);
  AllocationState other(c);
  EXPECT_NE(a.stamp(), other.stamp());
  const std::uint64_t fresh = a.stamp();
  ASSERT_TRUE(a.allocate("x", node_gpus(c, 0, 0, 2)));
  EXPECT_NE(a.stamp(), fresh);
  AllocationState b = a.snapshot();
  EXPECT_EQ(b.stamp(), a.stamp());
  ASSERT_TRUE(a.allocate("y", node_gpus(c, 1, 0, 2)));
  ASSERT_TRUE(b.allocate("y", node_gpus(c, 2, 0, 2)));  // the same job elsewhere: other content
  EXPECT_NE(a.stamp(), b.stamp());
  // A failed change changes nothing, the stamp included.
  const std::uint64_t before = a.stamp();
  EXPECT_FALSE(a.allocate("z", node_gpus(c, 1, 0, 1)));  // GPU held by y
  EXPECT_FALSE(a.release("nobody"));
  EXPECT_EQ(a.stamp(), before);
  // Back to the earlier content by release: a new stamp all the same (never an earlier one).
  ASSERT_TRUE(a.release("y"));
  EXPECT_NE(a.stamp(), before);
  EXPECT_NE(a.stamp(), b.stamp());
  b.restore(a);
  EXPECT_EQ(b.stamp(), a.stamp());
}

TEST(StateFile, RoundTripsJobsInRankOrder) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  std::vector<GpuId> a = {c.node_gpu(NodeId(1), 3), c.node_gpu(NodeId(0), 7), c.node_gpu(NodeId(1), 0)};
  ASSERT_TRUE(s.allocate("train-1", a));
  ASSERT_TRUE(s.allocate("infer", node_gpus(c, 2, 0, 2)));
  std::string text = state_to_json(s).value();
  auto back = state_from_json(c, text, "s.json");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_TRUE(back->same_counters(s));
  EXPECT_EQ(back->job_ids(), (std::vector<std::string>{"train-1", "infer"}));
  auto g = back->job_gpus("train-1");
  EXPECT_EQ(std::vector<GpuId>(g.begin(), g.end()), a);
}

TEST(StateFile, ErrorsNameTheirPosition) {
  Cluster c = preset("dgx-h100?nodes=4");
  const std::string head =
      "{\"format\": \"toposched-allocation-state\", \"version\": 1, \"cluster\": \"" + c.name() + "\",\n";
  struct Case {
    std::string text;
    std::string expect;
  } cases[] = {
      {head + "\"jobs\": [{\"id\": \"a\", \"gpus\": [\"dgx-h100-009:0\"]}]}", "no node named 'dgx-h100-009'"},
      {head + "\"jobs\": [{\"id\": \"a\", \"gpus\": [\"dgx-h100-001:8\"]}]}", "GPUs 0..7"},
      {head + "\"jobs\": [{\"id\": \"a\", \"gpus\": [\"dgx-h100-001:1\"]},\n {\"id\": \"b\", \"gpus\": "
              "[\"dgx-h100-001:1\"]}]}",
       "already owned by job 'a'"},
      {head + "\"jobs\": [{\"id\": \"a\", \"gpus\": [\"x:1\"]}, {\"id\": \"a\", \"gpus\": [\"dgx-h100-001:1\"]}]}",
       "no node named 'x'"},
      {"{\"format\": \"toposched-allocation-state\", \"cluster\": \"other\"}", "not '" + c.name() + "'"},
      {head + "\"jobs\": [{\"id\": \"a\", \"gpus\": [\"dgx-h100-001:1\"", "s.json:"},
  };
  for (const auto& k : cases) {
    auto r = state_from_json(c, k.text, "s.json");
    ASSERT_FALSE(r) << k.text;
    EXPECT_NE(r.error().to_string().find(k.expect), std::string::npos) << r.error().to_string();
    EXPECT_EQ(r.error().where.file, "s.json");
    EXPECT_GT(r.error().where.line, 0) << r.error().to_string();
  }
}

// The fast path gives the yaml-cpp reader's answer on every document: the same jobs, or
// the same error at the same place (those it reports itself, and those it leaves to it).
void expect_same_answer(const Cluster& c, const std::string& text) {
  auto fast = state_from_json(c, text, "s.json");
  auto exact = state_from_json_exact(c, text, "s.json");
  ASSERT_EQ(fast.has_value(), exact.has_value()) << text << "\n" << (fast ? exact.error() : fast.error()).to_string();
  if (fast) {
    EXPECT_EQ(state_to_json(*fast).value(), state_to_json(*exact).value()) << text;
  } else {
    EXPECT_EQ(fast.error().to_string(), exact.error().to_string()) << text;
  }
}

TEST(StateFile, FastPathGivesTheExactReadersAnswer) {
  Cluster c = preset("dgx-h100?nodes=4");
  const std::string head =
      "{\"format\": \"toposched-allocation-state\", \"version\": 1, \"cluster\": \"" + c.name() + "\", \"gpus\": 32,\n";
  const std::string a = "{\"id\": \"a\", \"gpus\": [\"dgx-h100-001:1\", \"dgx-h100-002:0\"]}";
  const std::string docs[] = {
      head + "\"jobs\": [" + a + "]}\n",
      head + "\"jobs\": []}",
      head + "\"jobs\": [" + a + ",\n {\"id\": \"b\", \"gpus\": [\"dgx-h100-001:1\"]}]}",      // owned twice
      head + "\"jobs\": [" + a + ",\n  " + a + "]}",                                            // id twice
      head + "\"jobs\": [{\"id\": \"a\", \"gpus\": [\"dgx-h100-001:1\", \"dgx-h100-001:1\"]}]}",  // listed twice
      head + "\"jobs\": [" + a + ",\n  " + a + ",\n {\"id\": \"c\", \"gpus\": [\"x:1\"]}]}",      // later errors
      head + "\"jobs\": [" + a + ",\n  " + a + ",\n {\"id\": \"c\", \"gpus\": [1]}]}",
      head + "\"jobs\": [" + a + ",\n  " + a + ",\n {\"id\": \"c\", \"id\": \"d\"}]}",          // parse error after
      head + "\"jobs\": [" + a + ",\n  " + a + ",\n {\"id\": \"c\", \"x\": \"b\\hd\"}]}",       // bad escape after
      head + "\"jobs\": [" + a + ",\n  " + a + ",\n {\"id\": \"c\", \"gpus\": [\"dgx-h100-001:1\"",  // truncated after
      head + "\"jobs\": [{\"gpus\": [\"dgx-h100-001:1\"], \"id\": \"a\"}]}",
      head + "\"jobs\": [{\"id\": \"\", \"gpus\": [\"dgx-h100-001:1\"]}]}",
      head + "\"jobs\": [{\"id\": \"a\", \"gpus\": []}]}",
      head + "\"jobs\": null}",
      head + "\"extra\": 1, \"jobs\": []}",
      head + "\"jobs\": []} {}",
      "{\"format\": \"toposched-allocation-state\", \"version\": 2, \"cluster\": \"" + c.name() + "\"}",
      "{\"format\": \"toposched-allocation-state\", \"version\": 1.0, \"cluster\": \"" + c.name() + "\"}",
      "{\"cluster\": \"" + c.name() + "\", \"jobs\": [" + a + "]}",
  };
  for (const std::string& text : docs) expect_same_answer(c, text);
  // Every byte of a valid file flipped in turn.
  const std::string valid = docs[2];
  for (std::size_t i = 0; i < valid.size(); ++i) {
    for (char x : {'\x01', '\x20', '\x0f'}) {
      std::string bad = valid;
      bad[i] = static_cast<char>(bad[i] ^ x);
      expect_same_answer(c, bad);
    }
  }
}

TEST(StateFile, TruncatedCopiesNeverCrash) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  ASSERT_TRUE(s.allocate("a", node_gpus(c, 0, 0, 8)));
  ASSERT_TRUE(s.allocate("b", node_gpus(c, 1, 2, 5)));
  std::string text = state_to_json(s).value();
  for (std::size_t cut = 0; cut < text.size(); cut += 7) {
    auto r = state_from_json(c, text.substr(0, cut), "t.json");
    if (r) {
      EXPECT_TRUE(r->check_invariants());
    }
  }
  for (std::size_t i = 0; i < text.size(); i += 11) {
    std::string bad = text;
    bad[i] = static_cast<char>(bad[i] ^ 0x15);
    auto r = state_from_json(c, bad, "t.json");
    if (r) {
      EXPECT_TRUE(r->check_invariants());
    }
  }
}

}  // namespace
}  // namespace toposched
