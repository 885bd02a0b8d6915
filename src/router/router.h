// The request router: which worker should serve a prompt, given what each worker caches
// (the KvIndex, fed by KV events) and how loaded it is, under a named policy.
//
// Workers are model replicas, each a tensor-parallel group of GPUs in one node
// (place_workers). The router keeps, per worker, the bookkeeping Dynamo's KV router keeps
// (lib/llm/src/kv_router/sequence.rs, ActiveSequences): prefill tokens routed there and not
// yet computed, and the unique KV blocks of its active requests (prompt blocks plus one per
// 512 generated tokens). For kv-topo it also keeps an estimate of the seconds of prefill
// queued on each worker, and a worker x worker table of KV transfer times from the cost
// model's point-to-point (send/recv) estimate on the GPUs of the two workers.
//
// Policies (registry table in router.cc, like formats/exporter.cc):
//   round-robin, least-loaded, kv (Dynamo's DefaultWorkerSelector), kv-topo (toposched:
//   kv's cost, where a worker may first pull a longer cached prefix from another worker over
//   the actual path, the transfer's wait priced in prefill blocks; a pull is taken only when
//   it lowers both that cost and the first-token estimate below kv's own choice, or the cost
//   alone when kv's choice is past its cache; the queue a transfer overlaps includes the
//   wait for cache room, from the rate each worker releases blocks: Router::cache_wait_s),
//   kv-pull-blind (kv-topo's rule with every transfer priced as the cluster's fastest path:
//   the topology-blind variant). See docs/router.md.
// The kv family's prefill term carries an anti-burst weight: each request already active on
// a worker adds RouterConfig::load_weight to the weight of the prefill routed there (the
// prefill it would stall; vLLM's chunked prefill puts the chunks in the same iterations as
// the decoding sequences). load_weight 0 is Dynamo's cost exactly.
// kv-topo and kv-pull-blind also price the risk that a cached prefix is evicted before the
// request is admitted (RouterConfig::cache_blocks; Router::eviction_risk): blocks no active
// request holds count only in the share the worker's LRU is expected to keep.
//
// Decisions are deterministic (ties go to the lower worker index). Thread-safety: none;
// one thread at a time (the service holds a mutex around it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "router/kv_index.h"
#include "router/model.h"
#include "topology/registry.h"
#include "topology/cluster.h"

namespace toposched::router {

struct WorkerPlacement {
  NodeId node;
  std::vector<GpuId> gpus;  // tensor-parallel ranks in order
};

// `count` workers of `tp` GPUs each, spread evenly over the nodes in node order (worker i on
// the (i mod nodes)-th node, GPUs taken in index order), so that replicas share nodes as
// little as the cluster allows. Errors: tp larger than a node, not enough GPUs, count out of
// 1..kMaxWorkers.
// `busy` (when not empty, one flag per GPU) marks GPUs already held by others: a worker takes
// only free ones, the lowest-indexed free GPUs of its node.
Result<std::vector<WorkerPlacement>> place_workers(const Cluster& cluster, int count, int tp,
                                                   const std::vector<char>& busy = {});

// Seconds to move `blocks` KV blocks between two workers: latency + blocks / blocks_per_s.
struct TransferCost {
  double latency_s = 0;
  double blocks_per_s = 0;  // 0 on the diagonal (nothing to move)
  double seconds(double blocks) const { return blocks <= 0 || blocks_per_s <= 0 ? 0 : latency_s + blocks / blocks_per_s; }
};

struct TransferTable {
  int workers = 0;
  std::vector<TransferCost> cost;          // [from * workers + to]
  std::vector<std::string> level;          // path level name, same indexing
  const TransferCost& at(int from, int to) const { return cost[static_cast<std::size_t>(from * workers + to)]; }
  const std::string& level_at(int from, int to) const { return level[static_cast<std::size_t>(from * workers + to)]; }
};

// Seconds to load one KV block of `block_bytes` from its node's host memory onto worker w:
// each TP rank its shard over its own GPU's host link (the node type's pcie_GBps); 0 when the
// node type gives no PCIe bandwidth.
double host_load_s_per_block(const Cluster& cluster, const WorkerPlacement& w, double block_bytes);

// TP rank r of the source sends its KV shard to rank r of the destination, all ranks at
// once; each pair is timed with estimate_collective(kSendRecv) at 1 and 16 blocks and the
// two points give latency and rate.
Result<TransferTable> transfer_table(const Cluster& cluster, const std::vector<WorkerPlacement>& workers, double block_bytes);

struct RouteQuery {
  std::span<const std::uint64_t> sequence;  // chained sequence hashes of the prompt's blocks
  int input_tokens = 0;
  // When the request arrives, in seconds on the caller's clock (route: simulated time; serve:
  // seconds since the service started). < 0:
  // unknown; then kv-topo and kv-pull-blind do not estimate the wait for cache room
  // (Router::cache_wait_s), which needs the rate at which workers release blocks over time.
  double now_s = -1;
};

struct RouteDecision {
  int worker = -1;
  int local_overlap = 0;   // blocks the chosen worker already holds
  int pull_from = -1;      // worker to pull the prefix from first, or -1
  int pull_blocks = 0;     // blocks pulled: local_overlap .. local_overlap + pull_blocks
  int host_blocks = 0;     // kv-topo family: blocks after the local prefix the worker loads from its node's host tier
  double cost = 0;         // the policy's score of the chosen worker (lower is better)
  double predicted_ttft_s = 0;  // kv-topo family: its estimate; else 0
};

// The anti-burst weight `route` and `serve` use unless told otherwise (docs/router.md,
// "Anti-burst load term": chosen by the measured sweep there, not derived).
inline constexpr double kDefaultLoadWeight = 1.0;

struct RouterConfig {
  int block_tokens = 512;
  double overlap_score_weight = 1.0;  // Dynamo's default
  // Anti-burst: the prefill term of kv / kv-topo / kv-pull-blind is weighted by
  // (overlap_score_weight + load_weight x active requests on the worker); 0 = Dynamo's cost.
  double load_weight = 0.0;
  // The router's prefill-time predictor scaled against the time model (1 = calibrated; the
  // simulator's robustness runs use 0.7 and 1.4). Transfer estimates are not scaled.
  double predictor_scale = 1.0;
  // Blocks of KV cache per worker (the engines' capacity). > 0 turns on kv-topo's eviction
  // term: a worker whose queued requests will store more blocks than its cache has free
  // evicts its least recently used blocks first, so a cached prefix no active request holds
  // counts only in the expected share that survives (Router::eviction_risk). <= 0: unknown
  // or unlimited, no term.
  long long cache_blocks = 0;
};

class Router;
using PolicyFn = RouteDecision (*)(Router&, const RouteQuery&);

struct PolicyEntry {
  std::string_view name;
  std::string_view description;
  PolicyFn choose;
};
const std::vector<PolicyEntry>& policy_catalog();
const Registry<const PolicyEntry*>& policy_registry();  // the catalog by name
// kNotFound "unknown routing policy 'x'; known: ..." when `name` is unknown.
Result<const PolicyEntry*> find_policy(std::string_view name);

class Router {
 public:
  Router(const PolicyEntry& policy, int workers, TimeModel time, TransferTable transfers, RouterConfig config = {});

  // Chooses a worker and records the request as active there (until finished()).
  RouteDecision route(std::uint64_t request_id, const RouteQuery& query);
  // The request's prompt is computed: its prefill tokens leave the worker's queue.
  void prefill_done(std::uint64_t request_id);
  // One more block of generated tokens on the request's worker.
  void output_block(std::uint64_t request_id);
  void finished(std::uint64_t request_id);

  KvIndex& index() { return index_; }
  const KvIndex& index() const { return index_; }
  // The blocks each worker's node holds in host memory (a host tier: LMCache, Dynamo's KVBM;
  // the simulator's SimConfig::host_cache_gb), and the seconds one block takes to load onto
  // worker w over PCIe. kv-topo and kv-pull-blind count a host-tier extension of a worker's
  // cached prefix as cached, its load on the first-token path; kv (Dynamo's cost) does not.
  KvIndex& host_index() { return host_index_; }
  void set_host_load_s_per_block(std::vector<double> seconds) { host_load_s_per_block_ = std::move(seconds); }
  double host_load_s_per_block(int w) const {
    return static_cast<std::size_t>(w) < host_load_s_per_block_.size() ? host_load_s_per_block_[static_cast<std::size_t>(w)] : 0;
  }
  // Per worker, how many blocks of the last query past `overlap[w]` its host tier holds (0 for
  // all without a host tier).
  const std::vector<int>& host_extensions(std::span<const std::uint64_t> sequence, const std::vector<int>& overlap);
  int workers() const { return workers_; }
  const TimeModel& time_model() const { return time_; }
  const TransferTable& transfers() const { return transfers_; }
  const RouterConfig& config() const { return config_; }
  std::string_view policy_name() const { return policy_->name; }
  // Routed requests not yet finished, over all workers (the router's queue).
  std::size_t in_flight() const { return active_.size(); }
  bool is_active(std::uint64_t request_id) const { return active_.contains(request_id); }
  // The predictor's prefill seconds (TimeModel::prefill_s x predictor_scale).
  double predicted_prefill_s(double tokens, double cached) const { return config_.predictor_scale * time_.prefill_s(tokens, cached); }
  // The kv family's anti-burst addition to the weight of worker w's prefill term.
  double burst_weight(int w) const { return config_.load_weight * loads_[static_cast<std::size_t>(w)].active_requests; }
  // The expected share (0..1) of worker w's cached blocks that no active request holds which
  // its LRU will evict before a request routed there now is admitted: the blocks its queued
  // requests still have to store, less the room its cache has free, over the blocks it could
  // evict (every block held by no active request equally likely: the router does not know
  // their order). 0 without RouterConfig::cache_blocks.
  double eviction_risk(int w) const;
  // The expected share of worker w's cached prefix ending with `last_block` (no active request
  // holding it) left when a request routed there now is admitted. LRU order: the router
  // stamps a worker's blocks when it routes a request there and when the request finishes
  // (Dynamo's blocks become most recent then), so the blocks touched on w since `last_block`
  // are newer than it and evicted after it; it survives when the evictable blocks older than
  // it cover the evictions. A block the router never stamped (stored by an engine's own
  // traffic) falls back to 1 - eviction_risk. 1 without RouterConfig::cache_blocks.
  double keep_share(int w, std::uint64_t last_block) const;
  // Seconds a request routed to worker w now waits for room in w's KV cache: with `blocks`
  // the blocks w's active requests and this one hold (active blocks plus the request's new
  // ones), the excess over RouterConfig::cache_blocks must first be released by requests
  // finishing there, at the rate w has released blocks lately (blocks per second over the
  // last kReleaseWindowS, from finished() and the queries' now_s). The worker computes its
  // queued prefill meanwhile: kv-topo's queue estimate is the later of the two. 0 without
  // cache_blocks, without a clock, at no excess or before w has released anything.
  double cache_wait_s(int w, double blocks) const;
  // Time constant of the release-rate average (cache_wait_s): about two turnovers of a
  // saturated worker's cache in the bundled trace at 3x (docs/router.md, "25 GbE at 3x").
  static constexpr double kReleaseWindowS = 30.0;

  // Per-worker load, as the policies read it.
  struct Load {
    double prefill_tokens = 0;   // routed, not yet computed (Dynamo's active prefill tokens)
    double prefill_seconds = 0;  // the same, timed by the time model
    std::size_t active_blocks = 0;  // unique blocks of active requests
    int active_requests = 0;        // routed and not finished (prefilling or decoding)
    double pending_blocks = 0;      // blocks routed requests will store there (not cached there when routed), prefill not done
    std::unordered_map<std::uint64_t, int> block_refs;  // sequence hash -> active requests using it
    std::uint64_t touches = 0;                           // blocks stamped on the worker so far
    std::unordered_map<std::uint64_t, std::uint64_t> stamp;  // sequence hash -> `touches` when last used there
    double released = 0;  // blocks released by finished requests, decayed by exp(-age / kReleaseWindowS)
  };
  const Load& load(int w) const { return loads_[static_cast<std::size_t>(w)]; }
  // Blocks of `sequence` not among worker w's active blocks (Dynamo's new_blocks).
  std::size_t new_blocks(int w, std::span<const std::uint64_t> sequence) const;
  // The same for every worker at once: one lookup per block, whatever the worker count.
  const std::vector<std::size_t>& new_blocks_all(std::span<const std::uint64_t> sequence);
  // overlap per worker of the last query (filled by prefixes()).
  const std::vector<int>& prefixes(const RouteQuery& q);
  // Per worker, the leading blocks of `sequence` among its active requests' blocks (safe from
  // eviction), capped at `overlap[w]`: one lookup per block until no worker has it active.
  const std::vector<int>& active_prefixes(std::span<const std::uint64_t> sequence, const std::vector<int>& overlap);
  std::uint64_t next_round_robin() { return round_robin_++; }

 private:
  struct Active {
    int worker = -1;
    double prefill_tokens = 0;
    double prefill_seconds = 0;
    bool prefill_pending = true;
    double pending_blocks = 0;  // blocks it will store on its worker (Load::pending_blocks)
    std::vector<std::uint64_t> blocks;
    std::size_t output_blocks = 0;
  };
  const PolicyEntry* policy_;
  int workers_;
  TimeModel time_;
  TransferTable transfers_;
  RouterConfig config_;
  KvIndex index_;
  KvIndex host_index_;
  std::vector<double> host_load_s_per_block_;
  std::vector<int> host_prefix_, host_extension_;
  std::vector<Load> loads_;
  std::vector<int> overlap_;
  std::vector<std::size_t> new_blocks_;
  std::vector<int> active_prefix_;
  std::unordered_map<std::uint64_t, WorkerSet> active_holders_;  // block -> workers with it active
  std::unordered_map<std::uint64_t, Active> active_;
  std::uint64_t round_robin_ = 0;
  double clock_s_ = -1;  // the latest RouteQuery::now_s seen (-1: none)
  void advance_clock(double now_s);  // decays every worker's Load::released to now_s
  void touch(int w, std::span<const std::uint64_t> blocks);  // LRU stamps (keep_share)
};

}  // namespace toposched::router
