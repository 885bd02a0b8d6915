// reserve() probes on a probe state kept between calls (sim/placement_backend.cc,
// ReservationProbes::kKeptState): every reservation must be the one a placer that releases
// the whole prefix on a fresh copy of its live state for every probe (kFromScratch) makes,
// on any sequence of starts, ends, reservations and placements around them. And whole
// simulations must come out the same either way.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "sim/backend.h"
#include "sim/engine.h"
#include "sim/generator.h"
#include "support/preset_cluster.h"

namespace toposched::sim {
namespace {

using toposched::testing::preset;

SimJob training(int gpus, int tp) {
  SimJob j;
  j.gpus = gpus;
  j.tp = tp;
  j.kind = "llm-dense";
  return j;
}

SimJob random_job(std::mt19937_64& rng, int largest) {
  static const int kSizes[] = {1, 2, 4, 8, 16, 32, 64};
  int gpus = kSizes[rng() % 7];
  while (gpus > largest) gpus /= 2;
  return training(gpus, std::min(gpus, 8));
}

struct Counts {
  int reservations = 0;    // reserve calls that found one
  int after_ends = 0;      // ... that needed some running jobs to end
  int prefix_changes = 0;  // reserve calls whose prefix differed from the previous call's
  int placed_around = 0;
};

// One random sequence on two placers of `policy`, one per ReservationProbes mode, comparing
// every answer.
Counts compare_on_random_sequence(const Cluster& c, const std::string& policy, std::uint64_t seed, int steps) {
  auto kept = make_placer(c, policy, 1, ReservationProbes::kKeptState);
  auto scratch = make_placer(c, policy, 1, ReservationProbes::kFromScratch);
  EXPECT_TRUE(kept && scratch);
  Placer& a = **kept;
  Placer& b = **scratch;
  std::mt19937_64 rng(seed);
  const int cluster_gpus = static_cast<int>(c.gpu_count());
  std::vector<std::uint32_t> running;
  std::uint32_t next = 0;
  std::uint64_t version = 0;
  std::vector<GpuId> reserved;
  std::vector<std::uint32_t> last_prefix;
  Counts n;
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(::testing::Message() << policy << " seed " << seed << " step " << step);
    const unsigned op = static_cast<unsigned>(rng() % 10);
    if (op < 4) {  // a start
      const SimJob job = random_job(rng, cluster_gpus / 4);
      auto ga = a.place(job, next);
      auto gb = b.place(job, next);
      EXPECT_EQ(ga.has_value(), gb.has_value());
      if (ga && gb) {
        EXPECT_EQ(*ga, *gb);
        running.push_back(next);
      }
      ++next;
    } else if (op < 6 && !running.empty()) {  // an end
      const std::size_t i = rng() % running.size();
      a.release(running[i]);
      b.release(running[i]);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 8) {  // a reservation for a large job, the running jobs in a random end order
      const int gpus = std::max(8, cluster_gpus / (2 << (rng() % 3)));
      const SimJob head = training(gpus, 8);
      std::vector<std::uint32_t> by_end = running;
      std::shuffle(by_end.begin(), by_end.end(), rng);
      // Most often the previous end order with a few changes, as in a simulation.
      if (rng() % 2 == 0 && !last_prefix.empty()) {
        by_end = last_prefix;
        std::erase_if(by_end, [&](std::uint32_t j) { return std::find(running.begin(), running.end(), j) == running.end(); });
        for (std::uint32_t j : running)
          if (std::find(by_end.begin(), by_end.end(), j) == by_end.end())
            by_end.insert(by_end.begin() + static_cast<std::ptrdiff_t>(rng() % (by_end.size() + 1)), j);
      }
      const std::size_t min_finished = by_end.empty() ? 0 : rng() % (by_end.size() / 2 + 1);
      auto ra = a.reserve(head, next, by_end, min_finished);
      auto rb = b.reserve(head, next, by_end, min_finished);
      ++next;
      EXPECT_EQ(ra.has_value(), rb.has_value());
      if (by_end != last_prefix) ++n.prefix_changes;
      last_prefix = by_end;
      if (ra && rb) {
        EXPECT_EQ(ra->finished, rb->finished);
        EXPECT_EQ(ra->gpus, rb->gpus);
        EXPECT_EQ(ra->gpus_free_now, rb->gpus_free_now);
        ++n.reservations;
        n.after_ends += ra->finished > 0;
        reserved = ra->gpus;
        ++version;
      }
    } else {  // placements around the last reservation, then the end of the pass
      for (int k = 0; k < 3; ++k) {
        const SimJob job = random_job(rng, 16);
        auto ga = a.place_around(job, next, reserved, version);
        auto gb = b.place_around(job, next, reserved, version);
        EXPECT_EQ(ga.has_value(), gb.has_value());
        if (ga && gb) {
          EXPECT_EQ(*ga, *gb);
          running.push_back(next);
          ++n.placed_around;
        }
        ++next;
      }
      a.end_pass();
      b.end_pass();
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(a.fragmentation(), b.fragmentation());
  return n;
}

TEST(ReservationProbes, KeptStateAnswersAsFromScratchOnRandomSequences) {
  const Cluster dgx = preset("dgx-h100?nodes=16&su_size=4");  // 128 GPUs, four leaves
  const Cluster gb200 = preset("gb200-nvl72?racks=2");         // NVLink domains
  for (const Cluster* c : {&dgx, &gb200})
    for (const std::string& policy : placer_names()) {
      auto probe = make_placer(*c, policy, 1);
      ASSERT_TRUE(probe);
      if (!(*probe)->plans_reservations()) continue;
      for (std::uint64_t seed : {1, 2, 3}) {
        const Counts n = compare_on_random_sequence(*c, policy, seed, 300);
        // The sequences reach what the kept state must get right: reservations that need
        // running jobs to end, end orders that change between calls, starts around them.
        EXPECT_GT(n.reservations, 20) << policy;
        EXPECT_GT(n.after_ends, 5) << policy;
        EXPECT_GT(n.prefix_changes, 20) << policy;
        EXPECT_GT(n.placed_around, 5) << policy;
      }
    }
}

// Several reserve calls in a row with the same state and prefixes of different lengths:
// the kept state ends and gives back jobs between them.
TEST(ReservationProbes, LongerAndShorterPrefixesInARow) {
  const Cluster c = preset("dgx-h100?nodes=8&su_size=4");  // 64 GPUs
  auto kept = make_placer(c, "topo", 1, ReservationProbes::kKeptState);
  auto scratch = make_placer(c, "topo", 1, ReservationProbes::kFromScratch);
  ASSERT_TRUE(kept && scratch);
  std::vector<std::uint32_t> by_end;
  for (std::uint32_t j = 0; j < 16; ++j) {
    ASSERT_TRUE((*kept)->place(training(4, 4), j));
    ASSERT_TRUE((*scratch)->place(training(4, 4), j));
    by_end.push_back(15 - j);
  }
  for (int gpus : {32, 8, 64, 16, 32}) {
    SCOPED_TRACE(gpus);
    for (std::size_t min_finished : {0u, 6u, 2u, 12u}) {
      auto ra = (*kept)->reserve(training(gpus, 8), 100, by_end, min_finished);
      auto rb = (*scratch)->reserve(training(gpus, 8), 100, by_end, min_finished);
      ASSERT_TRUE(ra && rb);
      EXPECT_EQ(ra->finished, rb->finished);
      EXPECT_GE(ra->finished, min_finished);
      EXPECT_EQ(ra->gpus, rb->gpus);
    }
  }
  // The live state is untouched by all that: nothing fits, every GPU is taken.
  EXPECT_FALSE((*kept)->place(training(1, 1), 200));
  // Ends after the probes: the released job's GPUs are the only free ones, in both.
  (*kept)->release(7);
  (*scratch)->release(7);
  auto ga = (*kept)->place(training(4, 4), 201);
  auto gb = (*scratch)->place(training(4, 4), 201);
  ASSERT_TRUE(ga && gb);
  EXPECT_EQ(*ga, *gb);
}

TEST(ReservationProbes, WholeSimulationsAreTheSame) {
  const Cluster c = preset("dgx-h100?nodes=16&su_size=4");
  GeneratorParams p;
  p.seed = 11;
  p.jobs = 600;
  p.arrival_rate_per_hour = 400;  // overloaded: long queues, backfill, reservations
  p.max_gpus = 64;
  Trace trace = generate_trace(p);
  auto comm = make_comm_model(c);
  for (const std::string policy : {"topo", "slurm-tree", "kueue-bestfit", "slurm-block"}) {
    SCOPED_TRACE(policy);
    auto kept = make_placer(c, policy, 1, ReservationProbes::kKeptState);
    auto scratch = make_placer(c, policy, 1, ReservationProbes::kFromScratch);
    ASSERT_TRUE(kept && scratch);
    EngineOptions o;
    o.discipline = Discipline::kEasyBackfill;
    auto ra = run_simulation(c, trace, **kept, *comm, o, policy);
    auto rb = run_simulation(c, trace, **scratch, *comm, o, policy);
    ASSERT_TRUE(ra && rb);
    ASSERT_EQ(ra->jobs.size(), rb->jobs.size());
    int waited = 0;
    for (std::size_t j = 0; j < ra->jobs.size(); ++j) {
      EXPECT_EQ(ra->jobs[j].placed, rb->jobs[j].placed) << "job " << j;
      EXPECT_EQ(ra->jobs[j].start_s, rb->jobs[j].start_s) << "job " << j;
      EXPECT_EQ(ra->jobs[j].end_s, rb->jobs[j].end_s) << "job " << j;
      waited += ra->jobs[j].start_s > trace.jobs[j].submit_s;
    }
    EXPECT_GT(waited, 100);  // the queue was long enough for reservations to matter
    EXPECT_EQ(ra->events, rb->events);
    EXPECT_EQ(ra->busy_gpu_seconds, rb->busy_gpu_seconds);
  }
}

}  // namespace
}  // namespace toposched::sim
