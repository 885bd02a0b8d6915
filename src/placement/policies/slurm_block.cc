// slurm-block: Slurm's topology/block node selection (eval_nodes_block() in
// src/plugins/topology/block/eval_nodes_block.c, and _get_one_res() in
// src/plugins/select/cons_tres/job_test.c), re-implemented from reading Slurm 26.05.3
// (tag slurm-26-05-3-1, 56fe8678) and 25.11.7 (slurm-25-11-7-1), on the blocks and levels of
// the topology.conf that `toposched export --to slurm-block` writes for the cluster (its
// BlockName lines in file order, placeholders included, and its BlockSizes). The rules, with
// the lines of eval_nodes_block.c at 26.05.3 (docs/placement.md has the full list):
//
//  - Base blocks are the file's blocks; the base size is the first BlockSizes value and the
//    levels are the sizes (level k joins 2^k consecutive base blocks). The job's level comes
//    from its size alone: ceil(log2(base blocks it needs)), rounded up to a configured level
//    (_get_block_level, 226-244); no level that large: the whole topology is one block.
//  - Of the blocks of that level with enough available nodes (within max_llblock lower-level
//    blocks, 626-661), the one with the fewest available nodes; of equals the *last* in file
//    order (`bnc <= block_node_cnt`, 672-679). None: the job pends ("unable to find block",
//    688); there is no widening to a larger level.
//  - Inside the block, base blocks are taken one at a time (_choose_best_bblock, 65-172):
//    first minimising lower-level blocks (llblocks), then base blocks: one that fits the rest
//    beats one that does not, of two that fit the smaller (ties: the later), of two that do
//    not the larger (ties: the later); nodes of each in node order (1013-1075).
//  - --segment=S: one segment at a time, each through the whole choice again on the nodes
//    left (1101-1128), so segments may land in different blocks; with
//    --consolidate-segments every segment stays in one block of the level that holds the
//    whole job (362-386, 617-622, 700-709). A segment larger than the job is ignored, one that
//    does not divide it is refused (321-332).
//  - 26.05: a one-node job (-N 1) takes the first node that fits in node order, ignoring
//    blocks (_get_one_res, job_test.c 801-870, gated at 1024-1026); 25.11 has no such path.
//  - A GPU-count job (--gpus=K without -N) needs one node at least, so its level is one base
//    block, chosen by available nodes like any other; its nodes are taken in node order until
//    K GPUs are reached (each node gives all its free GPUs); a base block with fewer than K
//    free GPUs makes the job pend.
// Not modelled: node weights (all equal), CPUs (plentiful), required nodes, --spread-segments,
// hres. Thread-safe: the block table, and the counts of the last state seen (CountsMemo), are
// kept per thread.
#include <algorithm>
#include <array>
#include <bit>
#include <memory>

#include <fmt/format.h>

#include "formats/topograph_blocks.h"
#include "placement/policies/policies.h"
#include "placement/select_util.h"

namespace toposched {
namespace {

constexpr int kMaxBlockLevels = 16;  // MAX_BLOCK_LEVELS

// The block table Slurm builds from the exported topology.conf (block_record.c).
struct BlockTable {
  std::vector<std::vector<NodeId>> bblocks;  // file order; a placeholder is empty; nodes in node order
  int base = 1;                              // bblock_node_cnt: the first BlockSizes value
  std::uint32_t levels = 0;                  // bit k: a level of 2^k base blocks
  std::vector<long> sizes;
  // Per node: its base block, -1 for none. Empty when a node is in two base blocks (the
  // per-block counts then cannot be kept per node, and the search scans).
  std::vector<int> node_bblock;
  // Per base block: the switch whose subtree holds exactly its nodes (invalid for a
  // placeholder), so its available nodes are that switch's row of the free-GPU index
  // (AllocationState::switch_bucket_nodes). Empty when some base block is not one switch's
  // subtree (blocks cut from accelerator domains): the counts then come from the buckets'
  // node lists.
  std::vector<SwitchId> bblock_switch;
  std::uint64_t generation = 0;  // cached_table's build number on this thread (CountsMemo's key)
};

// The switch whose subtree is exactly `nodes` (sorted, non-empty): all of them hang from
// one switch and it has no other node below it, directly or through child switches.
SwitchId subtree_switch_of(const Cluster& c, const std::vector<NodeId>& nodes) {
  const SwitchId s = c.node_switch(nodes.front());
  if (!s.valid() || c.switch_subtree_nodes(s).size() != nodes.size()) return SwitchId();
  for (NodeId n : nodes)
    if (c.node_switch(n) != s) return SwitchId();
  return s;
}

Result<BlockTable> block_table(const Cluster& c, const std::vector<long>& sizes) {
  TopographBlockLayout layout(c);
  if (layout.empty())
    return make_error(ErrorCode::kInfeasible,
                      "the cluster has no blocks (no accelerator domains and no leaf switches)");
  TOPOSCHED_TRY(blocks, layout.cluster_blocks(sizes, std::nullopt));
  BlockTable t;
  t.sizes = blocks.sizes;
  t.base = static_cast<int>(blocks.sizes.front());
  for (long s : blocks.sizes) t.levels |= 1u << std::countr_zero(static_cast<unsigned long>(s / t.base));
  for (const SlurmBlock& b : blocks.blocks) {
    std::vector<NodeId> nodes;
    for (const std::string& name : b.nodes)
      if (auto n = c.find_node(name)) nodes.push_back(*n);
    std::sort(nodes.begin(), nodes.end());
    t.bblocks.push_back(std::move(nodes));
  }
  t.node_bblock.assign(c.node_count(), -1);
  for (std::size_t i = 0; i < t.bblocks.size(); ++i)
    for (NodeId n : t.bblocks[i]) {
      if (t.node_bblock[n.index()] >= 0) {
        t.node_bblock.clear();
        return t;
      }
      t.node_bblock[n.index()] = static_cast<int>(i);
    }
  t.bblock_switch.reserve(t.bblocks.size());
  for (const std::vector<NodeId>& nodes : t.bblocks) {
    const SwitchId s = nodes.empty() ? SwitchId() : subtree_switch_of(c, nodes);
    if (!nodes.empty() && !s.valid()) {
      t.bblock_switch.clear();
      break;
    }
    t.bblock_switch.push_back(s);
  }
  return t;
}

// Per thread, for the last cluster (AllocationState::cluster_key) and sizes seen (the
// simulator places many jobs on one).
// Shared, so that a FreedStateCheck keeps the table it was made with when this thread
// builds another one.
Result<std::shared_ptr<const BlockTable>> cached_table(const AllocationState& s, const std::vector<long>& sizes) {
  thread_local std::uint64_t key = 0;
  thread_local std::vector<long> for_sizes;
  thread_local std::shared_ptr<const BlockTable> table;
  if (!table || key != s.cluster_key() || for_sizes != sizes) {
    table.reset();
    TOPOSCHED_TRY(t, block_table(s.cluster(), sizes));
    thread_local std::uint64_t built = 0;
    t.generation = ++built;
    table = std::make_shared<const BlockTable>(std::move(t));
    key = s.cluster_key();
    for_sizes = sizes;
  }
  return table;
}

// The buckets whose nodes have capacity for `r` (capacity_indexed requests).
void buckets_with_capacity(const AllocationState& s, const JobRequest& r, std::vector<int>& out) {
  out.clear();
  for (int b = 0; b < s.bucket_count(); ++b)
    if (bucket_capacity(s, r, b) > 0) out.push_back(b);
}

// The available nodes per base block (`out`, one entry per base block) of the nodes in the
// buckets `with_capacity`: the base block's switch row of the free-GPU index where base
// blocks are switches, else the buckets' nodes counted per base block.
void count_available(const AllocationState& s, const BlockTable& t, const std::vector<int>& with_capacity,
                     std::vector<int>& out) {
  out.assign(t.bblocks.size(), 0);
  if (!t.bblock_switch.empty()) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      const SwitchId sw = t.bblock_switch[i];
      if (!sw.valid()) continue;  // an empty block (a BlockName without Nodes) has no switch
      std::int64_t sum = 0;
      for (int b : with_capacity) sum += s.switch_bucket_nodes(sw, b);
      out[i] = static_cast<int>(sum);
    }
    return;
  }
  for (int b : with_capacity)
    for (NodeId n : s.bucket_nodes(b))
      if (const int bb = t.node_bblock[n.index()]; bb >= 0) ++out[static_cast<std::size_t>(bb)];
}

// Per thread: the available nodes per base block on the last state seen
// (AllocationState::stamp), table and set of buckets with capacity, and the block chosen on
// them for the first segment per segment size. A backfill pass asks for many jobs on one
// state, most of which fail and change nothing; the jobs of one shape (the same buckets
// with capacity, the same node count) then get their answer without a pass over the blocks.
// Exact: the counts are a function of those keys, and the first segment's block (without
// --consolidate-segments) a function of the counts and the segment's size.
struct CountsMemo {
  std::uint64_t stamp = 0;  // 0: empty (no state has stamp 0)
  std::uint64_t table = 0;  // BlockTable::generation
  std::vector<int> with_capacity;
  std::vector<int> counts;
  std::vector<std::pair<int, int>> first_block;  // (segment nodes, block or -1)

  bool holds(const AllocationState& s, const BlockTable& t, const std::vector<int>& buckets) const {
    return stamp == s.stamp() && table == t.generation && with_capacity == buckets;
  }
  const int* block_for(int seg_nodes) const {
    for (const auto& [n, b] : first_block)
      if (n == seg_nodes) return &b;
    return nullptr;
  }
};

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// bit_ffs_from_bit / bit_fls_from_bit on the level bits.
int first_level_from(std::uint32_t levels, int bit) {
  for (int k = std::max(bit, 0); k < kMaxBlockLevels; ++k)
    if (levels & (1u << k)) return k;
  return -1;
}
int last_level_from(std::uint32_t levels, int bit) {
  for (int k = std::min(bit, kMaxBlockLevels - 1); k >= 0; --k)
    if (levels & (1u << k)) return k;
  return -1;
}

// _get_block_level: the job's level (-1: larger than every level) and the level below it.
int block_level_of(const BlockTable& t, int rem_nodes, int* llblock_level) {
  const int bblocks = ceil_div(rem_nodes, t.base);
  if (bblocks <= 0) {
    if (llblock_level) *llblock_level = 0;
    return -1;
  }
  int level = 0;
  while ((1 << level) < bblocks) ++level;
  if (llblock_level) *llblock_level = level > 0 ? std::max(0, last_level_from(t.levels, level - 1)) : 0;
  return first_level_from(t.levels, level);
}

// The nodes available to the job (node_capacity > 0), less those taken or ruled out by
// earlier segments. Dense: one flag per node, filled by the caller (the scan of every node).
// Lazy (the free-GPU index): a node's flag is read from its bucket when asked, and the few
// nodes ruled out since are kept in a NodeMap, so a decision costs what the blocks it
// looks at cost, not one pass over the cluster's nodes. Both answer alike for every node.
class Avail {
 public:
  explicit Avail(std::vector<char> flags) : dense_(std::move(flags)) {}
  Avail(const AllocationState& s, const JobRequest& r) : s_(&s), r_(&r) {}

  bool operator[](NodeId n) const {
    if (!s_) return dense_[n.index()] != 0;
    return bucket_capacity(*s_, *r_, s_->node_bucket(n)) > 0 && off_.get(n.value) == 0;
  }
  void clear(NodeId n) {
    if (!s_) {
      dense_[n.index()] = 0;
    } else {
      off_[n.value] = 1;
    }
  }

 private:
  std::vector<char> dense_;
  const AllocationState* s_ = nullptr;  // lazy when set (capacity_indexed requests only)
  const JobRequest* r_ = nullptr;
  NodeMap<char> off_;
};

// One run of eval_nodes_block for `rem_nodes` nodes (a segment, or the whole job) over the
// nodes marked in `avail`. Fills `chosen` with the nodes in the order taken. The available
// nodes of a base block are counted over its nodes, or read from `counts` (per base block,
// kept equal to those counts by the caller) when given.
class BlockEval {
 public:
  BlockEval(const BlockTable& t, int block_level, int llblock_level, const std::vector<int>* counts)
      : t_(t), counts_(counts), count_(static_cast<int>(t.bblocks.size())), ll_level_(llblock_level) {
    per_block_ = block_level < 0 ? count_ : (1 << block_level);
    blocks_ = block_level < 0 ? 1 : ceil_div(count_, per_block_);
    per_ll_ = 1 << llblock_level;
  }
  int blocks() const { return blocks_; }
  // Whether choose_block and fill limit a request of `rem_nodes` to its fullest lower-level
  // blocks (use_ll): the level is not exactly max_ll lower-level blocks.
  bool limits_llblocks(int rem_nodes) const { return per_block_ != per_ll_ * ceil_div(rem_nodes, per_ll_ * t_.base); }
  int per_block() const { return per_block_; }

  // Available nodes per block of the job's level (nodes_on_block).
  std::vector<int> nodes_on_blocks(const Avail& avail) const {
    std::vector<int> out;
    sums_of(avail, per_block_, out);
    return out;
  }

  // The block to use (lines 613-686), -1 when none has room. `allowed_block` (consolidated
  // segments) skips the others.
  int choose_block(const Avail& avail, int rem_nodes, const std::vector<char>* allowed_block) {
    const int max_ll = ceil_div(rem_nodes, per_ll_ * t_.base);
    const bool use_ll = per_block_ != per_ll_ * max_ll;
    std::vector<int>& on_block = on_block_scratch_;
    sums_of(avail, per_block_, on_block);
    std::vector<int>& on_ll = on_ll_scratch_;
    if (use_ll) sums_of(avail, per_ll_, on_ll);
    int best = -1, best_count = 0;
    for (int b = 0; b < blocks_; ++b) {
      if (allowed_block && !(*allowed_block)[static_cast<std::size_t>(b)]) continue;
      const int bnc = on_block[static_cast<std::size_t>(b)];
      int avail_bnc = bnc;
      if (use_ll) {  // the max_ll fullest lower-level blocks of this block
        const int per = per_block_ / per_ll_, offset = b * per;
        const int n = std::min(per, static_cast<int>(on_ll.size()) - offset);
        std::vector<int>& lls = lls_scratch_;
        lls.assign(on_ll.begin() + offset, on_ll.begin() + offset + n);
        std::sort(lls.rbegin(), lls.rend());
        avail_bnc = 0;
        for (int j = 0; j < std::min(max_ll, n); ++j) avail_bnc += lls[static_cast<std::size_t>(j)];
      }
      if (avail_bnc < rem_nodes) continue;
      if (best < 0 || bnc <= best_count) {  // fewest nodes; of equals the last
        best = b;
        best_count = bnc;
      }
    }
    return best;
  }

  // Lines 969-1075: base blocks of `block` one at a time, nodes in node order. `take` is
  // called per node and returns true when the job (segment) is satisfied.
  template <class Take>
  bool fill(int block, const Avail& avail, int rem_nodes, Take&& take) {
    const int max_ll0 = ceil_div(rem_nodes, per_ll_ * t_.base);
    const bool use_ll = per_block_ != per_ll_ * max_ll0;
    int max_ll = max_ll0;
    required_.assign(static_cast<std::size_t>(count_), 0);
    on_bb_.assign(static_cast<std::size_t>(count_), 0);
    on_ll_.assign(static_cast<std::size_t>(ceil_div(count_, per_ll_)), 0);
    // The base blocks of `block`: [first, end).
    const int first = block * per_block_, end = std::min(count_, (block + 1) * per_block_);
    for (int i = first; i < end; ++i) {
      on_bb_[static_cast<std::size_t>(i)] = on_bblock(i, avail);
      on_ll_[static_cast<std::size_t>(i / per_ll_)] += on_bb_[static_cast<std::size_t>(i)];
    }
    int prev = rem_nodes + 1;
    while (prev != rem_nodes) {
      prev = rem_nodes;
      Best best;
      for (int i = first; i < end; ++i)
        if (!required_[static_cast<std::size_t>(i)]) choose_bblock(i, rem_nodes, use_ll, best);
      if (best.inx < 0) break;
      if (max_ll <= 0 && !best.same_block) break;
      required_[static_cast<std::size_t>(best.inx)] = 1;
      for (NodeId n : t_.bblocks[static_cast<std::size_t>(best.inx)]) {
        if (!avail[n]) continue;
        --rem_nodes;
        if (take(n, rem_nodes)) return true;
      }
      if (!best.same_block) --max_ll;
    }
    return false;
  }

 private:
  struct Best {
    int inx = -1;
    bool fit = false;
    bool same_block = true;
  };
  const BlockTable& t_;
  const std::vector<int>* counts_;
  int count_, ll_level_;
  int per_block_ = 1, blocks_ = 1, per_ll_ = 1;
  std::vector<char> required_;
  std::vector<int> on_bb_, on_ll_;
  std::vector<int> on_block_scratch_, on_ll_scratch_, lls_scratch_;  // choose_block's, kept for their buffers

  int on_bblock(int i, const Avail& avail) const {
    if (counts_) return (*counts_)[static_cast<std::size_t>(i)];
    int k = 0;
    for (NodeId n : t_.bblocks[static_cast<std::size_t>(i)]) k += avail[n] ? 1 : 0;
    return k;
  }
  // Available nodes per group of `per` consecutive base blocks (the last one may be short),
  // summed in a local so that the compiler keeps it in a register.
  void sums_of(const Avail& avail, int per, std::vector<int>& out) const {
    out.assign(per > 0 ? static_cast<std::size_t>(ceil_div(count_, per)) : 1, 0);
    for (std::size_t g = 0; g < out.size(); ++g) {
      const int first = static_cast<int>(g) * per, end = std::min(count_, first + per);
      int sum = 0;
      if (counts_) {
        const int* c = counts_->data();
        for (int i = first; i < end; ++i) sum += c[i];
      } else {
        for (int i = first; i < end; ++i) sum += on_bblock(i, avail);
      }
      out[g] = sum;
    }
  }
  bool same_ll(int a, int b) const { return a >= 0 && (a >> ll_level_) == (b >> ll_level_); }

  // _choose_best_bblock (lines 65-172).
  void choose_bblock(int i, int rem_nodes, bool use_ll, Best& best) const {
    const int cnt = on_bb_[static_cast<std::size_t>(i)];
    const bool fit = cnt >= rem_nodes;
    auto take = [&](bool same) { best = Best{i, fit, same}; };
    if (use_ll && !same_ll(best.inx, i)) {
      bool same = false;
      const int lo = i & (~0 << ll_level_), hi = i | ~(~0 << ll_level_);
      for (int j = lo; j < count_ && j <= hi && !same; ++j) same = required_[static_cast<std::size_t>(j)] != 0;
      if (best.inx < 0 || (same && !best.same_block)) return take(same);
      if (!same && best.same_block) return;
      const int best_ll = on_ll_[static_cast<std::size_t>(best.inx >> ll_level_)];
      const int ll = on_ll_[static_cast<std::size_t>(i >> ll_level_)];
      const bool ll_fit = ll >= rem_nodes, best_ll_fit = best_ll >= rem_nodes;
      if (ll_fit && !best_ll_fit) return take(same);
      if (!ll_fit && best_ll_fit) return;
      if (ll_fit && best_ll_fit) {
        if (ll < best_ll) return take(same);
        if (ll > best_ll) return;
      } else {
        if (ll > best_ll) return take(same);
        if (ll < best_ll) return;
      }
    }
    const int best_cnt = best.inx >= 0 ? on_bb_[static_cast<std::size_t>(best.inx)] : 0;
    if (best.inx < 0 || (fit && !best.fit) || (!fit && !best.fit && cnt >= best_cnt) || (fit && cnt <= best_cnt)) {
      best.inx = i;
      best.fit = fit;
    }
  }
};

// slurm-block's FreedStateCheck for a one-segment request, from the available nodes per
// base block of the base state, kept as GPUs are freed and taken back: a node's bucket on
// the freed state is its base bucket plus its freed GPUs (same GPU count), so whether it has
// capacity is bucket_capacity of that bucket. select() computes its counts on the freed state
// as the same function of the buckets, so choose_block() on them is select()'s choice:
//  - no block of the level has room: select() fails ("no block of the level ... has room");
//  - a block for a whole-node request (-N, no --gpus=K alone) when the level needs no
//    lower-level limit (use_ll false, as on every level of a file with all power-of-two
//    sizes): fill() takes base blocks of that block, each with all its available nodes and
//    the larger first while none holds the rest, until the request's nodes are reached,
//    which the block's count guarantees, so select() succeeds (and check_placement with it);
//  - otherwise (GPU-count requests, lower-level limits) fill() may still fail: not known.
// Invariant: counts_[i] is the available nodes of base block i on the freed state.
class BlockRoomCheck final : public FreedStateCheck {
 public:
  BlockRoomCheck(const AllocationState& base, const JobRequest& r, std::shared_ptr<const BlockTable> table,
                 int job_nodes)
      : s_(base), table_(std::move(table)), nodes_(job_nodes), freed_(base.cluster().node_count(), 0) {
    std::vector<int> with_capacity;
    buckets_with_capacity(base, r, with_capacity);
    has_capacity_.assign(static_cast<std::size_t>(base.bucket_count()), 0);
    for (int b : with_capacity) has_capacity_[static_cast<std::size_t>(b)] = 1;
    count_available(base, *table_, with_capacity, counts_);
    int ll_level = 0;
    const int level = block_level_of(*table_, job_nodes, &ll_level);
    eval_.emplace(*table_, level, ll_level, &counts_);
    fits_known_ = r.nodes > 0 && !eval_->limits_llblocks(job_nodes);
  }
  void free_gpus(std::span<const GpuId> gpus) override { move(gpus, 1); }
  void unfree_gpus(std::span<const GpuId> gpus) override { move(gpus, -1); }
  Answer answer() override {
    if (eval_->choose_block(no_avail_, nodes_, nullptr) < 0) return Answer::kFails;
    return fits_known_ ? Answer::kFits : Answer::kNotKnown;
  }

 private:
  // Frees (sign 1) or takes back (-1) `gpus`, a node's GPUs in a run where they come so.
  void move(std::span<const GpuId> gpus, int sign) {
    const Cluster& c = s_.cluster();
    const int* node_bblock = table_->node_bblock.data();
    const char* has_capacity = has_capacity_.data();
    for (std::size_t i = 0; i < gpus.size();) {
      const NodeId n = c.gpu_node(gpus[i]);
      int k = 0;
      for (; i < gpus.size() && c.gpu_node(gpus[i]) == n; ++i) ++k;
      const int bb = node_bblock[n.index()];
      if (bb < 0) continue;  // in no base block: counted nowhere
      int& freed = freed_[n.index()];
      const int bucket = s_.node_bucket(n);  // on the base state
      const bool before = has_capacity[bucket + freed] != 0;
      freed += sign * k;
      const bool after = has_capacity[bucket + freed] != 0;
      if (before != after) counts_[static_cast<std::size_t>(bb)] += after ? 1 : -1;
    }
  }

  const AllocationState& s_;
  std::shared_ptr<const BlockTable> table_;
  int nodes_;
  bool fits_known_ = false;         // a block found means select() succeeds (see above)
  std::vector<char> has_capacity_;  // per bucket: bucket_capacity(base, r, b) > 0
  std::vector<int> counts_;
  std::vector<int> freed_;                     // per node: GPUs freed on it
  std::optional<BlockEval> eval_;              // on counts_
  const Avail no_avail_{std::vector<char>{}};  // choose_block reads counts_ only
};

// The Slurm release whose rules apply: 26.05 (default) or 25.11; older ones have no model.
Result<int> release_of(const JobRequest& r) {
  if (r.slurm_version.empty() || r.slurm_version == "26.05") return 2605;
  if (r.slurm_version == "25.11") return 2511;
  if (r.slurm_version == "22.05")
    return make_error(ErrorCode::kInvalidArgument, "slurm-block: Slurm 22.05 has no topology/block (added in 23.11)");
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("slurm-block models Slurm 25.11 and 26.05, not '{}'", r.slurm_version));
}

class SlurmBlockPolicy final : public PlacementPolicy {
 public:
  // `may_index`: count available nodes from the free-GPU index where it can (the default);
  // false keeps the scan of every node, the reference the indexed search is tested against.
  explicit SlurmBlockPolicy(bool may_index) : may_index_(may_index) {}
  std::string_view name() const override { return "slurm-block"; }
  std::string_view summary() const override {
    return "Slurm topology/block (26.05; --slurm-version 25.11): the file's blocks and levels, segments";
  }
  bool supports_segments() const override { return true; }

  // For a request select() answers from the index's counts (no node mask or GPU model, one
  // segment, not the one-node path) when no tier constraint sends choose_gpus() elsewhere.
  std::unique_ptr<FreedStateCheck> freed_state_check(const AllocationState& base, const JobRequest& r) const override {
    auto release = release_of(r);
    if (!may_index_ || !release || (*release >= 2605 && r.nodes == 1) || r.segment > 0 || r.slice_size > 0 ||
        r.required_tier_index || r.preferred_tier_index || !capacity_indexed(r, {}))
      return nullptr;
    auto table = cached_table(base, r.block_sizes);
    if (!table || (*table)->node_bblock.empty()) return nullptr;
    return std::make_unique<BlockRoomCheck>(base, r, *table, r.nodes > 0 ? r.nodes : 1);
  }

  Result<std::vector<GpuId>> select(const AllocationState& s, const JobRequest& r,
                                    const NodeMask& allowed) const override {
    TOPOSCHED_TRY(release, release_of(r));
    const Cluster& c = s.cluster();
    const int job_nodes = r.nodes > 0 ? r.nodes : 1;  // --gpus=K alone: one node at least
    if (release >= 2605 && r.nodes == 1) return first_node_that_fits(s, r, allowed);
    TOPOSCHED_TRY(table, cached_table(s, r.block_sizes));
    // Available nodes: from the free-GPU index (a node's bucket says whether it has
    // capacity; the count per base block is its switch's row of the index, or the nodes of
    // the buckets with capacity counted per base block), or by a scan of every node (the
    // reference).
    std::optional<Avail> avail;
    std::optional<std::vector<int>> counts;
    CountsMemo* memo_used = nullptr;
    if (may_index_ && capacity_indexed(r, allowed) && !table->node_bblock.empty()) {
      avail.emplace(s, r);
      thread_local std::vector<int> with_capacity;
      buckets_with_capacity(s, r, with_capacity);
      // A few memos, one per request shape in turn (whole-node and GPU-count requests
      // alternate in a backfill pass), the oldest replaced.
      thread_local std::array<CountsMemo, 4> memos;
      thread_local std::size_t next_memo = 0;
      auto held = std::find_if(memos.begin(), memos.end(),
                               [&](const CountsMemo& m) { return m.holds(s, *table, with_capacity); });
      CountsMemo& memo = held != memos.end() ? *held : memos[next_memo++ % memos.size()];
      if (held == memos.end()) {
        memo.stamp = s.stamp();
        memo.table = table->generation;
        memo.with_capacity = with_capacity;
        memo.first_block.clear();
        count_available(s, *table, with_capacity, memo.counts);
      }
      counts.emplace(memo.counts);  // a copy: segments() takes the chosen nodes off it
      memo_used = &memo;
    } else {
      std::vector<char> flags(c.node_count(), 0);
      for (std::size_t i = 0; i < c.node_count(); ++i)
        flags[i] = node_capacity(s, r, allowed, NodeId(static_cast<std::uint32_t>(i))) > 0 ? 1 : 0;
      avail.emplace(std::move(flags));
    }
    int segment = r.nodes > 0 ? r.segment : 0;
    if (segment > job_nodes) segment = 0;  // "Ignoring segment_size: larger than job size"
    if (segment > 0 && job_nodes % segment != 0)
      return make_error(
          ErrorCode::kInvalidArgument,
          fmt::format("slurm-block: --segment={} does not divide the job's {} nodes", segment, job_nodes));
    return segments(s, r, allowed, *table, *avail, counts ? &*counts : nullptr, memo_used, job_nodes, segment);
  }

 private:
  bool may_index_;

  // `counts` (when given): available nodes per base block, kept in step with `avail`;
  // `memo` (with counts): where they came from, which also keeps the first segment's block.
  static Result<std::vector<GpuId>> segments(const AllocationState& s, const JobRequest& r, const NodeMask& allowed,
                                             const BlockTable& t, Avail& avail, std::vector<int>* counts,
                                             CountsMemo* memo, int job_nodes, int segment) {
    const int seg_nodes = segment > 0 ? segment : job_nodes;
    const int count = job_nodes / seg_nodes;
    int ll_level = 0;
    const int level = block_level_of(t, seg_nodes, &ll_level);
    BlockEval eval(t, level, ll_level, counts);
    // --consolidate-segments: the block of the job's whole size that all segments share.
    std::optional<std::vector<char>> allowed_blocks;
    int per_as = 0;
    if (segment > 0 && r.consolidate_segments) {
      const int as_level = block_level_of(t, job_nodes, nullptr);
      per_as = as_level < 0 || level < 0 ? eval.blocks() : 1 << (as_level - level);
      const std::vector<int> on_block = eval.nodes_on_blocks(avail);
      std::vector<int> on_as(static_cast<std::size_t>(ceil_div(eval.blocks(), per_as)), 0);
      for (int b = 0; b < eval.blocks(); ++b)
        on_as[static_cast<std::size_t>(b / per_as)] += on_block[static_cast<std::size_t>(b)];
      allowed_blocks.emplace(static_cast<std::size_t>(eval.blocks()), 0);
      for (int b = 0; b < eval.blocks(); ++b)
        (*allowed_blocks)[static_cast<std::size_t>(b)] = on_as[static_cast<std::size_t>(b / per_as)] >= job_nodes;
    }
    std::vector<GpuId> out;
    int gpus_left = r.total_gpus;
    for (int k = 0; k < count; ++k) {
      int block;
      if (k == 0 && memo && !allowed_blocks) {  // the counts are the memo's here: nothing taken yet
        if (const int* known = memo->block_for(seg_nodes)) {
          block = *known;
        } else {
          block = eval.choose_block(avail, seg_nodes, nullptr);
          memo->first_block.emplace_back(seg_nodes, block);
        }
      } else {
        block = eval.choose_block(avail, seg_nodes, k == 0 && allowed_blocks ? &*allowed_blocks : nullptr);
      }
      if (block < 0) return no_fit(t, seg_nodes, k, count);
      if (k == 0 && allowed_blocks) {  // later segments stay in this block's consolidated block
        for (int b = 0; b < eval.blocks(); ++b)
          if (b / per_as != block / per_as)
            for (int i = b * eval.per_block();
                 i < std::min((b + 1) * eval.per_block(), static_cast<int>(t.bblocks.size())); ++i) {
              for (NodeId n : t.bblocks[static_cast<std::size_t>(i)]) avail.clear(n);
              if (counts) (*counts)[static_cast<std::size_t>(i)] = 0;
            }
      }
      std::vector<NodeId> taken;
      const bool by_gpus = r.nodes == 0;
      int gpus = 0;
      const bool ok = eval.fill(block, avail, seg_nodes, [&](NodeId n, int rem_nodes) {
        taken.push_back(n);
        gpus += node_capacity(s, r, allowed, n);
        return rem_nodes <= 0 && (!by_gpus || gpus >= gpus_left);
      });
      if (!ok)
        return make_error(
            ErrorCode::kInfeasible,
            by_gpus ? fmt::format("slurm-block: {} GPUs must come from one base block; the chosen one "
                                  "(the one with the fewest available nodes) has {} free (the job pends)",
                                  r.total_gpus, gpus)
                    : fmt::format("slurm-block: the chosen block could not give {} nodes (the job pends)", seg_nodes));
      for (NodeId n : taken) {
        const int give = std::min(node_capacity(s, r, allowed, n), gpus_left);
        take_lowest_free(s, n, give, out);
        gpus_left -= give;
        avail.clear(n);
        if (counts)
          if (const int bb = t.node_bblock[n.index()]; bb >= 0) --(*counts)[static_cast<std::size_t>(bb)];
      }
    }
    return out;
  }

  static tl::unexpected<Error> no_fit(const BlockTable& t, int seg_nodes, int k, int count) {
    std::string sizes;
    for (long x : t.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(x);
    return make_error(
        ErrorCode::kInfeasible,
        fmt::format("slurm-block: no block of the level for {} node(s){} has room (BlockSizes={}); "
                    "Slurm pends the job (\"unable to find block\") rather than use a larger level",
                    seg_nodes, count > 1 ? fmt::format(" (segment {} of {})", k + 1, count) : std::string(), sizes));
  }
};

}  // namespace

const PlacementPolicy& slurm_block_policy() {
  static const SlurmBlockPolicy p(true);
  return p;
}

const PlacementPolicy& slurm_block_scan_policy() {
  static const SlurmBlockPolicy p(false);
  return p;
}

}  // namespace toposched
