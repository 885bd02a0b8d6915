// Routing policies on hand-made states: Dynamo's cost exactly, and kv-topo's compute-vs-pull
// decision over the actual path.
#include <cmath>

#include <gtest/gtest.h>

#include "formats/cluster_source.h"
#include "router/request_sim.h"
#include "router/router.h"

namespace toposched::router {
namespace {

struct Fixture {
  Cluster cluster;
  std::vector<WorkerPlacement> workers;
  TimeModel time;
  TransferTable transfers;
};

Fixture make(const std::string& spec, int workers) {
  auto cluster = load_cluster(spec);
  EXPECT_TRUE(cluster) << cluster.error().to_string();
  auto placed = place_workers(*cluster, workers, 1);
  EXPECT_TRUE(placed) << placed.error().to_string();
  TimeModel time(*find_model("llama3-8b"), *find_gpu_spec("H100-SXM5"), 1);
  auto table = transfer_table(*cluster, *placed, time.model().kv_bytes_per_token() * 512);
  EXPECT_TRUE(table) << table.error().to_string();
  return Fixture{std::move(*cluster), std::move(*placed), time, std::move(*table)};
}

std::vector<std::uint64_t> ids(std::uint64_t first, int n) {
  std::vector<std::uint64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(first + static_cast<std::uint64_t>(i));
  return v;
}

TEST(PlaceWorkers, SpreadsOverNodesAndChecksFit) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=2");
  ASSERT_TRUE(cluster);
  auto w = place_workers(*cluster, 8, 1);
  ASSERT_TRUE(w);
  EXPECT_EQ(cluster->node_name((*w)[0].node), "dgx-h100-001");
  EXPECT_EQ(cluster->node_name((*w)[1].node), "dgx-h100-002");
  EXPECT_EQ((*w)[2].gpus[0], cluster->node_gpu((*w)[0].node, 1));
  auto tp4 = place_workers(*cluster, 4, 4);
  ASSERT_TRUE(tp4);
  EXPECT_EQ((*tp4)[2].gpus.size(), 4u);
  EXPECT_FALSE(place_workers(*cluster, 5, 4));
  EXPECT_FALSE(place_workers(*cluster, 1, 16));
  EXPECT_FALSE(place_workers(*cluster, 0, 1));
}

TEST(TransferTable, NvlinkIsFarFasterThan25GbE) {
  Fixture f = make(std::string(TOPOSCHED_SOURCE_DIR) + "/examples/h100-2n-25gbe.yaml", 4);
  // Workers 0 and 2 share node h100-01; 1 and 3 are on h100-02.
  EXPECT_EQ(f.transfers.level_at(0, 2), "nvlink");
  EXPECT_EQ(f.transfers.level_at(0, 1), "tier:tor");
  EXPECT_GT(f.transfers.at(0, 2).blocks_per_s, 100 * f.transfers.at(0, 1).blocks_per_s);
  EXPECT_EQ(f.transfers.at(1, 1).seconds(10), 0);
  EXPECT_GT(f.transfers.at(0, 1).seconds(10), f.transfers.at(0, 1).seconds(1));
}

TEST(KvPolicy, IsDynamosCostExactly) {
  Fixture f = make("preset:dgx-h100?nodes=1", 2);
  Router router(**find_policy("kv"), 2, f.time, f.transfers);
  auto q = sequence_hashes(ids(100, 4));  // 4 blocks, 2048 tokens
  for (int b = 0; b < 3; ++b) router.index().store(0, q[static_cast<std::size_t>(b)]);
  // Worker 0: (0 + 2048 - 3*512)/512 = 1 prefill block + 4 new decode blocks = 5.
  // Worker 1: 2048/512 = 4 + 4 = 8.
  RouteDecision d = router.route(1, {q, 2048});
  EXPECT_EQ(d.worker, 0);
  EXPECT_DOUBLE_EQ(d.cost, 5.0);
  EXPECT_EQ(d.local_overlap, 3);
  // Now worker 0 has 512 prefill tokens and 4 active blocks. A second copy of the request
  // shares all 4 active blocks there: 2 prefill blocks + 4 active = 6 against 4 + 4 = 8.
  RouteDecision again = router.route(2, {q, 2048});
  EXPECT_EQ(again.worker, 0);
  EXPECT_DOUBLE_EQ(again.cost, 6.0);
  // A long new request: worker 1 is cheaper (16 + 16 = 32) than worker 0 (2 + 16 + 4 + 16).
  auto big = sequence_hashes(ids(1000, 16));
  RouteDecision other = router.route(3, {big, 16 * 512});
  EXPECT_EQ(other.worker, 1);
  EXPECT_DOUBLE_EQ(other.cost, 32.0);
  // Completing prefills and finishing requests returns the load.
  router.prefill_done(1);
  router.finished(1);
  router.finished(2);
  EXPECT_EQ(router.load(0).active_requests, 0);
  EXPECT_EQ(router.load(0).active_blocks, 0u);
  EXPECT_DOUBLE_EQ(router.load(0).prefill_tokens, 0.0);
}

TEST(KvPolicy, AntiBurstWeightSendsASecondCopyElsewhere) {
  Fixture f = make("preset:dgx-h100?nodes=1", 2);
  RouterConfig config;
  config.load_weight = 1.5;
  Router router(**find_policy("kv"), 2, f.time, f.transfers, config);
  auto q = sequence_hashes(ids(100, 4));
  for (int b = 0; b < 3; ++b) router.index().store(0, q[static_cast<std::size_t>(b)]);
  // Nothing active yet: Dynamo's cost, 1 + 4 = 5 on worker 0.
  RouteDecision d = router.route(1, {q, 2048});
  EXPECT_EQ(d.worker, 0);
  EXPECT_DOUBLE_EQ(d.cost, 5.0);
  // One request active on worker 0: its prefill weight is 1 + 1.5 x 1, so 2.5 x 2 prefill
  // blocks + 4 active = 9 against worker 1's 4 + 4 = 8 (Dynamo's cost, weight 0, keeps
  // worker 0 at 6: KvPolicy.IsDynamosCostExactly).
  RouteDecision again = router.route(2, {q, 2048});
  EXPECT_EQ(again.worker, 1);
  EXPECT_DOUBLE_EQ(again.cost, 8.0);
  // Finished requests weigh nothing.
  router.finished(1);
  router.finished(2);
  EXPECT_EQ(router.in_flight(), 0u);
  EXPECT_EQ(router.route(3, {q, 2048}).worker, 0);
}

TEST(KvTopo, PredictorScaleChangesTheEstimateNotTheUnscaledTransfer) {
  Fixture f = make("preset:dgx-h100?nodes=1", 2);
  RouterConfig slow;
  slow.predictor_scale = 1.4;
  Router calibrated(**find_policy("kv-topo"), 2, f.time, f.transfers);
  Router pessimistic(**find_policy("kv-topo"), 2, f.time, f.transfers, slow);
  auto q = sequence_hashes(ids(100, 4));
  RouteDecision a = calibrated.route(1, {q, 2048});
  RouteDecision b = pessimistic.route(1, {q, 2048});
  EXPECT_NEAR(b.predicted_ttft_s, 1.4 * a.predicted_ttft_s, 1e-12);
  EXPECT_NEAR(a.predicted_ttft_s, f.time.prefill_s(2048, 0), 1e-12);
}

// Eviction term. Worker 0 caches 8 blocks of the prompt but its cache (100 blocks) is full
// and a queued request will store 60 new blocks there: its LRU is expected to evict 60 of
// its 100 evictable blocks first. Worker 1's cache is empty. Both have about the same queue.
struct EvictionState {
  Router router;
  std::vector<std::uint64_t> q;
};

EvictionState eviction_state(const Fixture& f, long long cache_blocks, bool prefix_active) {
  RouterConfig config;
  config.cache_blocks = cache_blocks;
  EvictionState st{Router(**find_policy("round-robin"), 2, f.time, f.transfers, config), sequence_hashes(ids(1, 16))};
  for (int b = 0; b < 8; ++b) st.router.index().store(0, st.q[static_cast<std::size_t>(b)]);
  for (std::uint64_t b = 0; b < 92; ++b) st.router.index().store(0, 900000 + b);
  auto a = sequence_hashes(ids(10000, 60)), b = sequence_hashes(ids(20000, 61));
  st.router.route(1, {a, 60 * 512});  // worker 0: 60 blocks to store
  st.router.route(2, {b, 61 * 512});  // worker 1: 61 blocks, one more block of prefill queued
  if (prefix_active) {
    std::span<const std::uint64_t> head(st.q.data(), 8);
    st.router.route(3, {head, 8 * 512});  // worker 0: an active request holds the 8 blocks
  }
  return st;
}

TEST(KvTopo, EvictionRiskIsTheQueuedStoresOverTheEvictableBlocks) {
  Fixture f = make("preset:dgx-h100?nodes=1", 2);
  EvictionState st = eviction_state(f, 100, false);
  EXPECT_DOUBLE_EQ(st.router.eviction_risk(0), 0.6);  // (60 - 0 free) / 100 evictable
  EXPECT_DOUBLE_EQ(st.router.eviction_risk(1), 0.0);  // 61 fit in its 100 free blocks
  EvictionState pinned = eviction_state(f, 100, true);
  // The 8 blocks the active request holds are not evictable: 60 / 92.
  EXPECT_DOUBLE_EQ(pinned.router.eviction_risk(0), 60.0 / 92.0);
  st.router.prefill_done(1);  // the queued request has stored its blocks
  EXPECT_DOUBLE_EQ(st.router.eviction_risk(0), 0.0);
  EXPECT_DOUBLE_EQ(eviction_state(f, 0, false).router.eviction_risk(0), 0.0);  // no cache size: no term
}

TEST(KvTopo, DoesNotChaseAPrefixAboutToBeEvicted) {
  Fixture f = make("preset:dgx-h100?nodes=1", 2);
  const PolicyEntry& topo = **find_policy("kv-topo");
  // Without the term worker 0's 8 cached blocks win: its queue is a block shorter.
  EvictionState blind = eviction_state(f, 0, false);
  RouteDecision chase = topo.choose(blind.router, {blind.q, 16 * 512});
  EXPECT_EQ(chase.worker, 0);
  EXPECT_EQ(chase.pull_from, -1);
  // With it, 0.6 of those blocks are expected gone before the request runs there: worker 1
  // pulls the 8 blocks now (they land in its free cache) and computes the other 8.
  EvictionState st = eviction_state(f, 100, false);
  RouteDecision d = topo.choose(st.router, {st.q, 16 * 512});
  EXPECT_EQ(d.worker, 1);
  EXPECT_EQ(d.pull_from, 0);
  EXPECT_EQ(d.pull_blocks, 8);
  double expect = std::max(st.router.load(1).prefill_seconds, f.transfers.at(0, 1).seconds(8)) + f.time.prefill_s(8 * 512, 8 * 512);
  EXPECT_NEAR(d.predicted_ttft_s, expect, 1e-12);
  // Worker 0's estimate with the term: its queue, then 8 - 0.6 x 8 = 3.2 blocks cached.
  EXPECT_GT(st.router.load(0).prefill_seconds + f.time.prefill_s(16 * 512 - 3.2 * 512, 3.2 * 512), d.predicted_ttft_s);
  // Blocks an active request holds cannot be evicted: worker 0 keeps the request.
  EvictionState held = eviction_state(f, 100, true);
  RouteDecision keep = topo.choose(held.router, {held.q, 16 * 512});
  EXPECT_EQ(keep.worker, 0);
  EXPECT_EQ(keep.local_overlap, 8);
}

// LRU order: a prefix the router saw used recently on the worker sits behind the older
// blocks, so the same 60 queued stores do not reach it.
TEST(KvTopo, ARecentlyUsedPrefixOutlivesTheEvictions) {
  Fixture f = make("preset:dgx-h100?nodes=1", 2);
  RouterConfig config;
  config.cache_blocks = 100;
  Router router(**find_policy("round-robin"), 2, f.time, f.transfers, config);
  auto q = sequence_hashes(ids(1, 16));
  std::span<const std::uint64_t> head(q.data(), 8);
  for (std::uint64_t b = 0; b < 92; ++b) router.index().store(0, 900000 + b);
  router.route(3, {head, 8 * 512});  // worker 0 computes the 8 blocks ...
  for (int b = 0; b < 8; ++b) router.index().store(0, q[static_cast<std::size_t>(b)]);
  router.finished(3);  // ... and they end most recently used there
  router.route(4, {sequence_hashes(ids(30000, 1)), 512});  // worker 1
  auto a = sequence_hashes(ids(10000, 60)), b = sequence_hashes(ids(20000, 61));
  router.route(1, {a, 60 * 512});  // worker 0: 60 blocks to store
  router.route(2, {b, 61 * 512});  // worker 1
  EXPECT_DOUBLE_EQ(router.eviction_risk(0), 0.6);  // 60 of 100 evictable blocks go ...
  EXPECT_DOUBLE_EQ(router.keep_share(0, q[7]), 1.0);  // ... the 92 older ones first
  EXPECT_DOUBLE_EQ(router.keep_share(0, 900000), 0.4);  // never stamped: the uniform share
  RouteDecision d = (*find_policy("kv-topo"))->choose(router, {q, 16 * 512});
  EXPECT_EQ(d.worker, 0);
  EXPECT_EQ(d.pull_from, -1);
}

// kv-topo's pulls are priced in kv's cost and must also bring the first token earlier than
// kv's own choice. Worker 0 caches 8 of the prompt's 9 blocks and decodes one 40-block
// request; worker 1 decodes five 1-block requests. kv keeps the prompt on worker 0 (its
// prefill weight 2 x 1 block + 49 decode blocks = 51, against 6 x 9 + 14 = 68 computing on
// worker 1). Pulling the 8 blocks to worker 1 would cost less in kv's unit (6 x 1 + 14 plus
// the transfer's wait) only by evening out decode blocks: its first token would come later
// than worker 0's (no queue there), so kv-topo does not copy the prefix.
TEST(KvTopo, DoesNotPullOnlyToEvenOutDecodeBlocks) {
  Fixture f = make("preset:dgx-h100?nodes=1", 2);
  RouterConfig config;
  config.load_weight = 1;
  Router router(**find_policy("round-robin"), 2, f.time, f.transfers, config);
  router.route(1, {sequence_hashes(ids(5000, 40)), 40 * 512});  // worker 0
  router.prefill_done(1);
  for (std::uint64_t id = 2; id <= 10; ++id) {
    router.route(id, {sequence_hashes(ids(6000 + 10 * id, 1)), 512});  // workers 1, 0, 1, 0, ...
    router.prefill_done(id);
    if (id % 2 == 1) router.finished(id);  // those on worker 0
  }
  ASSERT_EQ(router.load(0).active_requests, 1);
  ASSERT_EQ(router.load(1).active_requests, 5);
  auto q = sequence_hashes(ids(1, 9));
  for (int b = 0; b < 8; ++b) router.index().store(0, q[static_cast<std::size_t>(b)]);
  RouteQuery query{q, 9 * 512};
  RouteDecision kv = (*find_policy("kv"))->choose(router, query);
  EXPECT_EQ(kv.worker, 0);
  EXPECT_DOUBLE_EQ(kv.cost, 51.0);
  RouteDecision topo = (*find_policy("kv-topo"))->choose(router, query);
  EXPECT_EQ(topo.worker, 0);
  EXPECT_EQ(topo.pull_from, -1);
  EXPECT_DOUBLE_EQ(topo.cost, kv.cost);
  EXPECT_NEAR(topo.predicted_ttft_s, f.time.prefill_s(512, 8 * 512), 1e-12);
  // The pull's cost in kv's unit is lower; its first token is not earlier.
  EXPECT_LT(6.0 * 1 + 14 + 1, kv.cost);
  EXPECT_GT(f.transfers.at(0, 1).seconds(8), 0.0);
}

// Router::cache_wait_s: the blocks over the cache, released at the rate the worker has
// released blocks over the last kReleaseWindowS (exponentially weighted); 0 without a clock.
TEST(KvTopo, CacheWaitIsTheExcessOverTheMeasuredReleaseRate) {
  Fixture f = make("preset:dgx-h100?nodes=1", 1);
  RouterConfig config;
  config.cache_blocks = 10;
  Router router(**find_policy("round-robin"), 1, f.time, f.transfers, config);
  router.route(1, {sequence_hashes(ids(100, 8)), 8 * 512, 0.0});
  EXPECT_EQ(router.cache_wait_s(0, 16), 0.0);  // nothing released yet: no rate to go by
  router.finished(1);
  router.route(2, {sequence_hashes(ids(200, 12)), 12 * 512, 0.0});
  EXPECT_EQ(router.load(0).active_blocks, 12u);
  // 8 blocks released within the window: 8 / 30 s; 16 blocks are 6 over the cache.
  EXPECT_NEAR(router.cache_wait_s(0, 16), 6.0 / (8.0 / Router::kReleaseWindowS), 1e-9);
  EXPECT_EQ(router.cache_wait_s(0, 10), 0.0);
  // One window later the rate has decayed by e.
  router.route(3, {sequence_hashes(ids(300, 1)), 512, Router::kReleaseWindowS});
  EXPECT_NEAR(router.cache_wait_s(0, 16), 6.0 / (8.0 / Router::kReleaseWindowS) * std::exp(1.0), 1e-9);

  Router clockless(**find_policy("round-robin"), 1, f.time, f.transfers, config);
  clockless.route(1, {sequence_hashes(ids(100, 8)), 8 * 512});
  clockless.finished(1);
  clockless.route(2, {sequence_hashes(ids(200, 12)), 12 * 512});
  EXPECT_EQ(clockless.cache_wait_s(0, 16), 0.0);
}

// The state of DoesNotPullOnlyToEvenOutDecodeBlocks, with worker 1 holding a queued prompt
// and worker 0, kv's choice, one block past a cache of 48 (it has released 8,004 blocks, so
// its wait for room is short, below worker 1's queue). Pulling the 8 cached blocks to
// worker 1 lowers kv's cost but gives a later first token; with kv's choice full, the cost
// decides: computing the prompt there would hold up the requests waiting for room.
TEST(KvTopo, PullsPastAFullCacheEvenIfItsFirstTokenIsLater) {
  Fixture f = make("preset:dgx-h100?nodes=1", 2);
  auto build = [&](bool clock) {
    RouterConfig config;
    config.load_weight = 1;
    config.cache_blocks = 48;
    const double now = clock ? 0.0 : -1.0;
    Router router(**find_policy("round-robin"), 2, f.time, f.transfers, config);
    router.route(1, {sequence_hashes(ids(5000, 40)), 40 * 512, now});  // worker 0
    router.prefill_done(1);
    for (std::uint64_t id = 2; id <= 10; ++id) {
      router.route(id, {sequence_hashes(ids(6000 + 10 * id, 1)), 512, now});  // workers 1, 0, 1, 0, ...
      router.prefill_done(id);
      if (id % 2 == 1) router.finished(id);  // those on worker 0
    }
    router.route(11, {sequence_hashes(ids(10000, 8000)), 8000 * 512, now});  // worker 0
    router.finished(11);
    router.route(12, {sequence_hashes(ids(7000, 1)), 512, now});  // worker 1, queued
    return router;
  };
  auto q = sequence_hashes(ids(1, 9));
  RouteQuery query{q, 9 * 512};
  for (bool clock : {false, true}) {
    Router router = build(clock);
    for (int b = 0; b < 8; ++b) router.index().store(0, q[static_cast<std::size_t>(b)]);
    ASSERT_EQ(router.load(0).active_blocks, 40u);
    RouteDecision kv = (*find_policy("kv"))->choose(router, query);
    ASSERT_EQ(kv.worker, 0);
    RouteDecision topo = (*find_policy("kv-topo"))->choose(router, query);
    if (!clock) {
      EXPECT_EQ(router.cache_wait_s(0, 49), 0.0);
      EXPECT_EQ(topo.worker, 0);
      EXPECT_EQ(topo.pull_from, -1);
      continue;
    }
    const double wait0 = router.cache_wait_s(0, 49);
    EXPECT_NEAR(wait0, 1.0 / (8004.0 / Router::kReleaseWindowS), 1e-9);
    ASSERT_LT(wait0, router.load(1).prefill_seconds);
    EXPECT_EQ(topo.worker, 1);
    EXPECT_EQ(topo.pull_from, 0);
    EXPECT_EQ(topo.pull_blocks, 8);
    EXPECT_LT(topo.cost, kv.cost);
    // Its first token is later than computing on worker 0 after the wait for room.
    EXPECT_GT(topo.predicted_ttft_s, wait0 + f.time.prefill_s(512, 8 * 512));
  }
}

TEST(RoundRobinAndLeastLoaded, CycleAndBalance) {
  Fixture f = make("preset:dgx-h100?nodes=1", 3);
  Router rr(**find_policy("round-robin"), 3, f.time, f.transfers);
  auto q = sequence_hashes(ids(1, 2));
  EXPECT_EQ(rr.route(1, {q, 1000}).worker, 0);
  EXPECT_EQ(rr.route(2, {q, 1000}).worker, 1);
  EXPECT_EQ(rr.route(3, {q, 1000}).worker, 2);
  EXPECT_EQ(rr.route(4, {q, 1000}).worker, 0);
  Router ll(**find_policy("least-loaded"), 3, f.time, f.transfers);
  EXPECT_EQ(ll.route(1, {q, 1000}).worker, 0);
  EXPECT_EQ(ll.route(2, {q, 1000}).worker, 1);
  ll.finished(1);
  EXPECT_EQ(ll.route(3, {q, 1000}).worker, 0);
  EXPECT_FALSE(find_policy("kv-magic"));
}

// Worker 0 holds a 20-block prefix but has a long prefill queued. kv-topo sends the request
// to worker 2 on the same node and pulls the prefix over NVLink; the topology-blind variant
// prices every pull as NVLink and picks worker 1 across 25 GbE.
TEST(KvTopo, PullsOverNvlinkNotOverSlowEthernet) {
  Fixture f = make(std::string(TOPOSCHED_SOURCE_DIR) + "/examples/h100-2n-25gbe.yaml", 4);
  Router router(**find_policy("round-robin"), 4, f.time, f.transfers);
  auto busy = sequence_hashes(ids(5000, 100));
  router.route(1, {busy, 100 * 512});  // worker 0
  for (std::uint64_t r = 2; r <= 4; ++r) {
    auto small = sequence_hashes(ids(6000 + 10 * r, 1));
    router.route(r, {small, 512});  // workers 1, 2, 3
  }
  auto q = sequence_hashes(ids(1, 21));
  for (int b = 0; b < 20; ++b) router.index().store(0, q[static_cast<std::size_t>(b)]);
  RouteQuery query{q, 21 * 512};

  RouteDecision topo = (*find_policy("kv-topo"))->choose(router, query);
  EXPECT_EQ(topo.worker, 2);
  EXPECT_EQ(topo.pull_from, 0);
  EXPECT_EQ(topo.pull_blocks, 20);
  EXPECT_EQ(f.transfers.level_at(0, 2), "nvlink");
  // Its estimate: worker 2's queue, then the pull (overlapped), then one block of prefill.
  double queue = router.load(2).prefill_seconds;
  double expect = std::max(queue, f.transfers.at(0, 2).seconds(20)) + f.time.prefill_s(512, 20 * 512);
  EXPECT_NEAR(topo.predicted_ttft_s, expect, 1e-12);

  RouteDecision blind = (*find_policy("kv-pull-blind"))->choose(router, query);
  EXPECT_EQ(blind.worker, 1);
  EXPECT_EQ(blind.pull_from, 0);
  EXPECT_EQ(f.transfers.level_at(0, 1), "tier:tor");
  // The real cost of blind's choice is far above kv-topo's estimate.
  EXPECT_GT(f.transfers.at(0, 1).seconds(20), 10 * topo.predicted_ttft_s);

  RouteDecision kv = (*find_policy("kv"))->choose(router, query);
  EXPECT_EQ(kv.worker, 1);
  EXPECT_EQ(kv.pull_from, -1);
}

// Host tiers (Router::host_index): kv-topo takes a worker whose host memory holds the
// prompt's prefix, at its PCIe load, where that beats computing it on kv's choice; it does
// not leave a worker that holds the prefix in GPU memory for another's host copy; kv does not
// see host tiers.
TEST(KvTopo, LoadsAHostTierPrefixWhereThatBeatsComputing) {
  Fixture f = make("preset:dgx-h100?nodes=2", 2);  // one worker per node
  const double load_s = f.time.model().kv_bytes_per_token() * 512 / (f.cluster.node_type(f.workers[1].node).pcie_GBps * 1e9);
  Router router(**find_policy("round-robin"), 2, f.time, f.transfers);
  router.route(1, {sequence_hashes(ids(6000, 1)), 512});  // worker 0: one active request
  router.route(2, {sequence_hashes(ids(6100, 1)), 512});  // worker 1: one
  router.route(3, {sequence_hashes(ids(6200, 1)), 512});  // worker 0: two, so kv prefers 1
  auto q = sequence_hashes(ids(1, 9));
  for (int b = 0; b < 8; ++b) router.host_index().store(0, q[static_cast<std::size_t>(b)]);
  RouteQuery query{q, 9 * 512};
  // Without a load rate there is no host tier: kv-topo is kv.
  RouteDecision kv = (*find_policy("kv"))->choose(router, query);
  EXPECT_EQ(kv.worker, 1);
  EXPECT_EQ((*find_policy("kv-topo"))->choose(router, query).worker, 1);
  router.set_host_load_s_per_block({load_s, load_s});
  RouteDecision topo = (*find_policy("kv-topo"))->choose(router, query);
  EXPECT_EQ(topo.worker, 0);
  EXPECT_EQ(topo.host_blocks, 8);
  EXPECT_EQ(topo.pull_from, -1);
  EXPECT_LT(8 * load_s, f.time.prefill_s(8 * 512, 0) / 10);  // PCIe is far faster than computing
  EXPECT_NEAR(topo.predicted_ttft_s, router.load(0).prefill_seconds + 8 * load_s + f.time.prefill_s(512, 8 * 512), 1e-12);
  EXPECT_EQ((*find_policy("kv"))->choose(router, query).worker, 1);
  // Worker 1 holding the prefix in GPU memory stays the choice over worker 0's host copy.
  for (int b = 0; b < 8; ++b) router.index().store(1, q[static_cast<std::size_t>(b)]);
  RouteDecision held = (*find_policy("kv-topo"))->choose(router, query);
  EXPECT_EQ(held.worker, 1);
  EXPECT_EQ(held.host_blocks, 0);
}

TEST(TimeModel, RooflineFromDataSheets) {
  TimeModel t(*find_model("llama3-8b"), *find_gpu_spec("NVIDIA H100 80GB HBM3"), 1);
  const double overhead = Efficiency{}.step_overhead_s;
  EXPECT_DOUBLE_EQ(overhead, 0.001);
  // Llama 3 8B KV: 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 128 KiB per token.
  EXPECT_DOUBLE_EQ(t.model().kv_bytes_per_token(), 131072.0);
  // Embedding tables: 128,256 x 4,096 each (input and LM head, untied).
  const double table = 128256.0 * 4096;
  EXPECT_DOUBLE_EQ(t.model().per_token_params(), 8.03e9 - 2 * table);
  // One decode step at batch 1 reads the weights but the input embedding (a lookup) at 60%
  // of 3.35 TB/s: ~7.7 ms, plus the step overhead.
  double step = t.iteration_s(0, 0, 0, 1, 1000);
  EXPECT_NEAR(step, overhead + ((8.03e9 - table) * 2 + 131072.0 * 1001) / (3.35e12 * 0.6), 1e-9);
  // A 4096-token prefill is compute bound: 2 per non-embedding parameter per token, the LM
  // head once (one sequence samples), causal attention QK^T and AV (4 n_layer d_attn per
  // earlier position) at 50% of 989 TF.
  double attn = 4.0 * 32 * (32 * 128) * (4096.0 * 4095 / 2);
  double flops = 2 * (8.03e9 - 2 * table) * 4096 + 2 * table + attn;
  EXPECT_NEAR(t.prefill_s(4096, 0), overhead + flops / (989e12 * 0.5), 1e-9);
  // Against the earlier count (2N per token with the embedding tables, QK^T only): long
  // prompts are slower (attention doubled), short ones faster (fewer parameters per token).
  auto earlier = [](double n) { return (2 * 8.03e9 * n + 2.0 * 32 * 4096 * (n * (n - 1) / 2)) / (989e12 * 0.5); };
  EXPECT_GT(t.prefill_s(32768, 0) - overhead, 1.05 * earlier(32768));
  EXPECT_LT(t.prefill_s(512, 0) - overhead, 0.9 * earlier(512));
  // H200 decodes faster (4.8 TB/s); TP 2 halves the per-GPU work (not the overhead).
  TimeModel h200(*find_model("llama3-8b"), *find_gpu_spec("H200"), 1);
  EXPECT_LT(h200.iteration_s(0, 0, 0, 1, 1000), step);
  TimeModel tp2(*find_model("llama3-8b"), *find_gpu_spec("H100"), 2);
  EXPECT_NEAR(tp2.iteration_s(0, 0, 0, 1, 1000) - overhead, (step - overhead) / 2, 1e-12);
  EXPECT_FALSE(find_gpu_spec("L40S"));
  EXPECT_FALSE(find_model("gpt-5"));
  // KV capacity: 90% of 80 GB less 16 GB weights, in tokens.
  EXPECT_NEAR(t.kv_capacity_tokens(), (72e9 - 16.06e9) / 131072.0, 1);
}

TEST(TimeModel, UnloadedTtftIsTheChunkedPrefillAlone) {
  TimeModel t(*find_model("llama3-8b"), *find_gpu_spec("H100"), 1);
  // 10,000 tokens in chunks of 8,192: two iterations, the second after 8,192 cached.
  EXPECT_NEAR(unloaded_ttft_s(t, 10000, 8192), t.prefill_s(8192, 0) + t.prefill_s(1808, 8192), 1e-12);
  EXPECT_NEAR(unloaded_ttft_s(t, 100, 8192), t.prefill_s(100, 0), 1e-12);
}

TEST(Oracle, OneLruOfTheClusterCache) {
  RequestTrace trace;
  std::vector<std::vector<std::uint64_t>> hashes;
  // Prompts A B, A C, D, A B (each block one 512-token block).
  for (auto ids : std::vector<std::vector<std::uint64_t>>{{1, 2}, {1, 3}, {4}, {1, 2}}) {
    trace.requests.push_back({0, static_cast<int>(ids.size()) * 512, 10, ids});
    hashes.push_back(sequence_hashes(ids));
  }
  // Unlimited: hits A, nothing, A B = 3 of 7 blocks.
  EXPECT_NEAR(oracle_token_hit_rate(trace, hashes, -1, 512), 3.0 / 7, 1e-12);
  // Two blocks: after D, only D and A remain (A outlives its tails): the last prompt hits A.
  EXPECT_NEAR(oracle_token_hit_rate(trace, hashes, 2, 512), 2.0 / 7, 1e-12);
}

}  // namespace
}  // namespace toposched::router
