// Per-policy figures of a simulation run: job completion time (JCT = end - submit) and
// waiting time (start - submit) statistics over the jobs that ran, makespan (last end -
// first submit), time-weighted GPU utilisation (busy GPU-seconds / (GPUs x makespan)),
// useful utilisation (ideal GPU-seconds of the jobs / (GPUs x makespan)), communication
// slowdown (runtime / ideal duration) statistics, GPU-hours lost to
// communication (sum of GPUs x (runtime - ideal)), mean fragmentation, jobs never placed,
// and where the cluster's GPU-hours went over the makespan: useful (ideal work) + lost to
// communication + idle while jobs waited + idle with nothing waiting = GPUs x makespan.
// Energy (kWh) splits the same way, each part at its state's GPU power (sim/power.h): the
// jobs' ideal work at busy power, the time communication added at communication-bound
// power, idle GPUs at idle power; the parts sum to energy_kwh.
// Percentiles are nearest-rank on sorted values, so the figures are exact functions of the
// result. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/trace.h"

namespace toposched::sim {

struct PolicySummary {
  std::string policy;
  std::size_t jobs = 0;          // jobs that ran to completion
  std::size_t never_placed = 0;
  double jct_mean_s = 0, jct_p50_s = 0, jct_p95_s = 0, jct_p99_s = 0;
  double wait_mean_s = 0, wait_p50_s = 0, wait_p95_s = 0, wait_p99_s = 0;
  double makespan_s = 0;
  double utilization = 0;        // 0..1: GPUs allocated to jobs, time-weighted
  // 0..1: the same with each job's ideal GPU time only (work done, not time spent waiting
  // on the network): ideal GPU-seconds / (GPUs x makespan).
  double useful_utilization = 0;
  double comm_slowdown_mean = 1, comm_slowdown_p95 = 1;
  double gpu_hours_lost_comm = 0;
  double gpu_hours_useful = 0;        // the jobs' ideal GPU time: the same for every policy
  double gpu_hours_idle_queued = 0;   // idle while at least one job waited (scheduling loss)
  double gpu_hours_idle_no_demand = 0;  // idle with an empty queue
  double energy_kwh = 0;                 // GPU energy over the makespan, the sum of the four below
  double energy_kwh_useful = 0;          // the jobs' ideal work at busy power
  double energy_kwh_lost_comm = 0;       // time added by communication, at comm-bound power
  double energy_kwh_idle_queued = 0;     // idle GPUs while jobs waited
  double energy_kwh_idle_no_demand = 0;  // idle GPUs with an empty queue
  double useful_gpu_hours_per_mwh = 0;   // gpu_hours_useful / (energy_kwh / 1000); 0 without energy
  double fragmentation_mean = 0;
  double multi_node_jobs = 0;    // fraction of jobs that spanned more than one node
  // The step's parts over the jobs' runs (GPUs x runtime x the part's share of the step on
  // the job's GPUs, sim/backend.h's StepBreakdown): GPU-hours in the pipeline bubble, and
  // per parallel kind (tp, cp, ep, dp, pp) GPU-hours of communication and of the part the
  // steps waited for; the rest was hidden behind compute.
  double gpu_hours_bubble = 0;
  std::array<double, 5> gpu_hours_comm{}, gpu_hours_comm_exposed{};
};

// Nearest-rank percentile (q in 0..100) of unsorted values; 0 when empty.
double percentile(std::vector<double> values, double q);

PolicySummary summarize(const Trace& trace, const SimulationResult& result);

}  // namespace toposched::sim
