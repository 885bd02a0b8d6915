#include "router/request_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

namespace toposched::router {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Where the workers' caches report their KV events: straight into an index, or (event lag)
// into a queue that reaches the index once each event is lag_s old. Events keep their order:
// by the time they were emitted, then as emitted.
class IndexFeed {
 public:
  IndexFeed(KvIndex* index, double lag_s) : index_(index), lag_s_(lag_s) {}
  void set_now(double t) { now_ = t; }
  void store(int worker, std::uint64_t h) { emit(worker, h, true); }
  void remove(int worker, std::uint64_t h) { emit(worker, h, false); }
  // Applies every queued event due at or before t.
  void deliver_until(double t) {
    while (!pending_.empty() && pending_.top().due <= t) {
      const Pending& p = pending_.top();
      apply(p.worker, p.hash, p.store);
      pending_.pop();
    }
  }

 private:
  struct Pending {
    double due = 0;
    std::uint64_t order = 0;
    int worker = 0;
    std::uint64_t hash = 0;
    bool store = true;
    bool operator>(const Pending& o) const { return due != o.due ? due > o.due : order > o.order; }
  };
  void apply(int worker, std::uint64_t h, bool store) {
    if (store) index_->store(worker, h);
    else index_->remove(worker, h);
  }
  void emit(int worker, std::uint64_t h, bool store) {
    if (lag_s_ <= 0) return apply(worker, h, store);
    pending_.push({now_ + lag_s_, next_order_++, worker, h, store});
  }
  KvIndex* index_;
  double lag_s_;
  double now_ = 0;
  std::uint64_t next_order_ = 0;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
};

// One node's host-memory tier: the blocks its workers evicted from GPU memory, LRU, shared
// by the node's workers (each may load what another evicted). The copy out of GPU memory is
// not timed: offloading connectors copy asynchronously, beside the iterations. Its contents
// reach the router's host index as events of every worker of the node.
class HostTier {
 public:
  HostTier(long long capacity, std::vector<int> workers, IndexFeed* index)
      : capacity_(capacity), workers_(std::move(workers)), index_(index) {}
  bool contains(std::uint64_t h) const { return where_.contains(h); }
  // h becomes the most recently used block (stored first if new); the least recently used
  // ones leave beyond the capacity.
  void touch(std::uint64_t h) {
    if (auto it = where_.find(h); it != where_.end()) {
      lru_.splice(lru_.end(), lru_, it->second);
      return;
    }
    where_[h] = lru_.insert(lru_.end(), h);
    for (int w : workers_) index_->store(w, h);
    while (static_cast<long long>(lru_.size()) > capacity_) {
      const std::uint64_t old = lru_.front();
      lru_.pop_front();
      where_.erase(old);
      for (int w : workers_) index_->remove(w, old);
    }
  }

 private:
  long long capacity_;
  std::vector<int> workers_;
  IndexFeed* index_;
  std::list<std::uint64_t> lru_;
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> where_;
};

// One worker's KV cache: blocks by sequence hash; the blocks no admitted request uses are
// kept in LRU order and evicted first-in-list (into the node's host tier, when it has one).
// Every store and eviction goes to the feed.
class BlockCache {
 public:
  BlockCache(int worker, long long capacity, IndexFeed* index, HostTier* host = nullptr)
      : worker_(worker), capacity_(capacity), index_(index), host_(host) {}

  long long used() const { return static_cast<long long>(entries_.size()) + private_; }
  bool contains(std::uint64_t h) const { return entries_.contains(h); }
  int prefix(std::span<const std::uint64_t> seq) const {
    int n = 0;
    while (n < static_cast<int>(seq.size()) && entries_.contains(seq[static_cast<std::size_t>(n)])) ++n;
    return n;
  }
  // Evicts unused blocks until `need` more fit; false when they cannot.
  bool make_room(long long need) {
    if (capacity_ < 0) return true;
    while (capacity_ - used() < need && !lru_.empty()) {
      std::uint64_t h = lru_.front();
      lru_.pop_front();
      entries_.erase(h);
      index_->remove(worker_, h);
      if (host_) host_->touch(h);
    }
    return capacity_ - used() >= need;
  }
  void pin(std::uint64_t h) {
    auto [it, inserted] = entries_.try_emplace(h);
    if (inserted) index_->store(worker_, h);
    else if (it->second.refs == 0) lru_.erase(it->second.lru);
    ++it->second.refs;
  }
  // Releases a request's blocks; the first block ends most recently used, so prefixes
  // outlive their tails.
  void unpin(std::span<const std::uint64_t> seq) {
    for (auto h = seq.rbegin(); h != seq.rend(); ++h) {
      auto it = entries_.find(*h);
      if (it == entries_.end() || it->second.refs == 0) continue;
      if (--it->second.refs == 0) it->second.lru = lru_.insert(lru_.end(), *h);
    }
  }
  void add_private(long long n) { private_ += n; }

 private:
  struct Entry {
    int refs = 0;
    std::list<std::uint64_t>::iterator lru;
  };
  int worker_;
  long long capacity_;
  IndexFeed* index_;
  HostTier* host_;
  std::unordered_map<std::uint64_t, Entry> entries_;
  std::list<std::uint64_t> lru_;
  long long private_ = 0;
};

enum class Stage : std::uint8_t { kQueued, kPrefill, kDecode, kDone };

struct Req {
  Stage stage = Stage::kQueued;
  bool decode_side = false;  // --pd: queued at or running on its decode worker
  double ready_s = 0;
  int routed_overlap = 0;
  int pull_end = 0;          // blocks [routed_overlap, pull_end) arrive by transfer
  double remaining = 0;      // prompt tokens still to compute
  double position = 0;       // position of the next prompt token to compute
  int generated = 0;
  long long private_blocks = 0;
  double load_s = 0;         // loading its host-tier blocks, paid by the iteration its prefill starts in
};

struct WorkerRt {
  BlockCache cache;
  double now = 0;
  bool scheduled = false;
  std::deque<int> waiting;
  std::vector<int> running;  // admission order
  double busy_s = 0;
};

class Engine {
 public:
  Engine(const Cluster& cluster, const std::vector<WorkerPlacement>& workers, const TimeModel& time, const RequestTrace& trace,
         const std::vector<std::vector<std::uint64_t>>& hashes, const PolicyEntry& policy, const SimConfig& config,
         TransferTable all, TransferTable prefill_side, long long capacity)
      : workers_(workers), time_(time), trace_(trace), hashes_(hashes), policy_(policy), config_(config), all_(std::move(all)),
        prefill_count_(config.disaggregated ? static_cast<int>(workers.size()) / 2 : static_cast<int>(workers.size())),
        router_(policy, prefill_count_, time, std::move(prefill_side),
                RouterConfig{config.block_tokens, 1.0, config.load_weight, config.predictor_scale, std::max(0LL, capacity)}),
        decode_index_(static_cast<int>(workers.size())),
        prefill_feed_(&router_.index(), config.event_lag_s),
        decode_feed_(&decode_index_, 0),
        host_feed_(&router_.host_index(), config.event_lag_s) {
    block_bytes_ = time.model().kv_bytes_per_token() * config.block_tokens;
    build_host_tiers(cluster);
    for (int w = 0; w < static_cast<int>(workers.size()); ++w)
      rt_.push_back(WorkerRt{BlockCache(w, capacity, w < prefill_count_ ? &prefill_feed_ : &decode_feed_, host_of(w)), 0, false, {}, {}, 0});
    reqs_.resize(trace.requests.size());
    result_.requests.resize(trace.requests.size());
    result_.policy = std::string(policy.name);
    result_.warmup_requests = config.warmup_requests;
    result_.cache_blocks_per_worker = capacity;
  }

  PolicyResult run();

 private:
  double arrival(std::size_t i) const { return trace_.requests[i].arrival_s / config_.speed; }
  void schedule(int w, double t) {
    WorkerRt& W = rt_[static_cast<std::size_t>(w)];
    if (W.scheduled) return;
    W.scheduled = true;
    heap_.push({std::max(W.now, t), w});
  }
  void sample(double t);
  void on_arrival(std::size_t i);
  void run_worker(int w, double t, double limit);
  void admit(int w);
  bool admit_one(int w, int i);
  void iterate(int w);
  void fast_forward_decode(int w, double limit);
  void first_token(int w, int i, double t);
  void finish(int w, int i, double t);
  void hand_off(int w, int i, double t);
  void count_transfer(int from, int to, double blocks);
  void build_host_tiers(const Cluster& cluster);
  HostTier* host_of(int w) { return host_tier_of_.empty() ? nullptr : host_tier_of_[static_cast<std::size_t>(w)]; }
  int host_extension(int w, std::span<const std::uint64_t> seq, int from);

  const std::vector<WorkerPlacement>& workers_;
  const TimeModel& time_;
  const RequestTrace& trace_;
  const std::vector<std::vector<std::uint64_t>>& hashes_;
  const PolicyEntry& policy_;
  const SimConfig& config_;
  TransferTable all_;
  int prefill_count_;
  Router router_;
  KvIndex decode_index_;  // --pd: the decode workers' caches (no router reads it)
  IndexFeed prefill_feed_;  // the router's index, event_lag_s late
  IndexFeed decode_feed_;
  IndexFeed host_feed_;  // the host tiers' contents, to the router's host index, event_lag_s late
  std::vector<std::unique_ptr<HostTier>> hosts_;  // per node with a prefill worker
  std::vector<HostTier*> host_tier_of_;           // per worker; empty without a host tier
  std::vector<double> load_s_per_block_;          // per worker: one block over its GPUs' PCIe links
  double block_bytes_ = 0;
  std::vector<WorkerRt> rt_;
  std::vector<Req> reqs_;
  PolicyResult result_;
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> heap_;
  double next_sample_ = 0, sample_step_ = 0;
};

void Engine::sample(double t) {
  if (t < next_sample_) return;
  for (int w = 0; w < static_cast<int>(rt_.size()); ++w) {
    const WorkerRt& W = rt_[static_cast<std::size_t>(w)];
    result_.timeline.push_back({t, w, static_cast<int>(W.waiting.size() + W.running.size())});
  }
  next_sample_ = t + sample_step_;
}

void Engine::count_transfer(int from, int to, double blocks) {
  double bytes = blocks * block_bytes_;
  result_.kv_bytes_moved += bytes;
  result_.kv_bytes_by_level[all_.level_at(from, to)] += bytes;
}

// One host tier per node of the prefill workers, SimConfig::host_cache_gb of blocks; a worker
// loads a block over its GPUs' host links at once, each TP rank its shard over its own.
void Engine::build_host_tiers(const Cluster& cluster) {
  const long long blocks = host_cache_blocks_per_node(time_, config_);
  if (blocks <= 0) return;
  result_.host_cache_blocks_per_node = blocks;
  std::map<std::uint32_t, std::vector<int>> by_node;
  for (int w = 0; w < prefill_count_; ++w) by_node[workers_[static_cast<std::size_t>(w)].node.index()].push_back(w);
  host_tier_of_.assign(workers_.size(), nullptr);
  load_s_per_block_.assign(workers_.size(), 0);
  for (auto& [node, members] : by_node) {
    hosts_.push_back(std::make_unique<HostTier>(blocks, members, &host_feed_));
    for (int w : members) {
      host_tier_of_[static_cast<std::size_t>(w)] = hosts_.back().get();
      load_s_per_block_[static_cast<std::size_t>(w)] = host_load_s_per_block(cluster, workers_[static_cast<std::size_t>(w)], block_bytes_);
    }
  }
  router_.set_host_load_s_per_block(load_s_per_block_);
}

// Blocks of `seq` from `from` on that worker w finds in GPU memory or its node's host tier,
// the host-only ones touched (they are loaded, and become most recent there); returns how many
// are host-only.
int Engine::host_extension(int w, std::span<const std::uint64_t> seq, int from) {
  HostTier* host = host_of(w);
  if (!host) return 0;
  const BlockCache& cache = rt_[static_cast<std::size_t>(w)].cache;
  int loaded = 0;
  for (std::size_t k = static_cast<std::size_t>(std::max(from, 0)); k < seq.size(); ++k) {
    if (cache.contains(seq[k])) continue;
    if (!host->contains(seq[k])) break;
    host->touch(seq[k]);
    ++loaded;
  }
  return loaded;
}

void Engine::on_arrival(std::size_t i) {
  const LlmRequest& lr = trace_.requests[i];
  const double t = arrival(i);
  sample(t);
  prefill_feed_.deliver_until(t);
  host_feed_.deliver_until(t);
  RouteDecision d = router_.route(i, RouteQuery{hashes_[i], lr.input_tokens, t});
  Req& r = reqs_[i];
  r.routed_overlap = d.local_overlap;
  r.ready_s = t;
  if (d.pull_from >= 0 && d.pull_blocks > 0) {
    r.pull_end = d.local_overlap + d.pull_blocks;
    r.ready_s += all_.at(d.pull_from, d.worker).seconds(d.pull_blocks);
    count_transfer(d.pull_from, d.worker, d.pull_blocks);
    result_.requests[i].pulled_blocks = d.pull_blocks;
  }
  RequestOutcome& o = result_.requests[i];
  o.worker = d.worker;
  o.arrival_s = t;
  o.ready_s = r.ready_s;
  o.predicted_ttft_s = d.predicted_ttft_s;
  o.blocks = static_cast<int>(lr.block_ids.size());
  o.input_tokens = lr.input_tokens;
  o.output_tokens = lr.output_tokens;
  rt_[static_cast<std::size_t>(d.worker)].waiting.push_back(static_cast<int>(i));
  schedule(d.worker, r.ready_s);
}

// Pins what the worker holds of the request's blocks and stores the rest; false (nothing
// stored) when they do not fit while other requests run. A request alone may overfill.
bool Engine::admit_one(int w, int i) {
  WorkerRt& W = rt_[static_cast<std::size_t>(w)];
  Req& r = reqs_[static_cast<std::size_t>(i)];
  const LlmRequest& lr = trace_.requests[static_cast<std::size_t>(i)];
  const auto& seq = hashes_[static_cast<std::size_t>(i)];
  const int bs = config_.block_tokens;
  long long total_blocks = (static_cast<long long>(lr.input_tokens) + lr.output_tokens + bs - 1) / bs;
  r.private_blocks = total_blocks - static_cast<long long>(seq.size());
  prefill_feed_.set_now(W.now);
  host_feed_.set_now(W.now);
  int local = W.cache.prefix(seq);
  // The prefix not recomputed: what the worker holds (or pulled), then what its node's host
  // tier adds (loaded, not computed). Counted before storing the prompt's blocks.
  const int held = std::min<int>(local >= r.routed_overlap ? std::max(local, r.pull_end) : local, static_cast<int>(seq.size()));
  const int loaded = r.decode_side ? 0 : host_extension(w, seq, held);
  // Hold what is cached (so that making room cannot evict it), then make room for the rest.
  long long fresh = r.private_blocks;
  for (std::uint64_t h : seq) {
    if (W.cache.contains(h)) W.cache.pin(h);
    else ++fresh;
  }
  if (!W.cache.make_room(fresh) && !W.running.empty()) {
    W.cache.unpin(seq);
    return false;
  }
  for (std::uint64_t h : seq)
    if (!W.cache.contains(h)) W.cache.pin(h);
  W.cache.add_private(r.private_blocks);
  if (r.decode_side) {
    // --pd: the first token reaches the client once its KV is on the decode worker and that
    // worker takes it (vLLM's disaggregated serving with NIXL: the KV pull is on TTFT).
    RequestOutcome& o = result_.requests[static_cast<std::size_t>(i)];
    o.ttft_s = W.now - o.arrival_s;
    r.stage = Stage::kDecode;
    return true;
  }
  const int hit = std::min<int>(held + loaded, static_cast<int>(seq.size()));
  double cached = std::min<double>(static_cast<double>(hit) * bs, lr.input_tokens);
  RequestOutcome& o = result_.requests[static_cast<std::size_t>(i)];
  o.admitted_s = W.now;
  o.hit_blocks = hit;
  o.hit_tokens = cached;
  o.pulled_blocks = std::max(0, held - local);
  o.host_blocks = loaded;
  r.load_s = loaded > 0 ? loaded * load_s_per_block_[static_cast<std::size_t>(w)] : 0;
  r.remaining = std::max(1.0, lr.input_tokens - cached);
  r.position = std::min(cached, lr.input_tokens - 1.0);
  r.stage = Stage::kPrefill;
  return true;
}

void Engine::admit(int w) {
  WorkerRt& W = rt_[static_cast<std::size_t>(w)];
  for (std::size_t k = 0; k < W.waiting.size() && W.running.size() < static_cast<std::size_t>(config_.max_running);) {
    int i = W.waiting[k];
    if (reqs_[static_cast<std::size_t>(i)].ready_s > W.now) {
      ++k;
      continue;
    }
    if (!admit_one(w, i)) break;
    W.running.push_back(i);
    W.waiting.erase(W.waiting.begin() + static_cast<std::ptrdiff_t>(k));
  }
}

void Engine::first_token(int w, int i, double t) {
  Req& r = reqs_[static_cast<std::size_t>(i)];
  RequestOutcome& o = result_.requests[static_cast<std::size_t>(i)];
  o.ttft_s = t - o.arrival_s;
  r.generated = 1;
  router_.prefill_done(static_cast<std::uint64_t>(i));
  const LlmRequest& lr = trace_.requests[static_cast<std::size_t>(i)];
  if (lr.output_tokens <= 1) finish(w, i, t);
  else if (config_.disaggregated) hand_off(w, i, t);
  else r.stage = Stage::kDecode;
}

void Engine::finish(int w, int i, double t) {
  Req& r = reqs_[static_cast<std::size_t>(i)];
  WorkerRt& W = rt_[static_cast<std::size_t>(w)];
  RequestOutcome& o = result_.requests[static_cast<std::size_t>(i)];
  const LlmRequest& lr = trace_.requests[static_cast<std::size_t>(i)];
  o.finish_s = t;
  o.tpot_s = lr.output_tokens > 1 ? (t - (o.arrival_s + o.ttft_s)) / (lr.output_tokens - 1) : -1;
  W.cache.unpin(hashes_[static_cast<std::size_t>(i)]);
  W.cache.add_private(-r.private_blocks);
  r.stage = Stage::kDone;
  if (!r.decode_side) router_.finished(static_cast<std::uint64_t>(i));
}

// --pd: the prompt's KV leaves the prefill worker for a decode worker.
void Engine::hand_off(int w, int i, double t) {
  Req& r = reqs_[static_cast<std::size_t>(i)];
  WorkerRt& P = rt_[static_cast<std::size_t>(w)];
  const auto& seq = hashes_[static_cast<std::size_t>(i)];
  P.cache.unpin(seq);
  P.cache.add_private(-r.private_blocks);
  router_.finished(static_cast<std::uint64_t>(i));
  const bool topo = policy_.name == "kv-topo" || policy_.name == "kv-pull-blind";
  int best = -1;
  double best_s = kInf;
  long long best_load = 0;
  for (int d = prefill_count_; d < static_cast<int>(rt_.size()); ++d) {
    double s = topo ? all_.at(w, d).seconds(static_cast<double>(seq.size())) : 0;
    long long load = rt_[static_cast<std::size_t>(d)].cache.used();
    if (s < best_s || (s == best_s && load < best_load)) {
      best = d;
      best_s = s;
      best_load = load;
    }
  }
  r.decode_side = true;
  r.stage = Stage::kQueued;
  r.ready_s = t + all_.at(w, best).seconds(static_cast<double>(seq.size()));
  count_transfer(w, best, static_cast<double>(seq.size()));
  result_.requests[static_cast<std::size_t>(i)].decode_worker = best;
  rt_[static_cast<std::size_t>(best)].waiting.push_back(i);
  schedule(best, r.ready_s);
}

void Engine::iterate(int w) {
  WorkerRt& W = rt_[static_cast<std::size_t>(w)];
  double budget = config_.max_batched_tokens, decode_seqs = 0, decode_ctx = 0;
  for (int i : W.running)
    if (reqs_[static_cast<std::size_t>(i)].stage == Stage::kDecode) {
      decode_seqs += 1;
      decode_ctx += trace_.requests[static_cast<std::size_t>(i)].input_tokens + reqs_[static_cast<std::size_t>(i)].generated;
    }
  budget = std::max(0.0, budget - decode_seqs);
  double pre_tokens = 0, pre_positions = 0, pre_context = 0, load_s = 0;
  static thread_local std::vector<std::pair<int, double>> chunks;
  chunks.clear();
  for (int i : W.running) {
    Req& r = reqs_[static_cast<std::size_t>(i)];
    if (r.stage != Stage::kPrefill || budget <= 0) continue;
    double c = std::min(r.remaining, budget);
    budget -= c;
    load_s += r.load_s;  // its host-tier blocks, loaded before its first chunk runs
    r.load_s = 0;
    pre_tokens += c;
    pre_positions += c * (2 * r.position + c - 1) / 2;
    pre_context += r.position;
    chunks.push_back({i, c});
  }
  double dt = load_s + time_.iteration_s(pre_tokens, pre_positions, pre_context, decode_seqs, decode_ctx, static_cast<double>(chunks.size()));
  double end = W.now + dt;
  W.busy_s += dt;
  const int bs = config_.block_tokens;
  std::vector<int> done;
  for (int i : W.running) {
    Req& r = reqs_[static_cast<std::size_t>(i)];
    if (r.stage != Stage::kDecode) continue;
    const LlmRequest& lr = trace_.requests[static_cast<std::size_t>(i)];
    ++r.generated;
    if (!r.decode_side && (lr.input_tokens + r.generated) % bs == 0) router_.output_block(static_cast<std::uint64_t>(i));
    if (r.generated >= lr.output_tokens) done.push_back(i);
  }
  for (auto [i, c] : chunks) {
    Req& r = reqs_[static_cast<std::size_t>(i)];
    r.remaining -= c;
    r.position += c;
    if (r.remaining <= 0) {
      first_token(w, i, end);
      if (r.stage == Stage::kDone || r.decode_side) done.push_back(i);
    }
  }
  for (int i : done) {
    Req& r = reqs_[static_cast<std::size_t>(i)];
    if (r.stage == Stage::kDecode) finish(w, i, end);
  }
  std::erase_if(W.running, [&](int i) {
    const Req& r = reqs_[static_cast<std::size_t>(i)];
    return r.stage == Stage::kDone || (r.decode_side && r.stage == Stage::kQueued);
  });
  W.now = end;
}

// Decode-only stretches: step the batch without touching each request until one finishes
// or `limit` (the next arrival) is reached; each step's time is the same roofline.
void Engine::fast_forward_decode(int w, double limit) {
  WorkerRt& W = rt_[static_cast<std::size_t>(w)];
  double seqs = 0, ctx = 0;
  int steps_max = std::numeric_limits<int>::max();
  for (int i : W.running) {
    const Req& r = reqs_[static_cast<std::size_t>(i)];
    const LlmRequest& lr = trace_.requests[static_cast<std::size_t>(i)];
    seqs += 1;
    ctx += lr.input_tokens + r.generated;
    steps_max = std::min(steps_max, lr.output_tokens - r.generated);
  }
  int steps = 0;
  double t = W.now;
  do {
    double dt = time_.iteration_s(0, 0, 0, seqs, ctx);
    t += dt;
    W.busy_s += dt;
    ctx += seqs;
    ++steps;
  } while (steps < steps_max && t < limit);
  const int bs = config_.block_tokens;
  for (int i : W.running) {
    Req& r = reqs_[static_cast<std::size_t>(i)];
    const LlmRequest& lr = trace_.requests[static_cast<std::size_t>(i)];
    if (!r.decode_side) {
      int crossed = (lr.input_tokens + r.generated + steps) / bs - (lr.input_tokens + r.generated) / bs;
      for (int k = 0; k < crossed; ++k) router_.output_block(static_cast<std::uint64_t>(i));
    }
    r.generated += steps;
    if (r.generated >= lr.output_tokens) finish(w, i, t);
  }
  std::erase_if(W.running, [&](int i) { return reqs_[static_cast<std::size_t>(i)].stage == Stage::kDone; });
  W.now = t;
}

void Engine::run_worker(int w, double t, double limit) {
  WorkerRt& W = rt_[static_cast<std::size_t>(w)];
  W.scheduled = false;
  W.now = std::max(W.now, t);
  admit(w);
  double next_ready = kInf;
  for (int i : W.waiting) next_ready = std::min(next_ready, reqs_[static_cast<std::size_t>(i)].ready_s);
  if (W.running.empty()) {
    if (next_ready < kInf) schedule(w, next_ready);
    return;
  }
  bool prefilling = std::any_of(W.running.begin(), W.running.end(),
                                [&](int i) { return reqs_[static_cast<std::size_t>(i)].stage == Stage::kPrefill; });
  bool admissible = next_ready <= W.now;
  if (prefilling || admissible) iterate(w);
  else fast_forward_decode(w, std::min(limit, next_ready));
  if (!W.running.empty() || !W.waiting.empty()) schedule(w, W.now);
}

PolicyResult Engine::run() {
  const std::size_t n = trace_.requests.size();
  double span = n ? arrival(n - 1) - arrival(0) : 0;
  sample_step_ = std::max(span, 1e-9) / static_cast<double>(std::max<std::size_t>(config_.timeline_points, 1));
  next_sample_ = n ? arrival(0) : 0;
  std::size_t next = 0;
  while (true) {
    double t_arrival = next < n ? arrival(next) : kInf;
    double t_event = heap_.empty() ? kInf : heap_.top().first;
    if (t_arrival == kInf && t_event == kInf) break;
    if (t_arrival <= t_event) {
      on_arrival(next++);
      continue;
    }
    auto [t, w] = heap_.top();
    heap_.pop();
    double limit = t_arrival;
    if (config_.disaggregated && !heap_.empty()) limit = std::min(limit, heap_.top().first);
    run_worker(w, t, limit);
  }
  double busy = 0, first = n ? arrival(0) : 0, last = first;
  for (std::size_t w = 0; w < rt_.size(); ++w) {
    result_.busy_gpu_s += rt_[w].busy_s * static_cast<double>(workers_[w].gpus.size());
    busy += rt_[w].busy_s;
  }
  for (const RequestOutcome& o : result_.requests) last = std::max(last, o.finish_s);
  if (last > first) result_.busy_fraction = busy / (static_cast<double>(rt_.size()) * (last - first));
  result_.energy_kwh = result_.busy_gpu_s * time_.gpu().board_power_w / 3.6e6;
  return std::move(result_);
}

}  // namespace

long long host_cache_blocks_per_node(const TimeModel& time, const SimConfig& config) {
  return static_cast<long long>(config.host_cache_gb * 1e9 / (time.model().kv_bytes_per_token() * config.block_tokens));
}

Result<void> check_host_cache_gb(double gb) {
  if (!(gb >= 0 && gb <= kMaxHostCacheGb))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--host-cache-gb: expected a size in GB from 0 to {:g}, found {}", kMaxHostCacheGb, gb));
  return {};
}

Result<PolicyResult> simulate_policy(const Cluster& cluster, const std::vector<WorkerPlacement>& workers, const TimeModel& time,
                                     const RequestTrace& trace, const std::vector<std::vector<std::uint64_t>>& hashes,
                                     const PolicyEntry& policy, const SimConfig& config) {
  if (workers.empty()) return make_error(ErrorCode::kInvalidArgument, "the simulator needs at least one worker");
  if (config.disaggregated && workers.size() < 2)
    return make_error(ErrorCode::kInvalidArgument, "--pd needs at least two workers (half prefill, half decode)");
  if (!(config.speed > 0)) return make_error(ErrorCode::kInvalidArgument, fmt::format("--speed: expected > 0, found {}", config.speed));
  if (!(config.load_weight >= 0) || !std::isfinite(config.load_weight))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--load-weight: expected a number >= 0, found {}", config.load_weight));
  if (!(config.predictor_scale > 0) || !std::isfinite(config.predictor_scale))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--predictor-scale: expected > 0, found {}", config.predictor_scale));
  if (!(config.event_lag_s >= 0) || !std::isfinite(config.event_lag_s))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--event-lag-ms: expected >= 0, found {}", config.event_lag_s * 1e3));
  TOPOSCHED_CHECK(check_host_cache_gb(config.host_cache_gb));
  if (hashes.size() != trace.requests.size()) return make_error(ErrorCode::kInvalidArgument, "one hash sequence per request expected");
  long long capacity = config.cache_blocks;
  if (capacity == 0) capacity = static_cast<long long>(time.kv_capacity_tokens() / config.block_tokens);
  if (capacity == 0)
    return make_error(ErrorCode::kInfeasible, fmt::format("model {} leaves no room for a KV cache on {} x{} (weights {:.0f} GB)",
                                                          time.model().name, time.gpu().name, time.tp(), time.model().weight_bytes() / 1e9));
  double block_bytes = time.model().kv_bytes_per_token() * config.block_tokens;
  TOPOSCHED_TRY(all, transfer_table(cluster, workers, block_bytes));
  std::vector<WorkerPlacement> prefill_side(workers.begin(), workers.begin() + (config.disaggregated ? static_cast<std::ptrdiff_t>(workers.size() / 2)
                                                                                                   : static_cast<std::ptrdiff_t>(workers.size())));
  TOPOSCHED_TRY(sub, transfer_table(cluster, prefill_side, block_bytes));
  Engine engine(cluster, workers, time, trace, hashes, policy, config, std::move(all), std::move(sub), capacity);
  return engine.run();
}

double unloaded_ttft_s(const TimeModel& time, int input_tokens, int max_batched_tokens) {
  const double budget = std::max(1, max_batched_tokens);
  double t = 0;
  for (double done = 0; done < input_tokens;) {
    double c = std::min(budget, input_tokens - done);
    t += time.iteration_s(c, c * (2 * done + c - 1) / 2, done, 0, 0, 1);
    done += c;
  }
  return t;
}

double oracle_token_hit_rate(const RequestTrace& trace, const std::vector<std::vector<std::uint64_t>>& hashes, long long capacity_blocks,
                             int block_tokens) {
  std::list<std::uint64_t> lru;  // most recent first
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> where;
  double input = 0, hit = 0;
  for (std::size_t i = 0; i < trace.requests.size() && i < hashes.size(); ++i) {
    const auto& seq = hashes[i];
    std::size_t prefix = 0;
    while (prefix < seq.size() && where.contains(seq[prefix])) ++prefix;
    input += trace.requests[i].input_tokens;
    hit += std::min<double>(static_cast<double>(prefix) * block_tokens, trace.requests[i].input_tokens);
    for (std::size_t k = seq.size(); k-- > 0;) {
      if (auto it = where.find(seq[k]); it != where.end()) lru.erase(it->second);
      lru.push_front(seq[k]);
      where[seq[k]] = lru.begin();
    }
    while (capacity_blocks >= 0 && static_cast<long long>(lru.size()) > capacity_blocks) {
      where.erase(lru.back());
      lru.pop_back();
    }
  }
  return input > 0 ? hit / input : 0;
}

}  // namespace toposched::router
