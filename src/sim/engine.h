// The discrete-event simulator: replays a Trace on a Cluster under one placement policy
// and one queue discipline, and records what happened to every job.
//
// Events are arrivals, starts and finishes, processed in (time, sequence) order, so a run
// is a pure function of its inputs (and the seed the random policy gets). Jobs are
// gang-scheduled: all GPUs at once through the Placer, or the job waits. Disciplines:
//  - fifo: in submit order; the head blocks everything behind it;
//  - priority: by priority (high first), then submit order; the head blocks;
//  - easy-backfill: fifo, but later jobs may start when they do not delay the head's
//    reservation (EASY: computed from runtime estimates: the trace's estimate_s, or the
//    duration times `estimate_factor`). The reservation's time and GPUs come from the
//    Placer when it plans reservations (the policy decides when the head really fits),
//    else from counting free GPUs; jobs that would outlast it keep off its GPUs.
// Runtime: a job does `duration_s` seconds of ideal work; it progresses at rate
// 1 / (slowdown * (1 + network_share * (1 / fair_share - 1))), slowdown from the CommModel
// for its actual placement and fair_share its max-min fair share of the overloaded uplinks
// it crosses (cost/contention.h's progressive filling), recomputed for the jobs connected
// to a changed uplink whenever a job starts or finishes.
// Jobs larger than the cluster (or than the GPUs of their model), and jobs the policy
// cannot place even on an idle cluster, are reported as never placed and dropped.
// Thread-safety: run_simulation only reads its inputs; run several at once on one Cluster.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/backend.h"
#include "sim/trace.h"
#include "topology/cluster.h"
#include "topology/registry.h"

namespace toposched::sim {

enum class Discipline { kFifo, kEasyBackfill, kPriority };
// fifo, easy-backfill (alias backfill), priority; find's error names them.
const Registry<Discipline>& disciplines();
Result<Discipline> parse_discipline(std::string_view name);
std::string_view discipline_name(Discipline d);

struct EngineOptions {
  Discipline discipline = Discipline::kFifo;
  double estimate_factor = 1.0;   // estimate = duration * factor when the trace has none
  int backfill_depth = 256;       // queued jobs looked at per backfill pass
  std::uint64_t seed = 1;
  std::size_t timeline_points = 400;  // samples kept for the report's time series
  // Called now and then with the fraction of jobs done (0..1); may be empty.
  std::function<void(double)> progress;
};

struct JobOutcome {
  bool placed = false;
  std::string never_placed_reason;
  double start_s = 0, end_s = 0;
  double slowdown = 1;     // runtime / ideal duration (placement and contention)
  double placement_slowdown = 1;  // from the placement alone
  int nodes = 0;           // distinct nodes it ran on
  // Power of its GPUs, summed (sim/power.h): computing, and stalled on communication.
  double busy_w = 0, comm_w = 0;
  StepBreakdown step;  // its step on its GPUs (bubble, communication per kind), alone
};

struct TimelinePoint {
  double t = 0;
  double busy_gpus = 0;    // time-weighted mean over the interval ending at t
  double queued_jobs = 0;  // idem
  double fragmentation = 0;
};

struct SimulationResult {
  std::string policy;
  std::vector<JobOutcome> jobs;  // parallel to Trace::jobs
  std::vector<TimelinePoint> timeline;
  double first_submit_s = 0, last_end_s = 0;
  double busy_gpu_seconds = 0;   // integral of busy GPUs over [first_submit, last_end]
  // Integral of idle GPUs over the times at least one job waited in the queue: capacity the
  // scheduler left unused while there was work (EASY reservations, jobs that fit by count
  // but not by shape, head-of-line blocking).
  double idle_gpu_seconds_queued = 0;
  // Energy (J) of the idle GPUs at their idle power, split like the idle GPU-seconds:
  // while some job waited, and with an empty queue.
  double idle_energy_j_queued = 0, idle_energy_j_no_demand = 0;
  std::size_t cluster_gpus = 0;
  std::size_t events = 0;
  double fragmentation_mean = 0;  // over time: each sample holds until the next
};

Result<SimulationResult> run_simulation(const Cluster& cluster, const Trace& trace, Placer& placer,
                                        const CommModel& comm, const EngineOptions& options, std::string policy_name);

}  // namespace toposched::sim
