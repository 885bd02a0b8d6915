#include "placement/slurm_alignment.h"

#include <algorithm>
#include <map>

namespace toposched {

std::vector<std::pair<NodeId, std::vector<std::size_t>>> ranks_by_node(const Cluster& c, std::span<const GpuId> gpus) {
  std::vector<std::pair<NodeId, std::vector<std::size_t>>> out;
  std::map<std::uint32_t, std::size_t> slot;
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    NodeId n = c.gpu_node(gpus[r]);
    auto [it, fresh] = slot.emplace(static_cast<std::uint32_t>(n.index()), out.size());
    if (fresh) out.push_back({n, {}});
    out[it->second].second.push_back(r);
  }
  return out;
}

std::vector<std::vector<int>> local_sequences(const Cluster& c, std::span<const GpuId> gpus) {
  std::vector<std::vector<int>> out;
  for (const auto& [n, ranks] : ranks_by_node(c, gpus)) {
    std::vector<int> seq;
    for (std::size_t r : ranks) seq.push_back(c.gpu_local_index(gpus[r]));
    out.push_back(std::move(seq));
  }
  return out;
}

std::vector<GpuId> align_to_slurm(const AllocationState& state, std::vector<GpuId> gpus) {
  const Cluster& c = state.cluster();
  auto groups = ranks_by_node(c, gpus);
  std::vector<std::vector<int>> lowest_free(groups.size());
  for (std::size_t k = 0; k < groups.size(); ++k) {
    auto& [n, ranks] = groups[k];
    for (int i = 0; i < c.node_gpu_count(n) && lowest_free[k].size() < ranks.size(); ++i)
      if (state.gpu_free(c.node_gpu(n, i))) lowest_free[k].push_back(i);
    std::vector<std::size_t> by_planned(ranks);
    std::sort(by_planned.begin(), by_planned.end(),
              [&](std::size_t a, std::size_t b) { return c.gpu_local_index(gpus[a]) < c.gpu_local_index(gpus[b]); });
    for (std::size_t j = 0; j < by_planned.size() && j < lowest_free[k].size(); ++j)
      gpus[by_planned[j]] = c.node_gpu(n, lowest_free[k][j]);
  }
  auto seqs = local_sequences(c, gpus);
  const bool all_equal =
      std::all_of(seqs.begin(), seqs.end(), [&](const std::vector<int>& s) { return s == seqs.front(); });
  const bool ascending =
      std::all_of(seqs.begin(), seqs.end(), [](const std::vector<int>& s) { return std::is_sorted(s.begin(), s.end()); });
  if (!all_equal && !ascending)
    for (std::size_t k = 0; k < groups.size(); ++k)
      for (std::size_t j = 0; j < groups[k].second.size() && j < lowest_free[k].size(); ++j)
        gpus[groups[k].second[j]] = c.node_gpu(groups[k].first, lowest_free[k][j]);
  return gpus;
}

Result<std::vector<GpuId>> SlurmAlignedPolicy::select(const AllocationState& state, const JobRequest& request,
                                                      const NodeMask& allowed) const {
  TOPOSCHED_TRY(gpus, inner_.select(state, request, allowed));
  return align_to_slurm(state, std::move(gpus));
}

}  // namespace toposched
