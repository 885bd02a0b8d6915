// The event engine with simple stand-ins for a placement policy and the cost model, on a
// small preset cluster: queue disciplines, never-fitting jobs, contention, utilisation,
// determinism. backend_test.cc runs it on the real placement engine and cost model.
#include <gtest/gtest.h>

#include <map>

#include "sim/engine.h"
#include "sim/metrics.h"
#include "sim/power.h"
#include "formats/native_spec.h"
#include "topology/presets.h"

namespace toposched::sim {
namespace {

// Lowest free GPU ids first; refuses jobs listed in `refuse`.
class LowestFreePlacer : public Placer {
 public:
  explicit LowestFreePlacer(const Cluster& c) : owner_(c.gpu_count(), -1) {}
  Result<std::vector<GpuId>> place(const SimJob& job, std::uint32_t idx) override {
    if (refuse.count(job.id)) return make_error(ErrorCode::kValidation, "refused by the test policy");
    std::vector<GpuId> out;
    for (std::size_t g = 0; g < owner_.size() && static_cast<int>(out.size()) < job.gpus; ++g)
      if (owner_[g] < 0) out.push_back(GpuId(static_cast<std::uint32_t>(g)));
    if (static_cast<int>(out.size()) < job.gpus) return make_error(ErrorCode::kInfeasible, "not enough free GPUs");
    for (GpuId g : out) owner_[g.index()] = static_cast<int>(idx);
    return out;
  }
  void release(std::uint32_t idx) override {
    for (int& o : owner_)
      if (o == static_cast<int>(idx)) o = -1;
  }
  double fragmentation() const override { return 0; }
  std::map<std::string, int> refuse;

 private:
  std::vector<int> owner_;
};

// Slowdown 1 + 0.5 per extra node; every multi-node job loads uplink 0 (capacity 1).
class NodeCountComm : public CommModel {
 public:
  explicit NodeCountComm(const Cluster& c, double share = 0) : c_(c), share_(share) {}
  CommEstimate estimate(const SimJob&, std::span<const GpuId> gpus) const override {
    std::vector<std::uint32_t> nodes;
    for (GpuId g : gpus) nodes.push_back(c_.gpu_node(g).value);
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    CommEstimate e;
    e.slowdown = 1.0 + 0.5 * static_cast<double>(nodes.size() - 1);
    e.network_share = share_;
    if (nodes.size() > 1) e.uplinks.push_back({0, 1.0});
    return e;
  }
  double uplink_capacity(std::uint32_t) const override { return 1.0; }
  std::size_t uplink_count() const override { return 1; }

 private:
  const Cluster& c_;
  double share_;
};

Cluster cluster(int nodes) {
  auto c = build_preset("dgx-h100?nodes=" + std::to_string(nodes) + "&su_size=2");
  EXPECT_TRUE(c) << c.error().to_string();
  return std::move(*c);
}

SimJob job(std::string id, double submit, int gpus, double duration, int priority = 0, double estimate = -1) {
  SimJob j;
  j.id = std::move(id);
  j.submit_s = submit;
  j.gpus = gpus;
  j.duration_s = duration;
  j.priority = priority;
  j.estimate_s = estimate;
  return j;
}

SimulationResult run(const Cluster& c, const Trace& t, Discipline d, double share = 0, LowestFreePlacer* placer = nullptr) {
  LowestFreePlacer own(c);
  NodeCountComm comm(c, share);
  EngineOptions o;
  o.discipline = d;
  auto r = run_simulation(c, t, placer ? *placer : own, comm, o, "test");
  EXPECT_TRUE(r) << r.error().to_string();
  return std::move(*r);
}

TEST(Engine, FifoRunsInOrderAndBlocksBehindTheHead) {
  Cluster c = cluster(2);  // 16 GPUs
  Trace t;
  t.jobs = {job("a", 0, 8, 100), job("b", 10, 16, 100), job("c", 20, 8, 10)};
  auto r = run(c, t, Discipline::kFifo);
  EXPECT_DOUBLE_EQ(r.jobs[0].start_s, 0);
  EXPECT_DOUBLE_EQ(r.jobs[0].end_s, 100);
  EXPECT_DOUBLE_EQ(r.jobs[1].start_s, 100);  // waits for a
  EXPECT_DOUBLE_EQ(r.jobs[2].start_s, 100 + 100 * 1.5);  // b spans 2 nodes: 1.5x; c waits behind b
  EXPECT_DOUBLE_EQ(r.jobs[1].slowdown, 1.5);
}

TEST(Engine, EasyBackfillStartsShortJobsThatDoNotDelayTheHead) {
  Cluster c = cluster(2);
  Trace t;
  // a holds 8 GPUs until 100; b (16) must wait for it; c (8 GPUs, 50 s) fits in the hole
  // and ends before b's reservation; d (8 GPUs, 500 s) would delay b and must wait.
  t.jobs = {job("a", 0, 8, 100, 0, 100), job("b", 10, 16, 100, 0, 100), job("c", 20, 8, 50, 0, 50), job("d", 30, 8, 500, 0, 500)};
  auto fifo = run(c, t, Discipline::kFifo);
  auto bf = run(c, t, Discipline::kEasyBackfill);
  EXPECT_DOUBLE_EQ(fifo.jobs[2].start_s, 250);
  EXPECT_DOUBLE_EQ(bf.jobs[2].start_s, 20);
  EXPECT_DOUBLE_EQ(bf.jobs[1].start_s, 100);  // the head is not delayed
  EXPECT_GE(bf.jobs[3].start_s, bf.jobs[1].end_s);
  auto sf = summarize(t, fifo), sb = summarize(t, bf);
  EXPECT_LT(sb.jct_mean_s, sf.jct_mean_s);
}

// Fragmentation is a state, so its mean is over time: a short burst of high fragmentation
// weighs by how long it lasted, not by how many events happened meanwhile.
TEST(Engine, FragmentationMeanIsWeightedByTime) {
  class ShortJobFragments : public LowestFreePlacer {
   public:
    using LowestFreePlacer::LowestFreePlacer;
    Result<std::vector<GpuId>> place(const SimJob& job, std::uint32_t idx) override {
      auto got = LowestFreePlacer::place(job, idx);
      if (got && job.id == "short") short_index_ = static_cast<int>(idx);
      return got;
    }
    void release(std::uint32_t idx) override {
      LowestFreePlacer::release(idx);
      if (static_cast<int>(idx) == short_index_) short_index_ = -1;
    }
    double fragmentation() const override { return short_index_ >= 0 ? 1.0 : 0.0; }

   private:
    int short_index_ = -1;
  };
  Cluster c = cluster(1);
  Trace t;
  t.jobs = {job("short", 0, 1, 10), job("long", 0, 1, 1000)};
  ShortJobFragments placer(c);
  NodeCountComm comm(c);
  EngineOptions o;
  auto r = run_simulation(c, t, placer, comm, o, "test");
  ASSERT_TRUE(r) << r.error().to_string();
  // 1 for the first 10 s of 1,000, then 0: an event-count mean would say about 0.5.
  EXPECT_NEAR(r->fragmentation_mean, 0.01, 1e-9);
}

TEST(Engine, PriorityOrdersTheQueue) {
  Cluster c = cluster(1);  // 8 GPUs
  Trace t;
  t.jobs = {job("running", 0, 8, 100), job("low", 1, 8, 10, 0), job("high", 2, 8, 10, 5)};
  auto fifo = run(c, t, Discipline::kFifo);
  auto prio = run(c, t, Discipline::kPriority);
  EXPECT_LT(fifo.jobs[1].start_s, fifo.jobs[2].start_s);
  EXPECT_LT(prio.jobs[2].start_s, prio.jobs[1].start_s);
  EXPECT_DOUBLE_EQ(prio.jobs[2].start_s, 100);
}

TEST(Engine, NeverFittingJobsAreReportedNotLoopedOn) {
  Cluster c = cluster(1);
  Trace t;
  t.jobs = {job("huge", 0, 64, 10), job("refused", 1, 2, 10), job("ok", 2, 4, 10)};
  LowestFreePlacer p(c);
  p.refuse["refused"] = 1;
  auto r = run(c, t, Discipline::kFifo, 0, &p);
  EXPECT_FALSE(r.jobs[0].placed);
  EXPECT_NE(r.jobs[0].never_placed_reason.find("64 GPUs"), std::string::npos);
  EXPECT_FALSE(r.jobs[1].placed);
  EXPECT_NE(r.jobs[1].never_placed_reason.find("refused"), std::string::npos);
  EXPECT_TRUE(r.jobs[2].placed);
  EXPECT_DOUBLE_EQ(r.jobs[2].start_s, 2);
  auto s = summarize(t, r);
  EXPECT_EQ(s.never_placed, 2u);
  EXPECT_EQ(s.jobs, 1u);
}

TEST(Engine, ContentionSlowsJobsSharingAnUplinkAndIsRecomputed) {
  Cluster c = cluster(4);  // 32 GPUs
  Trace t;
  // Two 2-node jobs share uplink 0 (capacity 1, demand 2 -> contention 2) while both run.
  t.jobs = {job("a", 0, 16, 100), job("b", 0, 16, 1000)};
  auto r = run(c, t, Discipline::kFifo, /*share=*/0.5);
  // Rate while both run: 1 / (1.5 * (1 + 0.5 * (2 - 1))) = 1/2.25; a needs 100 s of work.
  EXPECT_NEAR(r.jobs[0].end_s, 225, 1e-9);
  // b did 100 s of work by t=225, then runs alone at 1/1.5: 900 * 1.5 = 1350 s more.
  EXPECT_NEAR(r.jobs[1].end_s, 225 + 1350, 1e-6);
  auto alone = run(c, t, Discipline::kFifo, /*share=*/0.0);
  EXPECT_NEAR(alone.jobs[0].end_s, 150, 1e-9);
}

// Uplinks per job id, fixed by the test; slowdown 1, half of every step on the network.
class ScriptedComm : public CommModel {
 public:
  ScriptedComm(std::map<std::string, std::vector<std::uint32_t>> links, std::vector<double> capacity)
      : links_(std::move(links)), capacity_(std::move(capacity)) {}
  CommEstimate estimate(const SimJob& job, std::span<const GpuId>) const override {
    CommEstimate e;
    e.network_share = 0.5;
    for (std::uint32_t u : links_.at(job.id)) e.uplinks.push_back({u, 1.0});
    return e;
  }
  double uplink_capacity(std::uint32_t u) const override { return capacity_[u]; }
  std::size_t uplink_count() const override { return capacity_.size(); }

 private:
  std::map<std::string, std::vector<std::uint32_t>> links_;
  std::vector<double> capacity_;
};

TEST(Engine, SharedUplinksAreSharedMaxMinFairly) {
  Cluster c = cluster(1);
  Trace t;
  // a, c, d share uplink 0 (capacity 1): a third each. a and b share uplink 1 (capacity
  // 1): a uses only its third, so b gets the other two thirds, not the half a worst-link
  // proportional split would give it.
  t.jobs = {job("a", 0, 1, 1000), job("b", 0, 1, 100), job("c", 0, 1, 1000), job("d", 0, 1, 1000)};
  ScriptedComm comm({{"a", {0, 1}}, {"b", {1}}, {"c", {0}}, {"d", {0}}}, {1.0, 1.0});
  LowestFreePlacer placer(c);
  EngineOptions o;
  auto r = run_simulation(c, t, placer, comm, o, "test");
  ASSERT_TRUE(r);
  // b: rate 1 / (1 + 0.5 x (1 / (2/3) - 1)) = 0.8, 100 s of work.
  EXPECT_NEAR(r->jobs[1].end_s, 125, 1e-9);
  // a, c, d at share 1/3: rate 1 / (1 + 0.5 x 2) = 0.5 throughout (b leaving frees
  // uplink 1, which never bound them): 1000 s of work take 2000 s.
  EXPECT_NEAR(r->jobs[0].end_s, 2000, 1e-6);
  EXPECT_NEAR(r->jobs[2].end_s, 2000, 1e-6);
}

TEST(Engine, SharesAreRecomputedWhenABottleneckLeaves) {
  Cluster c = cluster(1);
  Trace t;
  // a and b share uplink 0 (capacity 1) until b ends; then a runs alone at full speed.
  t.jobs = {job("a", 0, 1, 300), job("b", 0, 1, 100)};
  ScriptedComm comm({{"a", {0}}, {"b", {0}}}, {1.0});
  LowestFreePlacer placer(c);
  EngineOptions o;
  auto r = run_simulation(c, t, placer, comm, o, "test");
  ASSERT_TRUE(r);
  // Both at share 1/2: rate 1 / 1.5. b ends at 150 having done 100 s; a has done 100 s.
  EXPECT_NEAR(r->jobs[1].end_s, 150, 1e-9);
  EXPECT_NEAR(r->jobs[0].end_s, 150 + 200, 1e-6);
}

TEST(Engine, UtilisationIsTimeWeighted) {
  Cluster c = cluster(2);  // 16 GPUs
  Trace t;
  t.jobs = {job("a", 0, 8, 100), job("b", 100, 4, 100)};
  auto r = run(c, t, Discipline::kFifo);
  auto s = summarize(t, r);
  EXPECT_DOUBLE_EQ(s.makespan_s, 200);
  // (8 x 100 + 4 x 100) / (16 x 200)
  EXPECT_DOUBLE_EQ(s.utilization, 1200.0 / 3200.0);
  EXPECT_DOUBLE_EQ(s.jct_mean_s, 100);
  EXPECT_DOUBLE_EQ(s.wait_mean_s, 0);
  EXPECT_EQ(r.timeline.size(), 400u);
  EXPECT_NEAR(r.timeline.front().busy_gpus, 8, 1e-6);
  EXPECT_NEAR(r.timeline.back().busy_gpus, 4, 1e-6);
}

// A shape-constrained stand-in: 8-GPU jobs need a whole free node (like TP=8 groups under
// `topo`); smaller jobs go to the node with the most free GPUs. It plans reservations
// (optionally) the way the real backend does: release running jobs in end order, retry.
class WholeNodePlacer : public Placer {
 public:
  WholeNodePlacer(const Cluster& c, bool plans) : c_(c), owner_(c.gpu_count(), -1), plans_(plans) {}
  Result<std::vector<GpuId>> place(const SimJob& job, std::uint32_t idx) override {
    auto got = choose(owner_, job.gpus);
    if (!got) return got;
    for (GpuId g : *got) owner_[g.index()] = static_cast<int>(idx);
    return got;
  }
  void release(std::uint32_t idx) override {
    for (int& o : owner_)
      if (o == static_cast<int>(idx)) o = -1;
  }
  double fragmentation() const override { return 0; }
  bool plans_reservations() const override { return plans_; }
  Result<Reservation> reserve(const SimJob& job, std::uint32_t, std::span<const std::uint32_t> by_end,
                              std::size_t min_finished) override {
    std::vector<int> future = owner_;
    for (std::size_t k = 0; k <= by_end.size(); ++k) {
      if (k > 0)
        for (int& o : future)
          if (o == static_cast<int>(by_end[k - 1])) o = -1;
      if (k < min_finished) continue;
      if (auto got = choose(future, job.gpus)) {
        Reservation r{k, *got, 0};
        for (GpuId g : *got) r.gpus_free_now += owner_[g.index()] < 0 ? 1 : 0;
        return r;
      }
    }
    return make_error(ErrorCode::kInfeasible, "never fits");
  }
  Result<std::vector<GpuId>> place_around(const SimJob& job, std::uint32_t idx, std::span<const GpuId> keep,
                                          std::uint64_t) override {
    std::vector<int> saved = owner_;
    for (GpuId g : keep)
      if (owner_[g.index()] < 0) owner_[g.index()] = -2;
    auto got = choose(owner_, job.gpus);
    owner_ = saved;
    if (!got) return got;
    for (GpuId g : *got) owner_[g.index()] = static_cast<int>(idx);
    return got;
  }

 private:
  Result<std::vector<GpuId>> choose(const std::vector<int>& owner, int gpus) const {
    const int per_node = 8;
    std::vector<GpuId> out;
    int best = -1, best_free = 0;
    for (std::size_t n = 0; n < c_.node_count(); ++n) {
      int free = 0;
      for (int l = 0; l < per_node; ++l) free += owner[n * per_node + static_cast<std::size_t>(l)] == -1;
      if (gpus == per_node ? free == per_node && best < 0 : free >= gpus && free > best_free) {
        best = static_cast<int>(n);
        best_free = free;
      }
    }
    if (best < 0) return make_error(ErrorCode::kInfeasible, "no node fits");
    for (int l = 0; l < per_node && static_cast<int>(out.size()) < gpus; ++l) {
      std::size_t g = static_cast<std::size_t>(best) * per_node + static_cast<std::size_t>(l);
      if (owner[g] == -1) out.push_back(GpuId(static_cast<std::uint32_t>(g)));
    }
    return out;
  }
  const Cluster& c_;
  std::vector<int> owner_;  // job index, -1 free (-2: held for a reservation)
  bool plans_;
};

TEST(Engine, BackfillReservesWhereTheHeadCanReallyStart) {
  Cluster c = cluster(2);  // 2 nodes of 8 GPUs
  Trace t;
  // a and b take half of each node; head needs a whole node: 8 GPUs are free by count at
  // t=1 but no whole node until a ends at 100. d (ends by 100) may use the wait; e (long,
  // after d) may run, but not on node 0, which the head will take (left alone, the
  // placer would put it there: both nodes have 4 free GPUs).
  t.jobs = {job("a", 0, 4, 100, 0, 100), job("b", 0, 4, 300, 0, 300), job("head", 1, 8, 100, 0, 100),
            job("d", 2, 4, 50, 0, 50), job("e", 60, 4, 1000, 0, 1000)};
  NodeCountComm comm(c);
  EngineOptions o;
  o.discipline = Discipline::kEasyBackfill;
  WholeNodePlacer planned(c, true), counted(c, false);
  auto with = run_simulation(c, t, planned, comm, o, "planned");
  auto without = run_simulation(c, t, counted, comm, o, "counted");
  ASSERT_TRUE(with && without);
  EXPECT_DOUBLE_EQ(with->jobs[2].start_s, 100);  // the head is not delayed
  EXPECT_DOUBLE_EQ(with->jobs[3].start_s, 2);    // d fills the wait
  EXPECT_DOUBLE_EQ(with->jobs[4].start_s, 60);   // e runs beside it, off the head's node
  // Counting GPUs, the head "could start now", so nothing may backfill and the GPUs idle.
  EXPECT_DOUBLE_EQ(without->jobs[2].start_s, 100);
  EXPECT_GE(without->jobs[3].start_s, 100);
  auto sw = summarize(t, *with), so = summarize(t, *without);
  EXPECT_LT(sw.gpu_hours_idle_queued, so.gpu_hours_idle_queued);
  EXPECT_LT(sw.jct_mean_s, so.jct_mean_s);
}

TEST(Engine, GpuHoursSplitIntoUsefulLostAndIdleWhileJobsWait) {
  Cluster c = cluster(2);  // 16 GPUs
  Trace t;
  // a: 12 GPUs on 2 nodes (slowdown 1.5), 100 s of work -> holds 12 GPUs for 150 s.
  // b: 8 GPUs, arrives at 10 and waits for a (4 free GPUs idle meanwhile), runs 150..250.
  // Nothing waits after 150: 8 GPUs idle with an empty queue for 100 s.
  t.jobs = {job("a", 0, 12, 100), job("b", 10, 8, 100)};
  auto r = run(c, t, Discipline::kFifo);
  auto s = summarize(t, r);
  EXPECT_DOUBLE_EQ(r.jobs[1].start_s, 150);
  EXPECT_DOUBLE_EQ(s.makespan_s, 250);
  EXPECT_NEAR(s.gpu_hours_useful * 3600, 12 * 100 + 8 * 100, 1e-9);
  EXPECT_NEAR(s.gpu_hours_lost_comm * 3600, 12 * 50, 1e-9);
  EXPECT_NEAR(s.gpu_hours_idle_queued * 3600, 4 * 140, 1e-9);  // 10..150, 4 GPUs free
  // 0..10: 4 idle, queue empty; 150..250: 8 idle, queue empty.
  EXPECT_NEAR(s.gpu_hours_idle_no_demand * 3600, 4 * 10 + 8 * 100, 1e-9);
  // The four parts add up to the cluster's GPU time over the makespan.
  EXPECT_NEAR((s.gpu_hours_useful + s.gpu_hours_lost_comm + s.gpu_hours_idle_queued + s.gpu_hours_idle_no_demand) * 3600,
              16 * 250, 1e-6);
}

TEST(Engine, SameInputsSameResult) {
  Cluster c = cluster(4);
  Trace t;
  for (int i = 0; i < 200; ++i) t.jobs.push_back(job("j" + std::to_string(i), i * 7.0, 1 << (i % 5), 50.0 + (i * 37) % 300, i % 3));
  for (Discipline d : {Discipline::kFifo, Discipline::kEasyBackfill, Discipline::kPriority}) {
    auto a = run(c, t, d, 0.3), b = run(c, t, d, 0.3);
    for (std::size_t i = 0; i < t.jobs.size(); ++i) {
      EXPECT_EQ(a.jobs[i].start_s, b.jobs[i].start_s);
      EXPECT_EQ(a.jobs[i].end_s, b.jobs[i].end_s);
      EXPECT_TRUE(a.jobs[i].placed);
    }
  }
}

TEST(Metrics, NearestRankPercentile) {
  EXPECT_EQ(percentile({}, 50), 0);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 50), 3);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 99), 5);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 0), 1);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(percentile(v, 95), 95);
}

TEST(Engine, DisciplineNames) {
  EXPECT_EQ(*parse_discipline("easy-backfill"), Discipline::kEasyBackfill);
  EXPECT_EQ(discipline_name(Discipline::kPriority), "priority");
  EXPECT_FALSE(parse_discipline("sjf"));
}

}  // namespace
}  // namespace toposched::sim

namespace toposched::sim {
namespace {

TEST(Engine, TimelineNeverExceedsTheCluster) {
  Cluster c = cluster(4);
  Trace t;
  // Many short jobs with awkward times, so that events fall on and near bucket edges.
  for (int i = 0; i < 500; ++i) t.jobs.push_back(job("j" + std::to_string(i), i * 13.7, 1 << (i % 6), 20.0 + (i * 53) % 400));
  for (Discipline d : {Discipline::kFifo, Discipline::kEasyBackfill}) {
    auto r = run(c, t, d, 0.2);
    double integral = 0;
    double width = (r.last_end_s - r.first_submit_s) / static_cast<double>(r.timeline.size());
    for (const auto& p : r.timeline) {
      EXPECT_LE(p.busy_gpus, 32 + 1e-6);
      EXPECT_GE(p.busy_gpus, -1e-9);
      integral += p.busy_gpus * width;
    }
    EXPECT_NEAR(integral, r.busy_gpu_seconds, 1e-6 * r.busy_gpu_seconds);
  }
}

// Energy splits like the GPU-hours, each part at its state's power (H100 defaults: busy
// 700 W, comm-bound 70 + (700 - 70) / 4 = 227.5 W, idle 70 W), and the parts add up.
TEST(Engine, EnergySplitsLikeTheGpuHoursAtEachStatesPower) {
  Cluster c = cluster(2);  // 16 H100s
  Trace t;
  t.jobs = {job("a", 0, 12, 100), job("b", 10, 8, 100)};  // as in GpuHoursSplit... above
  auto s = summarize(t, run(c, t, Discipline::kFifo));
  const GpuPower h100 = default_gpu_power("H100-SXM5");
  EXPECT_DOUBLE_EQ(h100.busy_w, 700);
  EXPECT_DOUBLE_EQ(h100.comm_w, 227.5);
  EXPECT_DOUBLE_EQ(h100.idle_w, 70);
  EXPECT_NEAR(s.energy_kwh_useful * 3.6e6, (12 * 100 + 8 * 100) * 700.0, 1e-3);
  EXPECT_NEAR(s.energy_kwh_lost_comm * 3.6e6, 12 * 50 * 227.5, 1e-3);
  EXPECT_NEAR(s.energy_kwh_idle_queued * 3.6e6, 4 * 140 * 70.0, 1e-3);
  EXPECT_NEAR(s.energy_kwh_idle_no_demand * 3.6e6, (4 * 10 + 8 * 100) * 70.0, 1e-3);
  EXPECT_NEAR(s.energy_kwh, s.energy_kwh_useful + s.energy_kwh_lost_comm + s.energy_kwh_idle_queued + s.energy_kwh_idle_no_demand, 1e-12);
  EXPECT_NEAR(s.useful_gpu_hours_per_mwh, s.gpu_hours_useful / (s.energy_kwh / 1000), 1e-9);
}

// Each GPU counts at its own node type's figures: a spec's `gpu.power` override on one
// type, product defaults (A100) on the other.
TEST(Engine, EnergyUsesEachNodeTypesPower) {
  auto c = read_native_spec(R"(name: mixed
node_types:
  - name: capped-h100
    gpu: {model: H100-SXM5, count: 8, power: {busy_w: 500, comm_w: 200, idle_w: 50}}
    nvlink: {links: 18}
  - name: a100
    gpu: {model: A100-SXM4, count: 8}
    nvlink: {links: 12}
nodes:
  - {names: h1, type: capped-h100}
  - {names: a1, type: a100}
)", "mixed.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  Trace t;
  // a takes the H100 node (lowest ids) for 100 s; b the A100 node from 20 to 120 s.
  t.jobs = {job("a", 0, 8, 100), job("b", 20, 8, 100)};
  auto s = summarize(t, run(*c, t, Discipline::kFifo));
  const GpuPower a100 = default_gpu_power("A100-SXM4");
  EXPECT_NEAR(s.energy_kwh_useful * 3.6e6, 8 * 100 * 500.0 + 8 * 100 * a100.busy_w, 1e-3);
  EXPECT_DOUBLE_EQ(s.energy_kwh_lost_comm, 0);
  // Idle, queue empty: the A100s 0..20, the H100s 100..120.
  EXPECT_NEAR(s.energy_kwh_idle_no_demand * 3.6e6, 8 * 20 * a100.idle_w + 8 * 20 * 50.0, 1e-3);
}

TEST(Power, DefaultsMatchTheMoreSpecificProductFirst) {
  EXPECT_DOUBLE_EQ(default_gpu_power("NVIDIA GB200").busy_w, 1200);
  EXPECT_DOUBLE_EQ(default_gpu_power("B200").busy_w, 1000);
  EXPECT_DOUBLE_EQ(default_gpu_power("NVIDIA H100 80GB HBM3").busy_w, 700);
  EXPECT_DOUBLE_EQ(default_gpu_power("NVIDIA H100 PCIe").busy_w, 350);
  EXPECT_DOUBLE_EQ(default_gpu_power("Tesla V100-SXM2-32GB").busy_w, 300);
  EXPECT_DOUBLE_EQ(default_gpu_power("unknown-accelerator").busy_w, default_gpu_power("A100-SXM4").busy_w);
  for (const GpuPowerRow& r : gpu_power_table()) {
    EXPECT_LE(r.power.idle_w, r.power.comm_w) << r.product;
    EXPECT_LE(r.power.comm_w, r.power.busy_w) << r.product;
    EXPECT_FALSE(r.source.empty()) << r.product;
  }
}

}  // namespace
}  // namespace toposched::sim
