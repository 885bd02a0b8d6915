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
  gpu_cell_.resize(cluster.gpu_count());
  for (std::size_t g = 0; g < gpu_cell_.size(); ++g)
    gpu_cell_[g].node = cluster.gpu_node(GpuId(static_cast<std::uint32_t>(g)));
  node_free_.resize(nodes);
  switch_free_gpus_.assign(cluster.switch_count(), 0);
  switch_free_nodes_.assign(cluster.switch_count(), 0);
  domain_free_gpus_.assign(cluster.domain_count(), 0);
  domain_free_nodes_.assign(cluster.domain_count(), 0);
  build_switch_chains();
  node_cell_.resize(nodes);
  for (std::size_t i = 0; i < nodes; ++i) {
    NodeId n(static_cast<std::uint32_t>(i));
    NodeCell& cell = node_cell_[i];
    cell.first_gpu = cluster.node_gpu(n, 0).value;
    cell.leaf = cluster.node_switch(n);
    cell.domain = cluster.node_domain(n);
    cell.gpus = static_cast<std::uint8_t>(cluster.node_gpu_count(n));  // at most 64 (cluster.cc)
    const int g = cell.gpus;
    node_free_[i] = g;
    total_free_gpus_ += g;
    ++total_free_nodes_;
    for (SwitchId s : node_ancestors(n)) {
      switch_free_gpus_[s.index()] += g;
      ++switch_free_nodes_[s.index()];
    }
    if (cell.domain.valid()) {
      domain_free_gpus_[cell.domain.index()] += g;
      ++domain_free_nodes_[cell.domain.index()];
    }
  }
  switch_total_gpus_ = switch_free_gpus_;
  domain_total_gpus_ = domain_free_gpus_;
  build_index();
  job_name_.emplace_back();
  job_gpus_.emplace_back();
  job_order_.push_back(0);
}

void AllocationState::build_switch_chains() {
  const Cluster& c = *cluster_;
  chain_begin_.reserve(c.switch_count() + 2);
  for (std::size_t i = 0; i < c.switch_count(); ++i) {
    chain_begin_.push_back(static_cast<std::uint32_t>(chain_.size()));
    for (SwitchId s(static_cast<std::uint32_t>(i)); s.valid(); s = c.switch_parent(s)) chain_.push_back(s);
  }
  // The empty chain of switchless nodes, then the end.
  chain_begin_.push_back(static_cast<std::uint32_t>(chain_.size()));
  chain_begin_.push_back(static_cast<std::uint32_t>(chain_.size()));
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
  switch_bucket_nodes_.assign(c.switch_count() * buckets, 0);
  for (std::size_t i = 0; i < nodes; ++i) {
    const NodeId n(static_cast<std::uint32_t>(i));
    node_cell_[i].slot = static_cast<std::uint8_t>(
        std::lower_bound(bucket_gpus_.begin(), bucket_gpus_.end(), c.node_gpu_count(n)) - bucket_gpus_.begin());
    const int b = node_bucket(n);
    node_cell_[i].bucket_pos = static_cast<std::uint32_t>(bucket_nodes_[static_cast<std::size_t>(b)].size());
    bucket_nodes_[static_cast<std::size_t>(b)].push_back(n);
    for (SwitchId s : node_ancestors(n)) ++switch_bucket_nodes_[s.index() * buckets + static_cast<std::size_t>(b)];
    if (!c.node_switch(n).valid()) switchless_nodes_.push_back(n);
  }
  for (std::size_t s = 0; s < c.switch_count(); ++s)
    if (!c.switch_nodes(SwitchId(static_cast<std::uint32_t>(s))).empty())
      leaf_switches_.push_back(SwitchId(static_cast<std::uint32_t>(s)));
}

// Both run once per node of every allocate and release: inlined into their loops (GCC's
// heuristics otherwise keep them out of line, a call per node).
[[gnu::always_inline]] inline void AllocationState::move_bucket(NodeId n, int from, int to) {
  std::vector<NodeId>& src = bucket_nodes_[static_cast<std::size_t>(from)];
  const std::uint32_t pos = node_cell_[n.index()].bucket_pos;
  src[pos] = src.back();
  node_cell_[src[pos].index()].bucket_pos = pos;
  src.pop_back();
  std::vector<NodeId>& dst = bucket_nodes_[static_cast<std::size_t>(to)];
  node_cell_[n.index()].bucket_pos = static_cast<std::uint32_t>(dst.size());
  dst.push_back(n);
}

[[gnu::always_inline]] inline void AllocationState::adjust(NodeId n, int delta) {
  if (delta == 0) return;
  const NodeCell& cell = node_cell_[n.index()];
  const int before = node_free_[n.index()];
  const int after = before + delta;
  const int whole = cell.gpus;
  const int from = cell.slot * bucket_width_ + before;
  const int to = cell.slot * bucket_width_ + after;
  node_free_[n.index()] = after;
  move_bucket(n, from, to);
  const int node_delta = (after == whole) - (before == whole);
  total_free_gpus_ += delta;
  total_free_nodes_ += node_delta;
  // One walk up the tree for the counters and the index: the subtree counts of both
  // buckets sit in the switch's row of switch_bucket_nodes_.
  const std::size_t buckets = bucket_nodes_.size();
  for (SwitchId s : switch_chain(cell.leaf)) {
    switch_free_gpus_[s.index()] += delta;
    switch_free_nodes_[s.index()] += node_delta;
    std::int32_t* row = &switch_bucket_nodes_[s.index() * buckets];
    --row[from];
    ++row[to];
  }
  if (cell.domain.valid()) {
    domain_free_gpus_[cell.domain.index()] += delta;
    domain_free_nodes_[cell.domain.index()] += node_delta;
  }
}

// The length of the run of GPUs at the front of `gpus` that belong to node n: a node's GPUs
// are the ids first_gpu .. first_gpu + gpus - 1 (Cluster), so the test needs no lookup.
// allocate/release touch, per node, lines of arrays larger than L1: the GPUs' cells, the
// node's cell and free counter. Each loop asks the CPU for them a few nodes ahead, so that
// the misses of consecutive nodes overlap. Prefetches are hints: no fault, no effect on
// results. (Tried and slower, 2026-12-07: a first pass over all GPUs noting node runs, then
// one over the runs; and a third stage prefetching each node's bucket slot.)
namespace {
constexpr std::size_t kPrefetchGpus = 32;  // four 8-GPU nodes ahead
}  // namespace

void AllocationState::prefetch_gpu(std::span<const GpuId> gpus, std::size_t i) const {
  if (i + kPrefetchGpus < gpus.size() && gpus[i + kPrefetchGpus].index() < gpu_cell_.size())
    __builtin_prefetch(&gpu_cell_[gpus[i + kPrefetchGpus].index()]);
}

// Only after the GPU's own cell was read (validated, or prefetched twice as far ahead).
void AllocationState::prefetch_node(std::span<const GpuId> gpus, std::size_t i) const {
  if (i + kPrefetchGpus / 2 < gpus.size()) {
    const NodeId n = gpu_cell_[gpus[i + kPrefetchGpus / 2].index()].node;
    __builtin_prefetch(&node_cell_[n.index()]);
    __builtin_prefetch(&node_free_[n.index()]);
  }
}

// The length of the run of GPUs at the front of `gpus` that belong to node n: a node's GPUs
// are the ids first_gpu .. first_gpu + gpus - 1 (Cluster), so the test needs no lookup.
std::size_t AllocationState::node_run(NodeId n, std::span<const GpuId> gpus) const {
  const NodeCell& cell = node_cell_[n.index()];
  std::size_t k = 0;
  while (k < gpus.size() && gpus[k].value - cell.first_gpu < std::uint32_t{cell.gpus}) ++k;
  return k;
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
    for (std::size_t i = 0; i < marked; ++i) gpu_cell_[gpus[i].index()].owner = kFree;
  };
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const GpuId g = gpus[i];
    if (i % 8 == 0) prefetch_gpu(gpus, i);  // one line holds 8 GPUs' cells
    if (!g.valid() || g.index() >= gpu_cell_.size()) {
      undo();
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("job '{}': GPU id {} is not in the cluster", job_id, g.value));
    }
    const JobSlot o = gpu_cell_[g.index()].owner;
    if (o != kFree) {
      undo();
      const NodeId n = gpu_cell_[g.index()].node;
      std::string who = o == kPending ? std::string(job_id) + " (listed twice)" : job_name_[o];
      return make_error(ErrorCode::kInfeasible, fmt::format("GPU {}:{} is already owned by job '{}'",
                                                            cluster_->node_name(n), cluster_->gpu_local_index(g), who));
    }
    gpu_cell_[g.index()].owner = kPending;
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
  for (std::size_t i = 0; i < gpus.size();) {
    prefetch_node(gpus, i);
    const NodeId n = gpu_cell_[gpus[i].index()].node;
    const std::size_t run = node_run(n, gpus.subspan(i));
    for (std::size_t k = i; k < i + run; ++k) gpu_cell_[gpus[k].index()].owner = slot;
    adjust(n, -static_cast<int>(run));
    i += run;
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
  for (std::size_t i = 0; i < gpus.size();) {
    prefetch_gpu(gpus, i);
    prefetch_node(gpus, i);
    const NodeId n = gpu_cell_[gpus[i].index()].node;
    const std::size_t run = node_run(n, std::span<const GpuId>(gpus).subspan(i));
    for (std::size_t k = i; k < i + run; ++k) gpu_cell_[gpus[k].index()].owner = kFree;
    adjust(n, static_cast<int>(run));
    i += run;
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
  const JobSlot o = gpu_cell_[g.index()].owner;
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
      if (gpu_cell_[cluster_->node_gpu(n, l).index()].owner != kFree) ++used;
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
      if (gpu_cell_[g.index()].owner != slot)
        return make_error(ErrorCode::kValidation,
                          fmt::format("job '{}' lists GPU {} which it does not own", name, g.value));
    owned += job_gpus_[slot].size();
  }
  std::size_t marked = static_cast<std::size_t>(
      std::count_if(gpu_cell_.begin(), gpu_cell_.end(), [](const GpuCell& c) { return c.owner != kFree; }));
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
      if (node_cell_[n.index()].bucket_pos != k || o.node_bucket(n) != static_cast<int>(b)) return false;
    }
  }
  return true;
}

}  // namespace toposched
