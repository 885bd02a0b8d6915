// The simulator's outputs, built from the per-policy results of one run:
//  - report_json: the DESIGN.md contract {"policies":{NAME:{"jobs","jct_mean_s","jct_p50_s",
//    "jct_p99_s","wait_mean_s","utilization","comm_slowdown_mean","makespan_s"}}} plus more
//    keys per policy and a "run" object. A pure function of its inputs (no clock, no host
//    name; numbers rounded to fixed decimals), so the same seed gives the same bytes.
//  - report_table: the terminal table, one column per policy.
//  - report_html: one self-contained page in the shell of formats/html_page.h: JCT CDF per
//    policy, utilisation, queue length and fragmentation over time, slowdown distribution,
//    per-policy summary.
//  - jobs_csv: one row per job and policy (when it started and ended, what its placement
//    cost it), for the questions a summary cannot answer (which jobs waited, and why).
// write_report writes report.json, report.html and jobs.csv into a directory atomically.
// Pure functions apart from write_report; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/metrics.h"
#include "sim/trace.h"
#include "topology/cluster.h"

namespace toposched::sim {

struct RunInfo {
  std::string cluster;      // cluster name
  std::size_t cluster_gpus = 0;
  std::size_t cluster_nodes = 0;
  std::string trace;        // trace source
  std::string trace_format;
  std::size_t trace_jobs = 0;
  std::string discipline;
  std::uint64_t seed = 0;
  // --score-model's spec when the policies decided on a perturbed model; empty otherwise.
  std::string score_model;
};

struct PolicyRun {
  PolicySummary summary;
  const SimulationResult* result = nullptr;  // for the HTML series; may be null
};

// Fails (kValidation) when a name is not valid UTF-8 (formats/json_output.h).
Result<std::string> report_json(const RunInfo& info, const std::vector<PolicyRun>& runs);
std::string report_table(const RunInfo& info, const std::vector<PolicyRun>& runs);
Result<std::string> report_html(const RunInfo& info, const Trace& trace, const std::vector<PolicyRun>& runs);

// Header: policy,job,gpus,kind,submit_s,start_s,end_s,wait_s,run_s,slowdown,
// placement_slowdown,nodes,placed,never_placed_reason; rows in policy order, then trace order.
// Runs without a result (null) have no rows.
std::string jobs_csv(const Trace& trace, const std::vector<PolicyRun>& runs);

Result<void> write_report(const std::string& dir, const RunInfo& info, const Trace& trace, const std::vector<PolicyRun>& runs);

}  // namespace toposched::sim
