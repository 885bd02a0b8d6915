#include "router/router.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "cost/collective.h"

namespace toposched::router {

Result<std::vector<WorkerPlacement>> place_workers(const Cluster& cluster, int count, int tp,
                                                   const std::vector<char>& busy) {
  if (count < 1 || count > kMaxWorkers)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--workers: expected 1..{}, found {}", kMaxWorkers, count));
  if (tp < 1) return make_error(ErrorCode::kInvalidArgument, fmt::format("--tp: expected >= 1, found {}", tp));
  const std::size_t nodes = cluster.node_count();
  // Each node's free GPUs in index order; `taken` of them are given out already.
  std::vector<std::vector<GpuId>> free_gpus(nodes);
  for (std::size_t i = 0; i < nodes; ++i) {
    const NodeId n(static_cast<std::uint32_t>(i));
    for (int l = 0; l < cluster.node_gpu_count(n); ++l) {
      const GpuId g = cluster.node_gpu(n, l);
      if (busy.empty() || !busy[g.index()]) free_gpus[i].push_back(g);
    }
  }
  std::vector<std::size_t> taken(nodes, 0);
  std::vector<WorkerPlacement> out;
  std::size_t node = 0;
  for (int w = 0; w < count; ++w) {
    // The next node, in round-robin order, that still has tp free GPUs.
    std::size_t tried = 0;
    while (tried < nodes && taken[node] + static_cast<std::size_t>(tp) > free_gpus[node].size()) {
      node = (node + 1) % nodes;
      ++tried;
    }
    if (tried == nodes)
      return make_error(ErrorCode::kInfeasible,
                        fmt::format("cannot place {} workers of {} GPUs each in one node on cluster '{}' ({} nodes, {} GPUs{})",
                                    count, tp, cluster.name(), nodes, cluster.gpu_count(),
                                    busy.empty() ? "" : ", some held by jobs"));
    WorkerPlacement p{NodeId(static_cast<std::uint32_t>(node)), {}};
    for (int r = 0; r < tp; ++r) p.gpus.push_back(free_gpus[node][taken[node] + static_cast<std::size_t>(r)]);
    taken[node] += static_cast<std::size_t>(tp);
    out.push_back(std::move(p));
    node = (node + 1) % nodes;
  }
  return out;
}

Result<TransferTable> transfer_table(const Cluster& cluster, const std::vector<WorkerPlacement>& workers, double block_bytes) {
  TransferTable t;
  t.workers = static_cast<int>(workers.size());
  t.cost.resize(workers.size() * workers.size());
  t.level.resize(workers.size() * workers.size());
  for (std::size_t a = 0; a < workers.size(); ++a)
    for (std::size_t b = 0; b < workers.size(); ++b) {
      std::size_t k = a * workers.size() + b;
      if (a == b) {
        t.level[k] = "same-worker";
        continue;
      }
      const GpuId src = workers[a].gpus.front(), dst = workers[b].gpus.front();
      const double shard = block_bytes / static_cast<double>(workers[a].gpus.size());
      GpuId pair[2] = {src, dst};
      TOPOSCHED_TRY(one, estimate_collective(cluster, pair, Collective::kSendRecv, shard));
      TOPOSCHED_TRY(many, estimate_collective(cluster, pair, Collective::kSendRecv, 16 * shard));
      double per_block_s = (many.time_us - one.time_us) / 15.0 * 1e-6;
      if (per_block_s <= 0) per_block_s = one.time_us * 1e-6;
      t.cost[k].blocks_per_s = 1.0 / per_block_s;
      t.cost[k].latency_s = std::max(0.0, one.time_us * 1e-6 - per_block_s);
      t.level[k] = cluster.level_name(cluster.path(src, dst));
    }
  return t;
}

namespace {

double cached_tokens(int blocks, int block_tokens, int input_tokens) {
  return std::min<double>(static_cast<double>(blocks) * block_tokens, input_tokens);
}

RouteDecision choose_round_robin(Router& r, const RouteQuery& q) {
  RouteDecision d;
  d.worker = static_cast<int>(r.next_round_robin() % static_cast<std::uint64_t>(r.workers()));
  d.local_overlap = r.prefixes(q)[static_cast<std::size_t>(d.worker)];
  return d;
}

RouteDecision choose_least_loaded(Router& r, const RouteQuery& q) {
  const auto& overlap = r.prefixes(q);
  RouteDecision d;
  for (int w = 0; w < r.workers(); ++w) {
    const Router::Load& l = r.load(w);
    if (d.worker < 0 || l.active_requests < r.load(d.worker).active_requests ||
        (l.active_requests == r.load(d.worker).active_requests && l.active_blocks < r.load(d.worker).active_blocks)) {
      d.worker = w;
      d.cost = l.active_requests;
    }
  }
  d.local_overlap = overlap[static_cast<std::size_t>(d.worker)];
  return d;
}

// Dynamo's DefaultWorkerSelector (lib/llm/src/kv_router/scheduler.rs): logit =
// overlap_score_weight x potential prefill blocks + potential decode blocks, where potential
// prefill tokens = the worker's active prefill tokens + (isl - overlap x block size) and
// potential decode blocks = its active blocks + the request's blocks it does not have active.
// Temperature 0: the smallest logit; ties to the smaller cached tree, then (instead of
// Dynamo's random pick) the lower index. Anti-burst (RouterConfig::load_weight): the prefill
// weight grows by load_weight per request already active on the worker, since every one of
// them waits through the prefill chunks computed there (0: Dynamo's cost exactly).
RouteDecision choose_kv(Router& r, const RouteQuery& q) {
  const auto& overlap = r.prefixes(q);
  const auto& fresh = r.new_blocks_all(q.sequence);
  const double bs = r.config().block_tokens;
  RouteDecision d;
  std::size_t best_tree = 0;
  for (int w = 0; w < r.workers(); ++w) {
    const Router::Load& l = r.load(w);
    double new_tokens = std::max(0.0, q.input_tokens - overlap[static_cast<std::size_t>(w)] * bs);
    double prefill_blocks = (l.prefill_tokens + new_tokens) / bs;
    double decode_blocks = static_cast<double>(l.active_blocks + fresh[static_cast<std::size_t>(w)]);
    double logit = (r.config().overlap_score_weight + r.burst_weight(w)) * prefill_blocks + decode_blocks;
    std::size_t tree = r.index().blocks(w);
    if (d.worker < 0 || logit < d.cost || (logit == d.cost && tree < best_tree)) {
      d.worker = w;
      d.cost = logit;
      best_tree = tree;
    }
  }
  d.local_overlap = overlap[static_cast<std::size_t>(d.worker)];
  return d;
}

// The fastest transfer between two workers of the cluster: what kv-pull-blind prices every
// pull as.
TransferCost fastest_transfer(Router& r) {
  TransferCost fastest;
  for (const TransferCost& c : r.transfers().cost)
    if (c.blocks_per_s > fastest.blocks_per_s) fastest = c;
  return fastest;
}

// kv-topo: kv's cost (Dynamo's, with the anti-burst weight), where a worker may also pull
// a longer cached prefix from another worker before it computes the rest. Pulling k blocks
// removes k blocks from the worker's prefill term and adds the transfer's wait (what the
// transfer takes beyond the worker's queue, which it overlaps: the later of its queued prefill
// seconds and its wait for cache room, Router::cache_wait_s) converted to
// prefill blocks at the seconds per block the pull saves, weighted by overlap_score_weight
// alone: the wait delays only this request, while the prefill it replaces also stalls the
// worker's decoding requests. So a worker's options are compared in the unit kv compares
// workers in, with the same load term. A pull is taken only where it lowers that cost below
// kv's choice (the best worker computing what it lacks) and also gives an earlier first-token
// estimate than kv's choice: a pull made only to even out decode blocks would copy a prefix
// and evict others' (measured on the llm-d shared-prefix trace, docs/router.md). When kv's
// choice is past its cache (its cache wait is positive), the cost alone decides: computing
// the prompt there delays every request queued for room behind it. With no
// such pull the choice is kv's, with the eviction term below. `blind` prices every transfer as the fastest pair
// of the cluster. Eviction term (RouterConfig::cache_blocks): of a worker's cached prefix,
// the blocks no active request holds count only in the share its LRU is expected to keep
// until the request is admitted; a pull onto such a prefix counts only with that
// probability (the pulled blocks extend the local prefix: if its tail is evicted they are of
// no use, as in the simulator). Ties as kv's: the smaller cached tree, then the lower index.
// predicted_ttft_s is the chosen option's first-token estimate in seconds: the queue, the
// transfer (overlapped with the queue), then the prefill of the rest.
// One kv-topo decision (the rule above): the request's per-worker terms, kv's choice and
// the best option so far, shared by its three passes (kv's cost, host tiers, pulls).
class TopoChoice {
 public:
  TopoChoice(Router& r, const RouteQuery& q, bool blind)
      : r_(r), q_(q), blind_(blind), overlap_(r.prefixes(q)),
        safe_(r.config().cache_blocks > 0 ? r.active_prefixes(q.sequence, overlap_) : overlap_),
        fresh_(r.new_blocks_all(q.sequence)), bs_(r.config().block_tokens), osw_(r.config().overlap_score_weight),
        n_(r.workers()), host_(r.host_extensions(q.sequence, overlap_)) {}

  RouteDecision decide() {
    kv_pass();
    host_pass();
    pull_pass();
    d_.cost = best_;
    d_.predicted_ttft_s = best_ttft_;
    return d_;
  }

 private:
  // Tokens left to compute with `blocks` (possibly fractional: expected) cached; and their time.
  double uncached(double blocks) const { return std::max(0.0, q_.input_tokens - blocks * bs_); }
  double prefill(double blocks) const {
    double cached = std::min<double>(blocks * bs_, q_.input_tokens);
    return r_.predicted_prefill_s(std::max(1.0, q_.input_tokens - cached), std::min(cached, q_.input_tokens - 1.0));
  }
  // Seconds before w would start this request's prefill: the later of its queued prefill and
  // the wait for room in its cache (a saturated worker admits a request only as others
  // finish; it computes the queued prefill meanwhile, so the two overlap).
  double queue(int w) const {
    return std::max(r_.load(w).prefill_seconds, r_.cache_wait_s(w, decode_[static_cast<std::size_t>(w)]));
  }

  // Per worker: the cached prefix counted in expectation (eviction term), the weight of its
  // prefill term, its decode blocks, its host tier's load; and kv's choice, computing there.
  void kv_pass() {
    const auto n = static_cast<std::size_t>(n_);
    own_blocks_.assign(n, 0);
    weight_.assign(n, 0);
    decode_.assign(n, 0);
    load_s_.assign(n, 0);
    std::size_t best_tree = 0;
    for (int w = 0; w < n_; ++w) {
      const auto i = static_cast<std::size_t>(w);
      const Router::Load& l = r_.load(w);
      const int own = overlap_[i];
      const int pinned = std::min(own, safe_[i]);
      const double keep = own > pinned ? r_.keep_share(w, q_.sequence[static_cast<std::size_t>(own - 1)]) : 1.0;
      own_blocks_[i] = pinned + keep * (own - pinned);
      weight_[i] = osw_ + r_.burst_weight(w);
      decode_[i] = static_cast<double>(l.active_blocks + fresh_[i]);
      load_s_[i] = host_[i] * r_.host_load_s_per_block(w);
      const double logit = weight_[i] * (l.prefill_tokens + uncached(own_blocks_[i])) / bs_ + decode_[i];
      const std::size_t tree = r_.index().blocks(w);
      if (d_.worker < 0 || logit < best_ || (logit == best_ && tree < best_tree)) {
        best_ = logit;
        best_tree = tree;
        d_.worker = w;
        d_.local_overlap = own;
      }
    }
    // kv's choice loads what its node's host tier adds to its prefix (the engine does, whatever
    // the router chose): on its first-token path.
    kv_ = static_cast<std::size_t>(d_.worker);
    d_.host_blocks = host_[kv_];
    best_ttft_ = queue(d_.worker) + load_s_[kv_] + prefill(own_blocks_[kv_] + host_[kv_]);
    // Past its cache (requests queue there for room), kv's choice would compute the prompt
    // while others wait to be admitted behind it: a pull that lowers the cost is then taken
    // even where this request's first token comes later (docs/router.md, "25 GbE at 3x").
    const bool kv_full = r_.cache_wait_s(d_.worker, decode_[kv_]) > 0;
    ttft_cap_ = kv_full ? std::numeric_limits<double>::infinity() : best_ttft_;
  }

  // Host tiers: another worker whose node's host memory holds more of the prompt is taken
  // by the rule of a pull (its load, over PCIe, in prefill blocks at the seconds per block it
  // saves; a lower cost and first-token estimate than kv's choice's), not by counting host
  // blocks as cached: that would spread a prefix over the node's workers, each loading
  // and storing a copy.
  void host_pass() {
    for (int w = 0; w < n_; ++w) {
      const auto i = static_cast<std::size_t>(w);
      if (host_[i] <= 0 || i == kv_) continue;
      const double with_host = own_blocks_[i] + host_[i];
      const double saved_s = prefill(own_blocks_[i]) - prefill(with_host);
      if (saved_s <= 0) continue;
      const double logit = weight_[i] * (r_.load(w).prefill_tokens + uncached(with_host)) / bs_ + decode_[i] +
                           osw_ * load_s_[i] / (saved_s / host_[i]);
      const double ttft = queue(w) + load_s_[i] + prefill(with_host);
      if (logit < best_ && ttft < ttft_cap_) {
        best_ = logit;
        best_ttft_ = ttft;
        d_.worker = w;
        d_.local_overlap = overlap_[i];
        d_.host_blocks = host_[i];
      }
    }
  }

  // Pulls: a worker w takes a longer prefix from s when that lowers both the cost and the
  // first-token estimate below kv's choice's (the cost alone when kv's choice is full). Cheap
  // bounds first (the decision is timed per request): a pull's cost is at least its prefill
  // and decode terms, its first token at least the worker's queue and the transfer.
  void pull_pass() {
    const TransferCost fastest = blind_ ? fastest_transfer(r_) : TransferCost{};
    const int longest = n_ > 0 ? *std::max_element(overlap_.begin(), overlap_.begin() + n_) : 0;
    for (int w = 0; w < n_; ++w) {
      const auto i = static_cast<std::size_t>(w);
      const int own = overlap_[i];
      if (own >= longest) continue;
      const Router::Load& l = r_.load(w);
      const double queued = queue(w);
      if (queued >= ttft_cap_) continue;
      // The pulled blocks extend the local prefix: kept with the share the local tail is kept.
      const int pinned = std::min(own, safe_[i]);
      const double keep = own > pinned ? (own_blocks_[i] - pinned) / (own - pinned) : 1.0;
      auto pulled_of = [&](int theirs) { return pinned + keep * (theirs - pinned); };
      auto bound = [&](double pulled) { return weight_[i] * (l.prefill_tokens + uncached(pulled)) / bs_ + decode_[i]; };
      if (bound(pulled_of(longest)) >= best_) continue;
      const double own_s = prefill(own_blocks_[i]);
      for (int s = 0; s < n_; ++s) {
        const int theirs = overlap_[static_cast<std::size_t>(s)];
        if (theirs <= own) continue;
        const double pulled = pulled_of(theirs);
        if (pulled <= own_blocks_[i] || bound(pulled) >= best_) continue;
        const TransferCost& c = blind_ ? fastest : r_.transfers().at(s, w);
        const double transfer = c.seconds(theirs - own);
        if (transfer >= ttft_cap_) continue;
        const double pulled_s = prefill(pulled);
        const double ttft = std::max(queued, transfer) + pulled_s;
        const double saved_s = own_s - pulled_s;
        if (ttft >= ttft_cap_ || saved_s <= 0) continue;
        const double wait_blocks = std::max(0.0, transfer - queued) / (saved_s / (pulled - own_blocks_[i]));
        const double logit = bound(pulled) + osw_ * wait_blocks;
        if (logit < best_) {
          best_ = logit;
          best_ttft_ = ttft;
          d_.worker = w;
          d_.local_overlap = own;
          d_.pull_from = s;
          d_.pull_blocks = theirs - own;
          d_.host_blocks = 0;
        }
      }
    }
  }

  Router& r_;
  const RouteQuery& q_;
  const bool blind_;
  const std::vector<int>& overlap_;
  const std::vector<int>& safe_;
  const std::vector<std::size_t>& fresh_;
  const int bs_;
  const double osw_;
  const int n_;
  const std::vector<int>& host_;
  // Reused across decisions (one per thread): no allocation per request.
  static thread_local std::vector<double> own_blocks_, weight_, decode_, load_s_;
  RouteDecision d_;
  std::size_t kv_ = 0;  // kv's choice
  double best_ = std::numeric_limits<double>::infinity();
  double best_ttft_ = 0;
  double ttft_cap_ = std::numeric_limits<double>::infinity();
};

thread_local std::vector<double> TopoChoice::own_blocks_, TopoChoice::weight_, TopoChoice::decode_, TopoChoice::load_s_;

RouteDecision choose_topo(Router& r, const RouteQuery& q, bool blind) { return TopoChoice(r, q, blind).decide(); }

RouteDecision choose_kv_topo(Router& r, const RouteQuery& q) { return choose_topo(r, q, false); }
RouteDecision choose_kv_pull_blind(Router& r, const RouteQuery& q) { return choose_topo(r, q, true); }

}  // namespace

double host_load_s_per_block(const Cluster& cluster, const WorkerPlacement& w, double block_bytes) {
  const double pcie_Bps = cluster.node_type(w.node).pcie_GBps * 1e9;
  const double gpus = static_cast<double>(std::max<std::size_t>(1, w.gpus.size()));
  return pcie_Bps > 0 ? block_bytes / gpus / pcie_Bps : 0;
}

const std::vector<PolicyEntry>& policy_catalog() {
  static const std::vector<PolicyEntry> entries = {
      {"round-robin", "each request to the next worker in turn", choose_round_robin},
      {"least-loaded", "the worker with the fewest active requests (then fewest active KV blocks)", choose_least_loaded},
      {"kv", "Dynamo's KV router: min of prefill blocks not cached + active decode blocks (weight 1, temperature 0)", choose_kv},
      {"kv-topo", "toposched: kv's cost, pulling a longer cached prefix over the actual path where that lowers the cost and the first token",
       choose_kv_topo},
      {"kv-pull-blind", "kv-topo's rule pricing every KV transfer as the cluster's fastest path (topology-blind variant)",
       choose_kv_pull_blind},
  };
  return entries;
}

const Registry<const PolicyEntry*>& policy_registry() {
  static const Registry<const PolicyEntry*> policies = [] {
    std::vector<Registry<const PolicyEntry*>::Row> rows;
    for (const PolicyEntry& e : policy_catalog()) rows.push_back({std::string(e.name), std::string(e.description), &e});
    return Registry<const PolicyEntry*>("routing policy", std::move(rows));
  }();
  return policies;
}

Result<const PolicyEntry*> find_policy(std::string_view name) {
  if (const auto* row = policy_registry().row(name)) return row->value;
  // kNotFound, not the registry's kInvalidArgument: `serve --router-policy` exits 1 on it,
  // as on an unknown model (route's --policies checks names itself, as usage errors).
  Error e = policy_registry().unknown(name);
  e.code = ErrorCode::kNotFound;
  return tl::unexpected(std::move(e));
}

Router::Router(const PolicyEntry& policy, int workers, TimeModel time, TransferTable transfers, RouterConfig config)
    : policy_(&policy), workers_(workers), time_(std::move(time)), transfers_(std::move(transfers)), config_(config), index_(workers),
      host_index_(workers), loads_(static_cast<std::size_t>(workers)) {}

const std::vector<int>& Router::host_extensions(std::span<const std::uint64_t> sequence, const std::vector<int>& overlap) {
  host_extension_.assign(static_cast<std::size_t>(workers_), 0);
  if (host_load_s_per_block_.empty()) return host_extension_;
  // A host tier holds what its node evicted, so a worker's cached blocks and its host tier's
  // together make its prefix: the host tier's own leading run, where it reaches past the
  // worker's, is what it adds (a router's estimate: blocks the worker holds beyond a gap in
  // the host tier are not counted).
  host_index_.longest_prefixes(sequence, host_prefix_);
  for (int w = 0; w < workers_; ++w) {
    const auto i = static_cast<std::size_t>(w);
    if (host_load_s_per_block(w) > 0) host_extension_[i] = std::max(0, host_prefix_[i] - overlap[i]);
  }
  return host_extension_;
}

const std::vector<int>& Router::prefixes(const RouteQuery& q) {
  index_.longest_prefixes(q.sequence, overlap_);
  return overlap_;
}

const std::vector<int>& Router::active_prefixes(std::span<const std::uint64_t> sequence, const std::vector<int>& overlap) {
  active_prefix_.assign(static_cast<std::size_t>(workers_), 0);
  WorkerSet still;
  int longest = 0;
  for (int w = 0; w < workers_; ++w)
    if (overlap[static_cast<std::size_t>(w)] > 0) {
      still.set(w);
      longest = std::max(longest, overlap[static_cast<std::size_t>(w)]);
    }
  longest = std::min<int>(longest, static_cast<int>(sequence.size()));
  for (int k = 0; k < longest && !still.empty(); ++k) {
    auto it = active_holders_.find(sequence[static_cast<std::size_t>(k)]);
    if (it == active_holders_.end()) break;
    still &= it->second;
    WorkerSet next = still;
    still.for_each([&](int w) {
      if (overlap[static_cast<std::size_t>(w)] > k) active_prefix_[static_cast<std::size_t>(w)] = k + 1;
      else next.reset(w);
    });
    still = next;
  }
  return active_prefix_;
}

double Router::eviction_risk(int w) const {
  if (config_.cache_blocks <= 0) return 0;
  const Load& l = loads_[static_cast<std::size_t>(w)];
  const double cached = static_cast<double>(index_.blocks(w));
  const double free = std::max(0.0, static_cast<double>(config_.cache_blocks) - cached);
  const double evicted = l.pending_blocks - free;
  if (evicted <= 0) return 0;
  // Blocks of active requests already stored there are pinned: not evictable.
  const double pinned = std::max(0.0, static_cast<double>(l.block_refs.size()) - l.pending_blocks);
  const double evictable = std::max(1.0, cached - pinned);
  return std::min(1.0, evicted / evictable);
}

double Router::keep_share(int w, std::uint64_t last_block) const {
  const double risk = eviction_risk(w);
  if (risk <= 0) return 1.0;
  const Load& l = loads_[static_cast<std::size_t>(w)];
  auto it = l.stamp.find(last_block);
  if (it == l.stamp.end()) return 1.0 - risk;
  const double cached = static_cast<double>(index_.blocks(w));
  const double evicted = l.pending_blocks - std::max(0.0, static_cast<double>(config_.cache_blocks) - cached);
  const double pinned = std::max(0.0, static_cast<double>(l.block_refs.size()) - l.pending_blocks);
  // Touched since: newer than it; those of queued requests are not stored yet.
  const double newer = std::max(0.0, static_cast<double>(l.touches - it->second) - l.pending_blocks);
  const double older = std::max(0.0, cached - pinned - newer);
  return std::clamp(older / evicted, 0.0, 1.0);
}

double Router::cache_wait_s(int w, double blocks) const {
  if (config_.cache_blocks <= 0 || clock_s_ < 0) return 0;
  const double excess = blocks - static_cast<double>(config_.cache_blocks);
  const double per_s = loads_[static_cast<std::size_t>(w)].released / kReleaseWindowS;
  return excess > 0 && per_s > 0 ? excess / per_s : 0;
}

void Router::advance_clock(double now_s) {
  if (clock_s_ >= 0 && now_s > clock_s_) {
    const double decay = std::exp(-(now_s - clock_s_) / kReleaseWindowS);
    for (Load& l : loads_) l.released *= decay;
  }
  clock_s_ = std::max(clock_s_, now_s);
}

void Router::touch(int w, std::span<const std::uint64_t> blocks) {
  if (config_.cache_blocks <= 0) return;
  Load& l = loads_[static_cast<std::size_t>(w)];
  // First blocks last: they are the most recent, as the engines' LRU keeps shared prefixes.
  for (auto h = blocks.rbegin(); h != blocks.rend(); ++h) l.stamp[*h] = ++l.touches;
  // Blocks touched more than a few caches ago are gone from any LRU of this size.
  const std::uint64_t horizon = 4 * static_cast<std::uint64_t>(config_.cache_blocks);
  if (l.stamp.size() > 2 * horizon)
    std::erase_if(l.stamp, [&](const auto& e) { return l.touches - e.second > horizon; });
}

const std::vector<std::size_t>& Router::new_blocks_all(std::span<const std::uint64_t> sequence) {
  new_blocks_.assign(static_cast<std::size_t>(workers_), sequence.size());
  for (std::uint64_t h : sequence) {
    auto it = active_holders_.find(h);
    if (it != active_holders_.end()) it->second.for_each([&](int w) { --new_blocks_[static_cast<std::size_t>(w)]; });
  }
  return new_blocks_;
}

std::size_t Router::new_blocks(int w, std::span<const std::uint64_t> sequence) const {
  const auto& refs = loads_[static_cast<std::size_t>(w)].block_refs;
  std::size_t n = 0;
  for (std::uint64_t h : sequence) n += !refs.contains(h);
  return n;
}

RouteDecision Router::route(std::uint64_t request_id, const RouteQuery& query) {
  if (query.now_s >= 0) advance_clock(query.now_s);
  RouteDecision d = policy_->choose(*this, query);
  Load& l = loads_[static_cast<std::size_t>(d.worker)];
  Active a;
  a.worker = d.worker;
  double cached = cached_tokens(d.local_overlap + d.pull_blocks + d.host_blocks, config_.block_tokens, query.input_tokens);
  a.prefill_tokens = std::max(0.0, query.input_tokens - cached);
  a.prefill_seconds = predicted_prefill_s(std::max(1.0, a.prefill_tokens), std::min(cached, query.input_tokens - 1.0));
  a.blocks.assign(query.sequence.begin(), query.sequence.end());
  a.pending_blocks = static_cast<double>(query.sequence.size()) - std::min<double>(d.local_overlap, static_cast<double>(query.sequence.size()));
  l.pending_blocks += a.pending_blocks;
  l.prefill_tokens += a.prefill_tokens;
  l.prefill_seconds += a.prefill_seconds;
  ++l.active_requests;
  for (std::uint64_t h : a.blocks)
    if (l.block_refs[h]++ == 0) {
      ++l.active_blocks;
      active_holders_[h].set(d.worker);
    }
  touch(d.worker, query.sequence);
  active_[request_id] = std::move(a);
  return d;
}

void Router::prefill_done(std::uint64_t request_id) {
  auto it = active_.find(request_id);
  if (it == active_.end() || !it->second.prefill_pending) return;
  Load& l = loads_[static_cast<std::size_t>(it->second.worker)];
  l.prefill_tokens = std::max(0.0, l.prefill_tokens - it->second.prefill_tokens);
  l.prefill_seconds = std::max(0.0, l.prefill_seconds - it->second.prefill_seconds);
  l.pending_blocks = std::max(0.0, l.pending_blocks - it->second.pending_blocks);
  it->second.prefill_pending = false;
}

void Router::output_block(std::uint64_t request_id) {
  auto it = active_.find(request_id);
  if (it == active_.end()) return;
  ++it->second.output_blocks;
  ++loads_[static_cast<std::size_t>(it->second.worker)].active_blocks;
}

void Router::finished(std::uint64_t request_id) {
  auto it = active_.find(request_id);
  if (it == active_.end()) return;
  prefill_done(request_id);
  Load& l = loads_[static_cast<std::size_t>(it->second.worker)];
  const std::size_t before = l.active_blocks;
  touch(it->second.worker, it->second.blocks);
  for (std::uint64_t h : it->second.blocks) {
    auto ref = l.block_refs.find(h);
    if (ref != l.block_refs.end() && --ref->second == 0) {
      l.block_refs.erase(ref);
      --l.active_blocks;
      auto holders = active_holders_.find(h);
      if (holders != active_holders_.end()) {
        holders->second.reset(it->second.worker);
        if (holders->second.empty()) active_holders_.erase(holders);
      }
    }
  }
  l.active_blocks -= std::min(l.active_blocks, it->second.output_blocks);
  l.released += static_cast<double>(before - l.active_blocks);
  --l.active_requests;
  active_.erase(it);
}

}  // namespace toposched::router
