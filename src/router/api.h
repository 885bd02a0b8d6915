// The router as a service answers it: JSON in, JSON out, for `POST /v1/route` and
// `POST /v1/kv-events` (the HTTP handlers in service/ only pass bodies through).
//
//  - route body: {"input_length": N, "block_hashes": [u64...]} with Dynamo's chained
//    sequence hashes, or {"input_length": N, "hash_ids": [...]} with per-block content ids
//    (Mooncake's), chained here; optional "request_id" (u64) to report its end later.
//    Answer: {"worker", "node", "gpus": ["node:index"...], "overlap_blocks", "pull_from"
//    (worker or null), "pull_blocks", "cost", "predicted_ttft_s", "policy"}.
//  - kv-events body: Dynamo's RouterEvent, {"worker_id": W, "event": {"event_id": E,
//    "data": {"stored": {"parent_hash": h|null, "blocks": [{"block_hash", "tokens_hash"}]}}
//    | {"removed": {"block_hashes": [...]}} | "cleared"}}, or {"worker_id", "events": [...]}.
//    Answer: {"applied": n}. An event whose parent the worker does not hold is refused
//    (kNotFound) and those after it are not applied.
// Errors are kInvalidArgument with the JSON path of what is wrong ("events[2].data: ...").
// Thread-safety: RouterService serialises every call on its mutex (router_mutex_).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "router/request_trace.h"
#include "router/router.h"

namespace toposched::router {

struct RouteServiceOptions {
  std::string model = "llama3-8b";
  int workers = 8;
  int tp = 1;
  std::string policy = "kv-topo";
};

Result<std::vector<KvEvent>> parse_kv_events(const nlohmann::json& body);

class RouterService {
 public:
  static Result<std::unique_ptr<RouterService>> create(const Cluster& cluster, const RouteServiceOptions& options);

  Result<nlohmann::json> route(const nlohmann::json& body);
  Result<nlohmann::json> kv_events(const nlohmann::json& body);
  // POST /v1/route with "request_id" leaves the request active until this.
  void finished(std::uint64_t request_id);

 private:
  RouterService(const Cluster& cluster, std::vector<WorkerPlacement> workers, Router router)
      : cluster_(cluster), workers_(std::move(workers)), router_(std::move(router)) {}
  const Cluster& cluster_;
  std::vector<WorkerPlacement> workers_;
  std::mutex router_mutex_;
  Router router_;               // guarded by router_mutex_
  std::uint64_t next_anonymous_ = 1ull << 63;  // guarded by router_mutex_
};

}  // namespace toposched::router
