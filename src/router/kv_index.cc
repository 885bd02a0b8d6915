#include "router/kv_index.h"

#include <algorithm>

#include <fmt/format.h>
#include <xxhash.h>

namespace toposched::router {

std::uint64_t local_block_hash(std::uint64_t block_id) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(block_id >> (8 * i));
  return XXH3_64bits_withSeed(bytes, sizeof bytes, kDynamoHashSeed);
}

std::uint64_t chain_hash(std::uint64_t parent_sequence_hash, std::uint64_t local_hash) {
  unsigned char bytes[16];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<unsigned char>(parent_sequence_hash >> (8 * i));
    bytes[8 + i] = static_cast<unsigned char>(local_hash >> (8 * i));
  }
  return XXH3_64bits_withSeed(bytes, sizeof bytes, kDynamoHashSeed);
}

void sequence_hashes(std::span<const std::uint64_t> block_ids, std::vector<std::uint64_t>& out) {
  out.clear();
  out.reserve(block_ids.size());
  for (std::size_t i = 0; i < block_ids.size(); ++i) {
    std::uint64_t local = local_block_hash(block_ids[i]);
    out.push_back(i == 0 ? local : chain_hash(out.back(), local));
  }
}

std::vector<std::uint64_t> sequence_hashes(std::span<const std::uint64_t> block_ids) {
  std::vector<std::uint64_t> out;
  sequence_hashes(block_ids, out);
  return out;
}

WorkerSet WorkerSet::first(int n) {
  WorkerSet s;
  for (int w = 0; w < n; ++w) s.set(w);
  return s;
}

KvIndex::KvIndex(int workers) { set_workers(workers); }

void KvIndex::set_workers(int workers) {
  workers = std::clamp(workers, 0, kMaxWorkers);
  for (int w = workers; w < workers_; ++w) clear(w);
  workers_ = workers;
  per_worker_.resize(static_cast<std::size_t>(workers), 0);
}

void KvIndex::store(int worker, std::uint64_t sequence_hash) {
  WorkerSet& s = holders_[sequence_hash];
  if (!s.test(worker)) {
    s.set(worker);
    ++per_worker_[static_cast<std::size_t>(worker)];
  }
}

void KvIndex::remove(int worker, std::uint64_t sequence_hash) {
  auto it = holders_.find(sequence_hash);
  if (it == holders_.end() || !it->second.test(worker)) return;
  it->second.reset(worker);
  --per_worker_[static_cast<std::size_t>(worker)];
  if (it->second.empty()) holders_.erase(it);
}

void KvIndex::clear(int worker) {
  if (worker < 0 || worker >= workers_) return;
  for (auto it = holders_.begin(); it != holders_.end();) {
    it->second.reset(worker);
    it = it->second.empty() ? holders_.erase(it) : std::next(it);
  }
  per_worker_[static_cast<std::size_t>(worker)] = 0;
}

Result<void> KvIndex::apply(const KvEvent& event) {
  if (event.worker < 0 || event.worker >= workers_)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("KV event for worker {}, expected 0..{}", event.worker, workers_ - 1));
  const int w = event.worker;
  if (const auto* stored = std::get_if<KvStored>(&event.data)) {
    if (stored->parent_hash) {
      auto it = holders_.find(*stored->parent_hash);
      if (it == holders_.end() || !it->second.test(w))
        return make_error(ErrorCode::kNotFound, fmt::format("Stored event of worker {}: parent block {} is not cached there", w, *stored->parent_hash));
    }
    for (const StoredBlock& b : stored->blocks) store(w, b.block_hash);
  } else if (const auto* removed = std::get_if<KvRemoved>(&event.data)) {
    for (std::uint64_t h : removed->block_hashes) remove(w, h);
  } else {
    clear(w);
  }
  return {};
}

bool KvIndex::holds(int worker, std::uint64_t sequence_hash) const {
  auto it = holders_.find(sequence_hash);
  return it != holders_.end() && worker >= 0 && worker < workers_ && it->second.test(worker);
}

std::vector<std::uint64_t> KvIndex::blocks_of(int worker) const {
  std::vector<std::uint64_t> out;
  if (worker < 0 || worker >= workers_) return out;
  for (const auto& [h, s] : holders_)
    if (s.test(worker)) out.push_back(h);
  std::sort(out.begin(), out.end());
  return out;
}

int KvIndex::longest_prefixes(std::span<const std::uint64_t> sequence, std::vector<int>& overlap) const {
  overlap.assign(static_cast<std::size_t>(workers_), 0);
  WorkerSet alive = WorkerSet::first(workers_);
  int depth = 0;
  for (std::uint64_t h : sequence) {
    auto it = holders_.find(h);
    if (it == holders_.end()) break;
    alive &= it->second;
    if (alive.empty()) break;
    ++depth;
    alive.for_each([&](int w) { overlap[static_cast<std::size_t>(w)] = depth; });
  }
  return depth;
}

}  // namespace toposched::router
