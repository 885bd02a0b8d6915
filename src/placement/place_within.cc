#include "placement/place_within.h"

#include <fmt/format.h>

#include "topology/hostlist.h"

namespace toposched {

namespace {
// Holds the free GPUs of masked-out nodes and the blocked GPUs on the copy; never visible
// outside this function.
constexpr std::string_view kMaskedJob = "toposched:masked-out-nodes";
}  // namespace

Result<NodeMask> allowed_nodes(const Cluster& cluster, const JobRequest& request, NodeMask allowed) {
  if (request.within_nodes.empty()) return allowed;
  TOPOSCHED_TRY(names, expand_hostlist(request.within_nodes, cluster.node_count()));
  NodeMask within(cluster.node_count(), 0);
  for (const std::string& name : names) {
    auto node = cluster.find_node(name);
    if (!node)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("within_nodes: no node named '{}' in cluster '{}'", name, cluster.name()));
    within[node->index()] = 1;
  }
  if (!allowed.empty())
    for (std::size_t i = 0; i < within.size(); ++i) within[i] = within[i] && i < allowed.size() && allowed[i];
  return within;
}

Result<Placement> place_within(const AllocationState& state, const JobRequest& request,
                               const PlacementPolicy& policy, const NodeMask& allowed, PlaceDetail detail,
                               std::span<const GpuId> blocked_gpus) {
  const Cluster& c = state.cluster();
  auto masked_out = [&](NodeId n) { return !allowed.empty() && !(n.index() < allowed.size() && allowed[n.index()]); };
  std::vector<GpuId> blocked;
  if (!allowed.empty()) {
    for (std::size_t i = 0; i < c.node_count(); ++i) {
      const NodeId n(static_cast<std::uint32_t>(i));
      if (!masked_out(n) || state.free_gpus(n) == 0) continue;
      for (int local = 0; local < c.node_gpu_count(n); ++local)
        if (GpuId g = c.node_gpu(n, local); state.gpu_free(g)) blocked.push_back(g);
    }
  }
  if (!blocked_gpus.empty()) {
    std::vector<char> seen(c.gpu_count(), 0);
    for (GpuId g : blocked_gpus) {
      if (g.index() >= c.gpu_count())
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("blocked GPU {} is not a GPU of cluster '{}'", g.index(), c.name()));
      // Masked-out nodes are blocked whole already; held GPUs need no blocking.
      if (seen[g.index()] || masked_out(c.gpu_node(g)) || !state.gpu_free(g)) continue;
      seen[g.index()] = 1;
      blocked.push_back(g);
    }
  }
  if (blocked.empty()) return place(state, request, policy, detail);
  AllocationState masked = state.snapshot();
  TOPOSCHED_CHECK(masked.allocate(kMaskedJob, blocked));
  return place(masked, request, policy, detail);
}

}  // namespace toposched
