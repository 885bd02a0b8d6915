// The router's view of which worker caches which KV blocks, fed by KV events in Dynamo's
// schema (lib/llm/src/kv_router/protocols.rs: KvCacheEventData::Stored {parent_hash,
// blocks: [{block_hash, tokens_hash}]}, Removed {block_hashes}, Cleared).
//
// Blocks are named by chained sequence hashes as Dynamo computes them
// (lib/tokens: compute_block_hash / compute_seq_hash, XXH3-64 with seed 1337): a block's
// local hash is XXH3 of its content (here the trace's block id, 8 bytes little-endian); the
// first block's sequence hash is its local hash, each next one XXH3 of (parent sequence
// hash, local hash). A sequence hash therefore names a whole prefix, so the index is one
// hash map from sequence hash to the set of workers holding that block: the longest cached
// prefix of every worker at once costs one lookup and one bitset AND per prompt block
// (O(prefix length), independent of the number of workers up to kMaxWorkers).
//
// Thread-safety: const methods may run concurrently; apply() and the mutators need
// exclusive access (the service guards the index with its own mutex).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <variant>
#include <vector>

#include "topology/error.h"

namespace toposched::router {

inline constexpr std::uint64_t kDynamoHashSeed = 1337;
inline constexpr int kMaxWorkers = 256;

// Dynamo's chained sequence hashes of a prompt whose blocks have these content ids.
std::vector<std::uint64_t> sequence_hashes(std::span<const std::uint64_t> block_ids);
void sequence_hashes(std::span<const std::uint64_t> block_ids, std::vector<std::uint64_t>& out);
std::uint64_t local_block_hash(std::uint64_t block_id);
std::uint64_t chain_hash(std::uint64_t parent_sequence_hash, std::uint64_t local_hash);

// A set of worker indices below kMaxWorkers.
class WorkerSet {
 public:
  void set(int w) { words_[static_cast<std::size_t>(w) >> 6] |= std::uint64_t{1} << (w & 63); }
  void reset(int w) { words_[static_cast<std::size_t>(w) >> 6] &= ~(std::uint64_t{1} << (w & 63)); }
  bool test(int w) const { return (words_[static_cast<std::size_t>(w) >> 6] >> (w & 63)) & 1; }
  bool empty() const {
    for (std::uint64_t x : words_)
      if (x) return false;
    return true;
  }
  WorkerSet& operator&=(const WorkerSet& o) {
    for (std::size_t i = 0; i < words_.size(); ++i) words_[i] &= o.words_[i];
    return *this;
  }
  static WorkerSet first(int n);  // {0, ..., n-1}
  // Calls f(w) for each member in increasing order.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < words_.size(); ++i)
      for (std::uint64_t x = words_[i]; x; x &= x - 1) f(static_cast<int>(i * 64 + static_cast<std::size_t>(std::countr_zero(x))));
  }

 private:
  std::array<std::uint64_t, kMaxWorkers / 64> words_{};
};

struct StoredBlock {
  std::uint64_t block_hash = 0;   // sequence hash
  std::uint64_t tokens_hash = 0;  // local hash
};
struct KvStored {
  std::optional<std::uint64_t> parent_hash;
  std::vector<StoredBlock> blocks;
};
struct KvRemoved {
  std::vector<std::uint64_t> block_hashes;
};
struct KvCleared {};
using KvEventData = std::variant<KvStored, KvRemoved, KvCleared>;

struct KvEvent {
  int worker = 0;
  std::uint64_t event_id = 0;
  KvEventData data;
};

class KvIndex {
 public:
  explicit KvIndex(int workers = 0);

  int workers() const { return workers_; }
  void set_workers(int workers);  // drops what workers >= the new count held

  // Errors: kInvalidArgument for a worker out of range, kNotFound for a Stored event whose
  // parent the worker does not hold (Dynamo drops those too; the index is unchanged).
  Result<void> apply(const KvEvent& event);

  void store(int worker, std::uint64_t sequence_hash);
  void remove(int worker, std::uint64_t sequence_hash);
  void clear(int worker);

  // overlap[w] = number of leading blocks of `sequence` worker w holds, for every worker
  // (overlap.size() == workers()). Returns the largest overlap.
  int longest_prefixes(std::span<const std::uint64_t> sequence, std::vector<int>& overlap) const;

  std::size_t blocks(int worker) const { return per_worker_[static_cast<std::size_t>(worker)]; }
  std::size_t distinct_blocks() const { return holders_.size(); }
  bool holds(int worker, std::uint64_t sequence_hash) const;
  // The blocks worker w holds, sorted (O(distinct blocks): for dumps, not for routing).
  std::vector<std::uint64_t> blocks_of(int worker) const;

 private:
  int workers_ = 0;
  std::unordered_map<std::uint64_t, WorkerSet> holders_;
  std::vector<std::size_t> per_worker_;
};

}  // namespace toposched::router
