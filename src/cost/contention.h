// Network contention between running jobs: jobs whose traffic leaves the same switch
// subtree share that switch's uplink, whose capacity is what the nodes below can inject
// divided by the oversubscription of every tier up to it. Shares are max-min fair
// (progressive filling): every job's rate rises together until an uplink it crosses is
// full; those jobs freeze, the others keep rising.
//
// A job's demand on an uplink is its inter-node rate: NCCL's rings leave a subtree once per
// channel set, so a job that spans a subtree's boundary puts one node's worth of network
// bandwidth (the NIC share of its GPUs on its busiest node) on that uplink. Jobs inside one
// node, or one accelerator domain, use no uplink and always get share 1.
//
// The result feeds CostOptions::network_share of estimate_collective / estimate_job_comm,
// with CostOptions::share_accounts_for_oversubscription set.
// Invariants: every share is in (0, 1]; a job alone gets the share its uplinks allow
// (1 when nothing is oversubscribed). Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cost/job_comm.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

struct JobTraffic {
  std::span<const GpuId> gpus;  // the job's GPUs (any order)
  // Inter-node rate the job would use alone, GB/s per node; 0 = the NIC share of its GPUs
  // on its busiest node (a bandwidth-bound job).
  double demand_GBps = 0;
};

struct UplinkLoad {
  SwitchId below;  // the switch whose uplink this is
  double capacity_GBps = 0;
  double used_GBps = 0;  // after fair sharing
  int jobs = 0;          // jobs crossing it
};

struct ContentionResult {
  std::vector<double> share;        // per job, in (0, 1]: fraction of its demand it gets
  std::vector<UplinkLoad> uplinks;  // only uplinks some job crosses
};

// Max-min fair rates by progressive filling, the core of network_shares (the simulator runs
// it on its own uplink loads): every job crossing a link starts at 0 and all rise together
// until a job reaches its demand or a link it crosses is full (sum of rates = capacity);
// those freeze, the others keep rising. link_jobs[u] lists the jobs (indices into demand)
// crossing link u; capacities must be positive. Jobs crossing no link get their demand.
std::vector<double> max_min_rates(std::span<const double> demand, std::span<const double> capacity,
                                  std::span<const std::vector<std::size_t>> link_jobs);

// Scratch space of the form below, reused across calls so a warm call allocates nothing.
struct MaxMinWorkspace {
  struct Fill {
    double level;
    std::uint32_t link;
    std::uint64_t version;
  };
  std::vector<std::uint32_t> job_begin, job_links, cursor, by_demand, touched;
  std::vector<char> rising;
  std::vector<double> fixed;
  std::vector<int> count;
  std::vector<std::uint64_t> version, touched_stamp;
  std::vector<Fill> heap;
};
// The same on compressed lists: link u's jobs are link_jobs[link_begin[u] .. link_begin[u+1]).
// O((jobs + crossings) log links). The result goes to `rate`.
void max_min_rates(std::span<const double> demand, std::span<const double> capacity,
                   std::span<const std::uint32_t> link_begin, std::span<const std::uint32_t> link_jobs,
                   MaxMinWorkspace& ws, std::vector<double>& rate);

// The two halves of the uplink model, for callers that keep their own loads (the
// simulator): the capacity of the uplink above switch `s` in GB/s (what the nodes below can
// inject, each capped by every tier's per-node bandwidth up to `s`, divided by the
// oversubscription of every tier up to and including `s`'s), and what a job puts on each
// uplink it crosses (the NIC share of its GPUs on its busiest node, GB/s; 0 for a job
// inside one node or one accelerator domain). GPU ids must be valid.
double uplink_capacity_GBps(const Cluster& cluster, SwitchId s);
double job_uplink_demand_GBps(const Cluster& cluster, std::span<const GpuId> gpus);

// Errors: an invalid GPU id, a job without GPUs, a negative or non-finite demand.
Result<ContentionResult> network_shares(const Cluster& cluster, std::span<const JobTraffic> jobs);

// A running job: its GPUs in rank order, its plan and its model. The pointers must outlive
// the call.
struct RunningJob {
  std::span<const GpuId> gpus_by_rank;
  const ParallelPlan* plan = nullptr;
  const WorkloadModel* model = nullptr;
};

// Every running job's communication estimate under contention: network_shares() over all of
// them (bandwidth-bound demands), then estimate_job_comm() with each job's share and
// share_accounts_for_oversubscription set (the shares replace the static worst case of
// dividing by every tier's oversubscription). The ideal stays the job alone, packed, so
// `slowdown` includes what the other jobs cost it. Errors name the job index.
Result<std::vector<JobCommEstimate>> estimate_running_jobs(const Cluster& cluster, std::span<const RunningJob> jobs);

}  // namespace toposched
