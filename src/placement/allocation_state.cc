#include "placement/allocation_state.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include <fmt/format.h>

namespace toposched {

namespace {
std::uint64_t next_cluster_key() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
std::uint64_t next_stamp() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

AllocationState::AllocationState(const Cluster& cluster)
    : cluster_(&cluster), cluster_key_(next_cluster_key()), stamp_(next_stamp()) {
  const std::size_t nodes = cluster.node_count();
  owner_.assign(cluster.gpu_count(), kFree);
  node_free_.resize(nodes);
  switch_free_gpus_.assign(cluster.switch_count(), 0);
  switch_free_nodes_.assign(cluster.switch_count(), 0);
  domain_free_gpus_.assign(cluster.domain_count(), 0);
  domain_free_nodes_.assign(cluster.domain_count(), 0);
  ancestor_begin_.reserve(nodes + 1);
  for (std::size_t i = 0; i < nodes; ++i) {
    ancestor_begin_.push_back(static_cast<std::uint32_t>(ancestors_.size()));
    for (SwitchId s = cluster.node_switch(NodeId(static_cast<std::uint32_t>(i))); s.valid();
         s = cluster.switch_parent(s))
      ancestors_.push_back(s);
  }
  ancestor_begin_.push_back(static_cast<std::uint32_t>(ancestors_.size()));
  for (std::size_t i = 0; i < nodes; ++i) {
    NodeId n(static_cast<std::uint32_t>(i));
    const int g = cluster.node_gpu_count(n);
    node_free_[i] = g;
    total_free_gpus_ += g;
    ++total_free_nodes_;
    for (SwitchId s : node_ancestors(n)) {
      switch_free_gpus_[s.index()] += g;
      ++switch_free_nodes_[s.index()];
    }
    if (DomainId d = cluster.node_domain(n); d.valid()) {
      domain_free_gpus_[d.index()] += g;
      ++domain_free_nodes_[d.index()];
    }
  }
  switch_total_gpus_ = switch_free_gpus_;
  domain_total_gpus_ = domain_free_gpus_;
  build_index();
  job_name_.emplace_back();
  job_gpus_.emplace_back();
  job_order_.push_back(0);
}

void AllocationState::build_index() {
  const Cluster& c = *cluster_;
  const std::size_t nodes = c.node_count();
  int widest = 0;
  for (std::size_t i = 0; i < nodes; ++i) {
    const int g = c.node_gpu_count(NodeId(static_cast<std::uint32_t>(i)));
    widest = std::max(widest, g);
    if (std::find(bucket_gpus_.begin(), bucket_gpus_.end(), g) == bucket_gpus_.end()) bucket_gpus_.push_back(g);
  }
  std::sort(bucket_gpus_.begin(), bucket_gpus_.end());
  bucket_width_ = widest + 1;
  const std::size_t buckets = bucket_gpus_.size() * static_cast<std::size_t>(bucket_width_);
  bucket_nodes_.assign(buckets, {});
  node_slot_.resize(nodes);
  bucket_pos_.resize(nodes);
  switch_bucket_nodes_.assign(c.switch_count() * buckets, 0);
  for (std::size_t i = 0; i < nodes; ++i) {
    const NodeId n(static_cast<std::uint32_t>(i));
    node_slot_[i] = static_cast<std::uint8_t>(
        std::lower_bound(bucket_gpus_.begin(), bucket_gpus_.end(), c.node_gpu_count(n)) - bucket_gpus_.begin());
    const int b = node_bucket(n);
    bucket_pos_[i] = static_cast<std::uint32_t>(bucket_nodes_[static_cast<std::size_t>(b)].size());
    bucket_nodes_[static_cast<std::size_t>(b)].push_back(n);
    for (SwitchId s : node_ancestors(n)) ++switch_bucket_nodes_[s.index() * buckets + static_cast<std::size_t>(b)];
    if (!c.node_switch(n).valid()) switchless_nodes_.push_back(n);
  }
  for (std::size_t s = 0; s < c.switch_count(); ++s)
    if (!c.switch_nodes(SwitchId(static_cast<std::uint32_t>(s))).empty())
      leaf_switches_.push_back(SwitchId(static_cast<std::uint32_t>(s)));
}

void AllocationState::move_bucket(NodeId n, int from, int to) {
  std::vector<NodeId>& src = bucket_nodes_[static_cast<std::size_t>(from)];
  const std::uint32_t pos = bucket_pos_[n.index()];
  src[pos] = src.back();
  bucket_pos_[src[pos].index()] = pos;
  src.pop_back();
  std::vector<NodeId>& dst = bucket_nodes_[static_cast<std::size_t>(to)];
  bucket_pos_[n.index()] = static_cast<std::uint32_t>(dst.size());
  dst.push_back(n);
}

void AllocationState::adjust(NodeId n, int delta) {
  if (delta == 0) return;
  const int before = node_free_[n.index()];
  const int after = before + delta;
  const int whole = cluster_->node_gpu_count(n);
  const int from = node_bucket(n);
  node_free_[n.index()] = after;
  const int to = node_bucket(n);
  move_bucket(n, from, to);
  const int node_delta = (after == whole) - (before == whole);
  total_free_gpus_ += delta;
  total_free_nodes_ += node_delta;
  // One walk up the tree for the counters and the index: the subtree counts of both
  // buckets sit in the switch's row of switch_bucket_nodes_.
  const std::size_t buckets = bucket_nodes_.size();
  for (SwitchId s : node_ancestors(n)) {
    switch_free_gpus_[s.index()] += delta;
    switch_free_nodes_[s.index()] += node_delta;
    std::int64_t* row = &switch_bucket_nodes_[s.index() * buckets];
    --row[from];
    ++row[to];
  }
  if (DomainId d = cluster_->node_domain(n); d.valid()) {
    domain_free_gpus_[d.index()] += delta;
    domain_free_nodes_[d.index()] += node_delta;
  }
}

Result<void> AllocationState::allocate(std::string_view job_id, std::span<const GpuId> gpus, std::uint64_t order) {
  if (job_id.empty()) return make_error(ErrorCode::kInvalidArgument, "a job needs a non-empty id");
  if (gpus.empty()) return make_error(ErrorCode::kInvalidArgument, fmt::format("job '{}' has no GPUs", job_id));
  std::string key(job_id);
  if (job_index_.contains(key))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("job '{}' is already allocated", job_id));
  // Validate everything first so that a failure changes nothing (gang semantics). The
  // owner array doubles as the "seen" marker: mark with a sentinel, then undo on failure.
  constexpr JobSlot kPending = std::numeric_limits<JobSlot>::max();
  std::size_t marked = 0;
  auto undo = [&] {
    for (std::size_t i = 0; i < marked; ++i) owner_[gpus[i].index()] = kFree;
  };
  for (GpuId g : gpus) {
    if (!g.valid() || g.index() >= owner_.size()) {
      undo();
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("job '{}': GPU id {} is not in the cluster", job_id, g.value));
    }
    JobSlot o = owner_[g.index()];
    if (o != kFree) {
      undo();
      NodeId n = cluster_->gpu_node(g);
      std::string who = o == kPending ? std::string(job_id) + " (listed twice)" : job_name_[o];
      return make_error(ErrorCode::kInfeasible, fmt::format("GPU {}:{} is already owned by job '{}'",
                                                            cluster_->node_name(n), cluster_->gpu_local_index(g), who));
    }
    owner_[g.index()] = kPending;
    ++marked;
  }
  if (order == 0) {
    order = ++next_order_;
  } else {
    next_order_ = std::max(next_order_, order);
  }
  JobSlot slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    job_name_[slot] = key;
    job_gpus_[slot].assign(gpus.begin(), gpus.end());
    job_order_[slot] = order;
  } else {
    slot = static_cast<JobSlot>(job_name_.size());
    job_name_.push_back(key);
    job_gpus_.emplace_back(gpus.begin(), gpus.end());
    job_order_.push_back(order);
  }
  job_index_.emplace(std::move(key), slot);
  // Consecutive GPUs of one node are counted together: one ancestor walk per node run.
  std::size_t i = 0;
  while (i < gpus.size()) {
    NodeId n = cluster_->gpu_node(gpus[i]);
    int run = 0;
    for (; i < gpus.size() && cluster_->gpu_node(gpus[i]) == n; ++i, ++run) owner_[gpus[i].index()] = slot;
    adjust(n, -run);
  }
  stamp_ = next_stamp();
  return {};
}

Result<std::vector<GpuId>> AllocationState::release(std::string_view job_id) {
  auto it = job_index_.find(std::string(job_id));
  if (it == job_index_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("no job '{}' in the allocation state", job_id));
  JobSlot slot = it->second;
  std::vector<GpuId> gpus = std::move(job_gpus_[slot]);
  std::size_t i = 0;
  while (i < gpus.size()) {
    NodeId n = cluster_->gpu_node(gpus[i]);
    int run = 0;
    for (; i < gpus.size() && cluster_->gpu_node(gpus[i]) == n; ++i, ++run) owner_[gpus[i].index()] = kFree;
    adjust(n, run);
  }
  job_index_.erase(it);
  job_name_[slot].clear();
  job_gpus_[slot].clear();
  job_order_[slot] = 0;
  free_slots_.push_back(slot);
  stamp_ = next_stamp();
  return gpus;
}

std::uint64_t AllocationState::job_order(std::string_view job_id) const {
  auto it = job_index_.find(std::string(job_id));
  return it == job_index_.end() ? 0 : job_order_[it->second];
}

std::string_view AllocationState::gpu_owner(GpuId g) const {
  JobSlot o = owner_[g.index()];
  return o == kFree ? std::string_view() : std::string_view(job_name_[o]);
}

std::vector<std::string> AllocationState::job_ids() const {
  std::vector<JobSlot> slots;
  for (const auto& [name, slot] : job_index_) slots.push_back(slot);
  std::sort(slots.begin(), slots.end(), [&](JobSlot a, JobSlot b) { return job_order_[a] < job_order_[b]; });
  std::vector<std::string> out;
  out.reserve(slots.size());
  for (JobSlot s : slots) out.push_back(job_name_[s]);
  return out;
}

std::span<const GpuId> AllocationState::job_gpus(std::string_view job_id) const {
  auto it = job_index_.find(std::string(job_id));
  if (it == job_index_.end()) return {};
  return job_gpus_[it->second];
}

Result<void> AllocationState::check_invariants() const {
  AllocationState fresh(*cluster_);
  // Recount from owners.
  for (std::size_t i = 0; i < cluster_->node_count(); ++i) {
    NodeId n(static_cast<std::uint32_t>(i));
    int used = 0;
    for (int l = 0; l < cluster_->node_gpu_count(n); ++l)
      if (owner_[cluster_->node_gpu(n, l).index()] != kFree) ++used;
    if (used) fresh.adjust(n, -used);
  }
  if (!fresh.same_counters(*this)) {
    for (std::size_t i = 0; i < node_free_.size(); ++i)
      if (node_free_[i] != fresh.node_free_[i])
        return make_error(ErrorCode::kValidation,
                          fmt::format("node {}: free counter {} but {} GPUs are free",
                                      cluster_->node_name(NodeId(static_cast<std::uint32_t>(i))), node_free_[i],
                                      fresh.node_free_[i]));
    if (!same_buckets(fresh))
      return make_error(ErrorCode::kValidation, "the free-GPU index's node buckets disagree with the GPU owners");
    return make_error(ErrorCode::kValidation,
                      "switch, domain, total or per-bucket free counters disagree with the GPU owners");
  }
  std::size_t owned = 0;
  for (const auto& [name, slot] : job_index_) {
    if (slot == kFree || slot >= job_name_.size() || job_name_[slot] != name)
      return make_error(ErrorCode::kValidation, fmt::format("job table entry for '{}' is inconsistent", name));
    for (GpuId g : job_gpus_[slot])
      if (owner_[g.index()] != slot)
        return make_error(ErrorCode::kValidation,
                          fmt::format("job '{}' lists GPU {} which it does not own", name, g.value));
    owned += job_gpus_[slot].size();
  }
  std::size_t marked =
      static_cast<std::size_t>(std::count_if(owner_.begin(), owner_.end(), [](JobSlot o) { return o != kFree; }));
  if (owned != marked)
    return make_error(ErrorCode::kValidation, fmt::format("{} GPUs have an owner but jobs list {}", marked, owned));
  return {};
}

bool AllocationState::same_counters(const AllocationState& o) const {
  return node_free_ == o.node_free_ && switch_free_gpus_ == o.switch_free_gpus_ &&
         switch_free_nodes_ == o.switch_free_nodes_ && domain_free_gpus_ == o.domain_free_gpus_ &&
         domain_free_nodes_ == o.domain_free_nodes_ && total_free_gpus_ == o.total_free_gpus_ &&
         total_free_nodes_ == o.total_free_nodes_ && switch_bucket_nodes_ == o.switch_bucket_nodes_ &&
         same_buckets(o);
}

bool AllocationState::same_buckets(const AllocationState& o) const {
  if (bucket_nodes_.size() != o.bucket_nodes_.size()) return false;
  for (std::size_t b = 0; b < bucket_nodes_.size(); ++b) {
    if (bucket_nodes_[b].size() != o.bucket_nodes_[b].size()) return false;
    for (std::size_t k = 0; k < bucket_nodes_[b].size(); ++k) {
      const NodeId n = bucket_nodes_[b][k];
      if (bucket_pos_[n.index()] != k || o.node_bucket(n) != static_cast<int>(b)) return false;
    }
  }
  return true;
}

}  // namespace toposched
