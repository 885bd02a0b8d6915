#include "cost/contention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
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

// long: the progressive-filling loop of the simulator's hot path, kept in one body for its workspace
void max_min_rates(std::span<const double> demand, std::span<const double> capacity,
                   std::span<const std::uint32_t> link_begin, std::span<const std::uint32_t> link_jobs,
                   MaxMinWorkspace& ws, std::vector<double>& rate) {
  const std::size_t nj = demand.size(), nu = capacity.size();
  rate.assign(demand.begin(), demand.end());
  // The same crossings by job (counting sort of the link lists).
  ws.job_begin.assign(nj + 1, 0);
  for (std::uint32_t j : link_jobs) ++ws.job_begin[j + 1];
  for (std::size_t j = 0; j < nj; ++j) ws.job_begin[j + 1] += ws.job_begin[j];
  ws.job_links.resize(link_jobs.size());
  ws.cursor.assign(ws.job_begin.begin(), ws.job_begin.end() - 1);
  for (std::size_t u = 0; u < nu; ++u)
    for (std::uint32_t k = link_begin[u]; k < link_begin[u + 1]; ++k)
      ws.job_links[ws.cursor[link_jobs[k]]++] = static_cast<std::uint32_t>(u);
  // Jobs that cross a link and want something rise together from 0; each freezes when it
  // reaches its demand or a link it crosses fills (sum of rates = capacity).
  ws.rising.assign(nj, 0);
  ws.by_demand.clear();
  ws.fixed.assign(nu, 0);
  ws.count.assign(nu, 0);
  for (std::size_t j = 0; j < nj; ++j) {
    if (ws.job_begin[j] == ws.job_begin[j + 1] || demand[j] <= 0) continue;
    ws.rising[j] = 1;
    rate[j] = 0;
    ws.by_demand.push_back(static_cast<std::uint32_t>(j));
    for (std::uint32_t k = ws.job_begin[j]; k < ws.job_begin[j + 1]; ++k) ++ws.count[ws.job_links[k]];
  }
  std::stable_sort(ws.by_demand.begin(), ws.by_demand.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return demand[a] < demand[b]; });
  // Links by the level at which they fill, in a min-heap updated lazily: an entry is
  // current when its version is the link's.
  ws.version.assign(nu, 0);
  ws.touched_stamp.assign(nu, 0);
  ws.heap.clear();
  auto later = [](const MaxMinWorkspace::Fill& a, const MaxMinWorkspace::Fill& b) {
    return a.level != b.level ? a.level > b.level : a.link > b.link;
  };
  double level = 0;
  auto push = [&](std::uint32_t u) {
    ++ws.version[u];  // whatever the heap held for u is stale now
    if (ws.count[u] <= 0) return;
    ws.heap.push_back({std::max(level, (capacity[u] - ws.fixed[u]) / ws.count[u]), u, ws.version[u]});
    std::push_heap(ws.heap.begin(), ws.heap.end(), later);
  };
  for (std::size_t u = 0; u < nu; ++u) push(static_cast<std::uint32_t>(u));
  std::uint64_t round = 0;
  ws.touched.clear();
  auto freeze = [&](std::uint32_t j) {
    ws.rising[j] = 0;
    rate[j] = level;
    for (std::uint32_t k = ws.job_begin[j]; k < ws.job_begin[j + 1]; ++k) {
      std::uint32_t u = ws.job_links[k];
      --ws.count[u];
      ws.fixed[u] += level;
      if (ws.touched_stamp[u] != round) ws.touched_stamp[u] = round, ws.touched.push_back(u);
    }
  };
  std::size_t next_demand = 0;
  while (true) {
    while (!ws.heap.empty() && ws.heap.front().version != ws.version[ws.heap.front().link]) {
      std::pop_heap(ws.heap.begin(), ws.heap.end(), later);
      ws.heap.pop_back();
    }
    while (next_demand < ws.by_demand.size() && !ws.rising[ws.by_demand[next_demand]]) ++next_demand;
    const double link_level = ws.heap.empty() ? kInf : ws.heap.front().level;
    const double demand_level = next_demand < ws.by_demand.size() ? demand[ws.by_demand[next_demand]] : kInf;
    if (!std::isfinite(link_level) && !std::isfinite(demand_level)) break;
    ++round;
    ws.touched.clear();
    if (demand_level <= link_level) {
      // Every job whose demand is reached freezes at it, then its links move.
      level = std::max(level, demand_level);
      while (next_demand < ws.by_demand.size() && demand[ws.by_demand[next_demand]] <= level) {
        std::uint32_t j = ws.by_demand[next_demand++];
        if (ws.rising[j]) freeze(j);
      }
    } else {
      level = std::max(level, link_level);
      std::uint32_t u = ws.heap.front().link;
      for (std::uint32_t k = link_begin[u]; k < link_begin[u + 1]; ++k)
        if (ws.rising[link_jobs[k]]) freeze(link_jobs[k]);
      if (ws.touched.empty()) {  // cannot happen (u had rising jobs); never loop forever
        std::pop_heap(ws.heap.begin(), ws.heap.end(), later);
        ws.heap.pop_back();
      }
    }
    for (std::uint32_t t : ws.touched) push(t);
  }
}

std::vector<double> max_min_rates(std::span<const double> demand, std::span<const double> capacity,
                                  std::span<const std::vector<std::size_t>> link_jobs) {
  std::vector<std::uint32_t> begin(capacity.size() + 1, 0), flat;
  for (std::size_t u = 0; u < capacity.size(); ++u) {
    for (std::size_t j : link_jobs[u]) flat.push_back(static_cast<std::uint32_t>(j));
    begin[u + 1] = static_cast<std::uint32_t>(flat.size());
  }
  MaxMinWorkspace ws;
  std::vector<double> rate;
  max_min_rates(demand, capacity, begin, flat, ws, rate);
  return rate;
}

double uplink_capacity_GBps(const Cluster& cluster, SwitchId s) { return uplink_capacity(cluster, s); }

double job_uplink_demand_GBps(const Cluster& cluster, std::span<const GpuId> gpus) {
  std::unordered_map<std::uint32_t, double> node_share;
  for (GpuId g : gpus) node_share[cluster.gpu_node(g).value] += cluster.gpu_network_GBps(g) * nccl::kNetEncodingEfficiency;
  if (node_share.size() < 2) return 0;
  const DomainId d0 = cluster.node_domain(NodeId(node_share.begin()->first));
  if (d0.valid() && std::all_of(node_share.begin(), node_share.end(),
                                [&](const auto& e) { return cluster.node_domain(NodeId(e.first)) == d0; }))
    return 0;
  double busiest = 0;
  for (const auto& e : node_share) busiest = std::max(busiest, e.second);
  return busiest;
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
