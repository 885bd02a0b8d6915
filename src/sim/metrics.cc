#include "sim/metrics.h"

#include <algorithm>
#include <cmath>

namespace toposched::sim {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double rank = std::ceil(q / 100.0 * static_cast<double>(v.size()));
  std::size_t idx = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return v[std::min(idx, v.size() - 1)];
}

namespace {
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
}  // namespace

PolicySummary summarize(const Trace& trace, const SimulationResult& r) {
  PolicySummary s;
  s.policy = r.policy;
  std::vector<double> jct, wait, slow;
  double lost = 0, ideal_gpu_s = 0, useful_j = 0, lost_j = 0;
  std::size_t multi = 0;
  for (std::size_t i = 0; i < r.jobs.size(); ++i) {
    const JobOutcome& o = r.jobs[i];
    const SimJob& j = trace.jobs[i];
    if (!o.placed) {
      ++s.never_placed;
      continue;
    }
    jct.push_back(o.end_s - j.submit_s);
    wait.push_back(o.start_s - j.submit_s);
    slow.push_back(o.slowdown);
    const double added_s = std::max(0.0, (o.end_s - o.start_s) - j.duration_s);
    lost += j.gpus * added_s;
    ideal_gpu_s += j.gpus * j.duration_s;
    useful_j += o.busy_w * j.duration_s;
    lost_j += o.comm_w * added_s;
    const double run_h = j.gpus * (o.end_s - o.start_s) / 3600.0;
    s.gpu_hours_bubble += run_h * o.step.bubble;
    for (std::size_t k = 0; k < s.gpu_hours_comm.size(); ++k) {
      s.gpu_hours_comm[k] += run_h * o.step.comm[k];
      s.gpu_hours_comm_exposed[k] += run_h * o.step.exposed[k];
    }
    if (o.nodes > 1) ++multi;
  }
  s.jobs = jct.size();
  s.jct_mean_s = mean(jct);
  s.jct_p50_s = percentile(jct, 50);
  s.jct_p95_s = percentile(jct, 95);
  s.jct_p99_s = percentile(jct, 99);
  s.wait_mean_s = mean(wait);
  s.wait_p50_s = percentile(wait, 50);
  s.wait_p95_s = percentile(wait, 95);
  s.wait_p99_s = percentile(wait, 99);
  s.comm_slowdown_mean = slow.empty() ? 1 : mean(slow);
  s.comm_slowdown_p95 = slow.empty() ? 1 : percentile(slow, 95);
  s.gpu_hours_lost_comm = lost / 3600.0;
  s.makespan_s = r.last_end_s - r.first_submit_s;
  s.utilization = s.makespan_s > 0 && r.cluster_gpus > 0 ? r.busy_gpu_seconds / (static_cast<double>(r.cluster_gpus) * s.makespan_s) : 0;
  s.useful_utilization = s.makespan_s > 0 && r.cluster_gpus > 0 ? ideal_gpu_s / (static_cast<double>(r.cluster_gpus) * s.makespan_s) : 0;
  s.gpu_hours_useful = ideal_gpu_s / 3600.0;
  s.gpu_hours_idle_queued = r.idle_gpu_seconds_queued / 3600.0;
  const double capacity_s = static_cast<double>(r.cluster_gpus) * s.makespan_s;
  s.gpu_hours_idle_no_demand = std::max(0.0, capacity_s - r.busy_gpu_seconds - r.idle_gpu_seconds_queued) / 3600.0;
  constexpr double kJoulesPerKwh = 3.6e6;
  s.energy_kwh_useful = useful_j / kJoulesPerKwh;
  s.energy_kwh_lost_comm = lost_j / kJoulesPerKwh;
  s.energy_kwh_idle_queued = r.idle_energy_j_queued / kJoulesPerKwh;
  s.energy_kwh_idle_no_demand = r.idle_energy_j_no_demand / kJoulesPerKwh;
  s.energy_kwh = s.energy_kwh_useful + s.energy_kwh_lost_comm + s.energy_kwh_idle_queued + s.energy_kwh_idle_no_demand;
  s.useful_gpu_hours_per_mwh = s.energy_kwh > 0 ? s.gpu_hours_useful / (s.energy_kwh / 1000.0) : 0;
  s.fragmentation_mean = r.fragmentation_mean;
  s.multi_node_jobs = s.jobs ? static_cast<double>(multi) / static_cast<double>(s.jobs) : 0;
  return s;
}

}  // namespace toposched::sim
