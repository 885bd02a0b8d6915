#include "cost/contention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "cost/nccl_constants.h"

namespace toposched {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double node_egress(const Cluster& cluster, NodeId n) {
  double sum = 0;
  for (int i = 0; i < cluster.node_gpu_count(n); ++i) sum += cluster.gpu_network_GBps(cluster.node_gpu(n, i));
  return sum * nccl::kNetEncodingEfficiency;
}

// What the nodes under switch s can push through its uplink: their NICs, capped per node by
// the tiers up to s, divided by the oversubscription of every tier up to and including s's.
double uplink_capacity(const Cluster& cluster, SwitchId s) {
  const auto& tiers = cluster.tiers();
  const int k = cluster.switch_tier(s);
  double over = 1, cap = kInf;
  for (int j = 0; j <= k && j < static_cast<int>(tiers.size()); ++j) {
    over *= tiers[static_cast<std::size_t>(j)].oversubscription;
    if (tiers[static_cast<std::size_t>(j)].bandwidth_GBps_per_node > 0)
      cap = std::min(cap, tiers[static_cast<std::size_t>(j)].bandwidth_GBps_per_node);
  }
  double sum = 0;
  for (NodeId n : cluster.switch_subtree_nodes(s)) sum += std::min(node_egress(cluster, n), cap);
  return sum / over;
}

}  // namespace

std::vector<double> max_min_rates(std::span<const double> demand, std::span<const double> capacity,
                                  std::span<const std::vector<std::size_t>> link_jobs) {
  const std::size_t nj = demand.size(), nu = capacity.size();
  std::vector<double> rate(demand.begin(), demand.end());
  std::vector<char> frozen(nj, 1);
  std::size_t active = 0;
  for (std::size_t u = 0; u < nu; ++u)
    for (std::size_t j : link_jobs[u])
      if (frozen[j] && demand[j] > 0) frozen[j] = 0, rate[j] = 0, ++active;
  // Progressive filling: all unfrozen jobs share one rising rate.
  double level = 0;
  while (active > 0) {
    double next = kInf;
    for (std::size_t j = 0; j < nj; ++j)
      if (!frozen[j]) next = std::min(next, demand[j]);
    for (std::size_t u = 0; u < nu; ++u) {
      double fixed = 0;
      int rising = 0;
      for (std::size_t j : link_jobs[u]) {
        if (frozen[j])
          fixed += rate[j];
        else
          ++rising;
      }
      if (rising > 0) next = std::min(next, std::max(level, (capacity[u] - fixed) / rising));
    }
    level = next;
    for (std::size_t j = 0; j < nj; ++j)
      if (!frozen[j]) rate[j] = level;
    // Freeze jobs at their demand and jobs on a saturated link.
    std::size_t before = active;
    for (std::size_t j = 0; j < nj; ++j)
      if (!frozen[j] && rate[j] >= demand[j] * (1 - 1e-12)) frozen[j] = 1, --active;
    for (std::size_t u = 0; u < nu; ++u) {
      double total = 0;
      for (std::size_t j : link_jobs[u]) total += rate[j];
      if (total >= capacity[u] * (1 - 1e-9))
        for (std::size_t j : link_jobs[u])
          if (!frozen[j]) frozen[j] = 1, --active;
    }
    if (active == before) break;  // cannot happen with positive capacities; never loop forever
  }
  return rate;
}

Result<ContentionResult> network_shares(const Cluster& cluster, std::span<const JobTraffic> jobs) {
  ContentionResult result;
  result.share.assign(jobs.size(), 1.0);
  std::vector<double> demand(jobs.size(), 0);
  // Uplinks (by the switch below them) and the jobs crossing each.
  std::unordered_map<std::uint32_t, std::size_t> uplink_index;
  std::vector<std::vector<std::size_t>> uplink_jobs;
  std::vector<std::vector<std::size_t>> job_uplinks(jobs.size());

  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const JobTraffic& job = jobs[j];
    if (job.gpus.empty()) return make_error(ErrorCode::kInvalidArgument, fmt::format("job {} has no GPUs", j));
    if (!std::isfinite(job.demand_GBps) || job.demand_GBps < 0)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("job {}: demand must be a finite, non-negative GB/s", j));
    std::unordered_map<std::uint32_t, double> node_share;  // node -> NIC share of the job's GPUs there
    for (GpuId g : job.gpus) {
      if (!g.valid() || g.index() >= cluster.gpu_count())
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("job {}: GPU id {} is not in cluster '{}'", j, g.value, cluster.name()));
      node_share[cluster.gpu_node(g).value] += cluster.gpu_network_GBps(g) * nccl::kNetEncodingEfficiency;
    }
    if (node_share.size() < 2) continue;
    // One accelerator domain holds the whole job: NVLink, no uplink.
    DomainId d0 = cluster.node_domain(NodeId(node_share.begin()->first));
    bool one_domain = d0.valid() && std::all_of(node_share.begin(), node_share.end(), [&](const auto& e) {
                        return cluster.node_domain(NodeId(e.first)) == d0;
                      });
    if (one_domain) continue;
    double busiest = 0;
    for (const auto& e : node_share) busiest = std::max(busiest, e.second);
    demand[j] = job.demand_GBps > 0 ? job.demand_GBps : busiest;
    // Count the job's nodes under every switch above them; an uplink is crossed when the
    // subtree holds some but not all of them.
    std::unordered_map<std::uint32_t, std::size_t> under;
    for (const auto& e : node_share)
      for (SwitchId s = cluster.node_switch(NodeId(e.first)); s.valid(); s = cluster.switch_parent(s)) ++under[s.value];
    for (const auto& [s, count] : under) {
      if (count == node_share.size()) continue;
      auto [it, inserted] = uplink_index.emplace(s, uplink_jobs.size());
      if (inserted) uplink_jobs.emplace_back();
      uplink_jobs[it->second].push_back(j);
      job_uplinks[j].push_back(it->second);
    }
  }

  const std::size_t nu = uplink_jobs.size();
  std::vector<SwitchId> uplink_switch(nu);
  for (const auto& [s, u] : uplink_index) uplink_switch[u] = SwitchId(s);
  std::vector<double> capacity(nu);
  for (std::size_t u = 0; u < nu; ++u) capacity[u] = uplink_capacity(cluster, uplink_switch[u]);
  std::vector<double> rate = max_min_rates(demand, capacity, uplink_jobs);
  for (std::size_t j = 0; j < jobs.size(); ++j)
    if (demand[j] > 0 && !job_uplinks[j].empty()) result.share[j] = std::clamp(rate[j] / demand[j], 1e-9, 1.0);
  for (std::size_t u = 0; u < nu; ++u) {
    double total = 0;
    for (std::size_t j : uplink_jobs[u]) total += rate[j];
    result.uplinks.push_back({uplink_switch[u], capacity[u], total, static_cast<int>(uplink_jobs[u].size())});
  }
  return result;
}

Result<std::vector<JobCommEstimate>> estimate_running_jobs(const Cluster& cluster, std::span<const RunningJob> jobs) {
  std::vector<JobTraffic> traffic;
  traffic.reserve(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (!jobs[j].plan || !jobs[j].model)
      return make_error(ErrorCode::kInvalidArgument, fmt::format("running job {} has no plan or model", j));
    traffic.push_back({jobs[j].gpus_by_rank, 0});
  }
  auto shares = network_shares(cluster, traffic);
  if (!shares) return tl::unexpected(shares.error());
  std::vector<JobCommEstimate> out;
  out.reserve(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    auto e = estimate_job_comm(cluster, jobs[j].gpus_by_rank, *jobs[j].plan, *jobs[j].model,
                               CostOptions{shares->share[j], true});
    if (!e) {
      Error err = e.error();
      err.message = fmt::format("running job {}: {}", j, err.message);
      return tl::unexpected(err);
    }
    out.push_back(std::move(*e));
  }
  return out;
}

}  // namespace toposched
