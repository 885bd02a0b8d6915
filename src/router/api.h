// The router as a service answers it: JSON in, JSON out, for `POST /v1/route`,
// `POST /v1/kv-events`, `GET /v1/kv-index` and `POST /v1/kv-workers` (the HTTP handlers in
// service/ only pass bodies through), and what engine event subscribers
// (router/engine_subscriber.h) apply.
//
//  - route body: {"input_length": N, "block_hashes": [u64...]} with Dynamo's chained
//    sequence hashes, {"input_length": N, "hash_ids": [...]} with per-block content ids
//    (Mooncake's), chained here, or {"token_ids": [u32...], "input_length"?: N} hashed the
//    router's (Dynamo's) way per full block of block_tokens; optional "request_id" (u64) to
//    report its end later; "explain": true adds "overlaps" (every worker's cached prefix,
//    in blocks). Answer: {"worker", "worker_id", "dp_rank", "node", "gpus":
//    ["node:index"...], "overlap_blocks", "tier_overlap_blocks": {tier: n}, "pull_from"
//    (worker or null), "pull_blocks", "cost", "predicted_ttft_s", "policy"}.
//    With a request_id the request stays in flight until `done` (409 for an id already in
//    flight); with max_in_flight set, a route while that many are in flight is shed.
//  - kv-events body: Dynamo's RouterEvent (router/kv_events.h) or {"worker_id", "events":
//    [...]}. Answer: {"applied": n}. A `stored` event whose parent the worker does not hold is
//    refused (kNotFound) and those after it are not applied.
//
// Blocks are indexed under the router's own names: a stored block with a `tokens_hash` is
// named by the chain of tokens hashes from its first block (what a route with token_ids
// computes), found through the engine's `parent_hash` (each worker keeps a map from the
// engine's block hashes to the router's names); a block without one is named by its
// `block_hash` as given (the engine is then trusted to hash the router's way).
//
// Workers: Dynamo's (worker_id u64, dp_rank) pairs take the router's worker slots
// 0..workers-1: (w, 0) with w < workers takes slot w when free; any other pair takes the
// lowest free slot on first sight (or by POST /v1/kv-workers); once every slot is taken,
// events of a new pair are refused (kInfeasible).
// Errors are kInvalidArgument with the JSON path of what is wrong ("events[2].data: ...").
// Thread-safety: RouterService serialises every call on its mutex (router_mutex_).
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <map>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "router/kv_events.h"
#include "router/request_trace.h"
#include "router/router.h"
#include "topology/mutex.h"

namespace toposched::router {

struct RouteServiceOptions {
  std::string model = "llama3-8b";
  int workers = 8;
  int tp = 1;
  std::string policy = "kv-topo";
  int block_tokens = kMooncakeBlockTokens;  // tokens per KV block (the engines' block size)
  double load_weight = kDefaultLoadWeight;  // anti-burst weight (RouterConfig::load_weight)
  // Admission control: at most this many requests in flight (routed with a request_id and
  // not yet reported done); past it a route is shed (429 + Retry-After). 0: no bound.
  std::size_t max_in_flight = 0;
  // KV cache blocks per worker for kv-topo's eviction term (RouterConfig::cache_blocks):
  // 0 = from the time model (GPU memory less weights), < 0 = no term.
  long long cache_blocks = 0;
};

// A route answer, or a shed request: the router's queue is full.
struct RouteReply {
  nlohmann::json answer;
  bool shed = false;
  int retry_after_s = 0;  // when shed: whole seconds, >= 1
};

// Dynamo's RouterEvent JSON (one event or "events": [...]) as RouterEvents.
Result<std::vector<RouterEvent>> parse_router_events(const nlohmann::json& body);

// What applying a batch of events did: applied, refused (unknown parent, no free slot), and
// the first refusal's message.
struct ApplyOutcome {
  std::size_t applied = 0;
  std::size_t refused = 0;
  std::string first_refusal;
};

class RouterService {
 public:
  static Result<std::unique_ptr<RouterService>> create(const Cluster& cluster, const RouteServiceOptions& options);
  // The same on workers placed by the caller (serve holds them as engine jobs first).
  static Result<std::unique_ptr<RouterService>> create(const Cluster& cluster, const RouteServiceOptions& options,
                                                       std::vector<WorkerPlacement> workers);

  // Errors as the body's; a full queue is a RouteReply with shed set, not an error.
  Result<RouteReply> route_or_shed(const nlohmann::json& body);
  // The same with a shed request as an error (kUnavailable).
  Result<nlohmann::json> route(const nlohmann::json& body);
  // {"request_id", "stage"?: "prefill" | "finished" (default)} -> {"request_id", "stage",
  // "in_flight"}: the engine computed the prompt (its prefill leaves the worker's queue) or
  // the request ended (it leaves the router's queue). kNotFound for an id not in flight.
  Result<nlohmann::json> done(const nlohmann::json& body);
  std::size_t in_flight();
  Result<nlohmann::json> kv_events(const nlohmann::json& body);
  // {"worker_id", "dp_rank"?} -> {"worker": slot}: claims a slot (idempotent).
  Result<nlohmann::json> register_worker(const nlohmann::json& body);
  // {"workers": [{"worker", "worker_id", "dp_rank", "blocks": {tier: [router names, sorted]}}]}.
  nlohmann::json dump();
  // POST /v1/route with "request_id" leaves the request active until this.
  void finished(std::uint64_t request_id);

  // Engine subscribers: events of worker slot `slot` (its pair is claimed as (slot, dp 0)
  // unless registered otherwise); an event refused is skipped, the rest applied.
  ApplyOutcome apply_to_slot(int slot, const std::vector<RouterEvent>& events);
  void clear_slot(int slot);  // every tier
  int block_tokens() const { return block_tokens_; }
  int workers() const { return static_cast<int>(workers_.size()); }

 private:
  struct Slot {
    bool claimed = false;
    std::uint64_t worker_id = 0;
    std::uint32_t dp_rank = 0;
    // engine block hash -> router name, per tier
    std::array<std::unordered_map<std::uint64_t, std::uint64_t>, kStorageTiers> names;
  };
  RouterService(const Cluster& cluster, std::vector<WorkerPlacement> workers, Router router, int block_tokens, std::size_t max_in_flight);
  int retry_after_s() REQUIRES(router_mutex_);
  Result<int> slot_for(std::uint64_t worker_id, std::uint32_t dp_rank) REQUIRES(router_mutex_);  // claims
  Result<void> apply_locked(int slot, const RouterEvent& event) REQUIRES(router_mutex_);
  KvIndex& tier_index(StorageTier tier) REQUIRES(router_mutex_);

  const Cluster& cluster_;
  std::vector<WorkerPlacement> workers_;
  int block_tokens_;
  std::size_t max_in_flight_;
  Mutex router_mutex_;
  Router router_ GUARDED_BY(router_mutex_);  // its index is the device tier, its host index host_pinned
  std::array<KvIndex, kStorageTiers - 1> lower_ GUARDED_BY(router_mutex_);  // disk, external (by tier - 1; [0] unused)
  std::vector<Slot> slots_ GUARDED_BY(router_mutex_);
  std::map<std::pair<std::uint64_t, std::uint32_t>, int> slot_of_ GUARDED_BY(router_mutex_);  // (worker_id, dp_rank) -> slot
  std::uint64_t next_anonymous_ GUARDED_BY(router_mutex_) = 1ull << 63;
  // The router's clock (RouteQuery::now_s: seconds since the service started), from which
  // kv-topo measures the rate workers release cache blocks (Router::cache_wait_s).
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace toposched::router
