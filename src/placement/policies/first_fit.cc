// first-fit: the first free GPUs in node order, lowest GPU index first: what "wherever
// GPUs are free" does. Ranks follow node order.
#include <fmt/format.h>

#include "placement/policies/policies.h"
#include "placement/select_util.h"

namespace toposched {

Error shortage_error(const AllocationState& s, const JobRequest& r, const NodeMask& allowed) {
  const Cluster& c = s.cluster();
  std::int64_t usable = 0;
  if (capacity_indexed(r, allowed)) {
    for (int b = 0; b < s.bucket_count(); ++b)
      usable += static_cast<std::int64_t>(bucket_capacity(s, r, b)) * static_cast<std::int64_t>(s.bucket_nodes(b).size());
  } else {
    for (std::size_t i = 0; i < c.node_count(); ++i)
      usable += node_capacity(s, r, allowed, NodeId(static_cast<std::uint32_t>(i)));
  }
  std::string shape = r.exclusive           ? fmt::format(" on {} whole free node(s)", r.nodes)
                      : r.gpus_per_node > 0 ? fmt::format(" as {} per node", r.gpus_per_node)
                      : r.gpus_per_pod > 0  ? fmt::format(" as pods of {}, each on one node", r.gpus_per_pod)
                                            : std::string();
  std::string model = r.gpu_model.empty() ? "" : fmt::format(" of model '{}'", r.gpu_model);
  return Error{ErrorCode::kInfeasible,
               fmt::format("needs {} GPUs{}{}; only {} are usable that way ({} of {} GPUs free)", r.total_gpus, model,
                           shape, usable, s.total_free_gpus(), c.gpu_count()),
               {}};
}

namespace {

class FirstFit final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "first-fit"; }
  std::string_view summary() const override { return "first free GPUs in node order"; }
  bool fits_any_free_gpus() const override { return true; }
  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    const Cluster& c = s.cluster();
    std::vector<GpuId> out;
    out.reserve(static_cast<std::size_t>(r.total_gpus));
    int need = r.total_gpus;
    for (std::size_t i = 0; i < c.node_count() && need > 0; ++i) {
      NodeId n(static_cast<std::uint32_t>(i));
      int cap = node_capacity(s, r, allowed, n);
      if (cap == 0) continue;
      int take = (r.exclusive || r.gpus_per_node > 0) ? cap : std::min(cap, need);
      if (take > need) continue;
      take_lowest_free(s, n, take, out);
      need -= take;
    }
    if (need > 0) return tl::unexpected(shortage_error(s, r, allowed));
    return out;
  }
};

}  // namespace

const PlacementPolicy& first_fit_policy() {
  static const FirstFit p;
  return p;
}

}  // namespace toposched
