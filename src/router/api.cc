#include "router/api.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "formats/json_input.h"

namespace toposched::router {

namespace {

using Json = nlohmann::json;

tl::unexpected<Error> bad(std::string where, std::string what) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", where, what));
}

// Dynamo writes hashes as u64; engines' hashes reinterpreted as i64 also occur (negative
// numbers): both name the same 64 bits.
Result<std::uint64_t> u64(const Json& j, const std::string& where) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(j.get<std::int64_t>());
  return bad(where, fmt::format("expected an unsigned 64-bit integer, found {}", quote_json(j)));
}

Result<std::uint64_t> hash64(const Json& j, const std::string& where) {
  if (j.is_number_integer() && !j.is_number_unsigned()) return static_cast<std::uint64_t>(j.get<std::int64_t>());
  return u64(j, where);
}

Result<std::vector<std::uint64_t>> u64_list(const Json& body, const char* key, bool signed_ok = false) {
  auto it = body.find(key);
  if (!it->is_array()) return bad(key, fmt::format("expected an array, found {}", it->type_name()));
  std::vector<std::uint64_t> out;
  out.reserve(it->size());
  for (std::size_t i = 0; i < it->size(); ++i) {
    auto v = signed_ok ? hash64((*it)[i], fmt::format("{}[{}]", key, i)) : u64((*it)[i], fmt::format("{}[{}]", key, i));
    if (!v) return tl::unexpected(v.error());
    out.push_back(*v);
  }
  return out;
}

Result<ExternalStored> stored_data(const Json& s, const std::string& where) {
  ExternalStored st;
  if (!s.is_object()) return bad(where, "expected {\"parent_hash\", \"blocks\"}");
  if (auto p = s.find("parent_hash"); p != s.end() && !p->is_null()) {
    TOPOSCHED_TRY(parent, hash64(*p, where + ".parent_hash"));
    st.parent_hash = parent;
  }
  auto blocks = s.find("blocks");
  if (blocks == s.end() || !blocks->is_array()) return bad(where, "expected \"blocks\": an array");
  for (std::size_t i = 0; i < blocks->size(); ++i) {
    const Json& b = (*blocks)[i];
    std::string at = fmt::format("{}.blocks[{}]", where, i);
    if (!b.is_object() || !b.contains("block_hash")) return bad(at, "expected {\"block_hash\", \"tokens_hash\"}");
    TOPOSCHED_TRY(h, hash64(b["block_hash"], at + ".block_hash"));
    ExternalBlock eb{h, std::nullopt};
    if (auto t = b.find("tokens_hash"); t != b.end() && !t->is_null()) {
      TOPOSCHED_TRY(tk, hash64(*t, at + ".tokens_hash"));
      eb.tokens_hash = tk;
    }
    st.blocks.push_back(eb);
  }
  return st;
}

Result<ExternalEventData> event_data(const Json& data, const std::string& where) {
  if (data.is_string() && data.get<std::string>() == "cleared") return KvCleared{};
  if (!data.is_object() || data.size() != 1) return bad(where, "expected {\"stored\": ...}, {\"removed\": ...} or \"cleared\"");
  if (auto s = data.find("stored"); s != data.end()) {
    TOPOSCHED_TRY(st, stored_data(*s, where + ".stored"));
    return st;
  }
  if (auto r = data.find("removed"); r != data.end()) {
    if (!r->is_object() || !r->contains("block_hashes")) return bad(where + ".removed", "expected {\"block_hashes\": [...]}");
    TOPOSCHED_TRY(hashes, u64_list(*r, "block_hashes", true));
    return ExternalRemoved{std::move(hashes)};
  }
  if (auto c = data.find("cleared"); c != data.end()) return KvCleared{};
  return bad(where, fmt::format("unknown event kind '{}'", data.begin().key()));
}

Result<std::uint32_t> dp_rank_of(const Json& j, const std::string& where) {
  TOPOSCHED_TRY(v, u64(j, where));
  if (v > 0xffffffffu) return bad(where, fmt::format("expected a 32-bit dp_rank, found {}", v));
  return static_cast<std::uint32_t>(v);
}

Result<RouterEvent> one_event(const Json& e, const std::string& where, std::uint64_t worker, std::uint32_t dp, StorageTier tier) {
  if (!e.is_object() || !e.contains("data")) return bad(where, "expected {\"event_id\", \"data\"}");
  RouterEvent ev;
  ev.worker_id = worker;
  ev.dp_rank = dp;
  ev.tier = tier;
  if (auto id = e.find("event_id"); id != e.end()) {
    TOPOSCHED_TRY(v, u64(*id, where + ".event_id"));
    ev.event_id = v;
  }
  if (auto r = e.find("dp_rank"); r != e.end() && !r->is_null()) {
    TOPOSCHED_TRY(v, dp_rank_of(*r, where + ".dp_rank"));
    ev.dp_rank = v;
  }
  TOPOSCHED_TRY(data, event_data(e["data"], where + ".data"));
  ev.data = std::move(data);
  return ev;
}

}  // namespace

Result<std::vector<RouterEvent>> parse_router_events(const Json& body) {
  if (!body.is_object() || !body.contains("worker_id")) return bad("body", "expected {\"worker_id\", \"event\" | \"events\"}");
  TOPOSCHED_TRY(worker, u64(body["worker_id"], "worker_id"));
  std::uint32_t dp = 0;
  if (auto r = body.find("dp_rank"); r != body.end() && !r->is_null()) {
    TOPOSCHED_TRY(v, dp_rank_of(*r, "dp_rank"));
    dp = v;
  }
  StorageTier tier = StorageTier::kDevice;
  if (auto t = body.find("storage_tier"); t != body.end() && !t->is_null()) {
    auto parsed = t->is_string() ? parse_storage_tier(t->get<std::string>()) : std::nullopt;
    if (!parsed) return bad("storage_tier", fmt::format("expected device, host_pinned, disk or external, found {}", quote_json(*t)));
    tier = *parsed;
  }
  std::vector<RouterEvent> out;
  if (auto e = body.find("event"); e != body.end()) {
    TOPOSCHED_TRY(ev, one_event(*e, "event", worker, dp, tier));
    out.push_back(std::move(ev));
  } else if (auto es = body.find("events"); es != body.end() && es->is_array()) {
    for (std::size_t i = 0; i < es->size(); ++i) {
      TOPOSCHED_TRY(ev, one_event((*es)[i], fmt::format("events[{}]", i), worker, dp, tier));
      out.push_back(std::move(ev));
    }
  } else {
    return bad("body", "expected \"event\": {...} or \"events\": [...]");
  }
  return out;
}

RouterService::RouterService(const Cluster& cluster, std::vector<WorkerPlacement> workers, Router router, int block_tokens,
                             std::size_t max_in_flight)
    : cluster_(cluster), workers_(std::move(workers)), block_tokens_(block_tokens), max_in_flight_(max_in_flight), router_(std::move(router)) {
  for (KvIndex& i : lower_) i.set_workers(static_cast<int>(workers_.size()));
  slots_.resize(workers_.size());
}

Result<std::unique_ptr<RouterService>> RouterService::create(const Cluster& cluster, const RouteServiceOptions& o) {
  TOPOSCHED_TRY(workers, place_workers(cluster, o.workers, o.tp));
  return create(cluster, o, std::move(workers));
}

Result<std::unique_ptr<RouterService>> RouterService::create(const Cluster& cluster, const RouteServiceOptions& o,
                                                             std::vector<WorkerPlacement> workers) {
  if (o.block_tokens < 1 || o.block_tokens > (1 << 20))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--router-block-tokens: expected 1..1048576, found {}", o.block_tokens));
  if (workers.empty() || static_cast<int>(workers.size()) != o.workers)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{} worker placements for {} workers", workers.size(), o.workers));
  TOPOSCHED_TRY(policy, find_policy(o.policy));
  TOPOSCHED_TRY(model, find_model(o.model));
  TOPOSCHED_TRY(gpu, find_gpu_spec(cluster.node_type(workers.front().node).gpu_model));
  TimeModel time(model, gpu, o.tp);
  TOPOSCHED_TRY(table, transfer_table(cluster, workers, model.kv_bytes_per_token() * o.block_tokens));
  if (!(o.load_weight >= 0) || !std::isfinite(o.load_weight))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--router-load-weight: expected a number >= 0, found {}", o.load_weight));
  RouterConfig config;
  config.block_tokens = o.block_tokens;
  config.load_weight = o.load_weight;
  // kv-topo's eviction term reads the engines' cache size: the time model's (90 % of the
  // group's memory less the weights, vLLM's default) in blocks of the engines' block size.
  config.cache_blocks = o.cache_blocks != 0 ? std::max(0LL, o.cache_blocks)
                                            : static_cast<long long>(time.kv_capacity_tokens() / o.block_tokens);
  Router router(*policy, o.workers, time, std::move(table), config);
  // Host-pinned events name what each engine holds in host memory (vLLM's CPU medium, Dynamo's
  // KVBM host tier): kv-topo counts it at its load over the worker's PCIe links, each TP rank
  // its shard over its own.
  std::vector<double> load_s_per_block;
  for (const WorkerPlacement& w : workers)
    load_s_per_block.push_back(host_load_s_per_block(cluster, w, model.kv_bytes_per_token() * o.block_tokens));
  router.set_host_load_s_per_block(std::move(load_s_per_block));
  return std::unique_ptr<RouterService>(new RouterService(cluster, std::move(workers), std::move(router), o.block_tokens, o.max_in_flight));
}

KvIndex& RouterService::tier_index(StorageTier tier) {
  if (tier == StorageTier::kDevice) return router_.index();
  if (tier == StorageTier::kHostPinned) return router_.host_index();
  return lower_[static_cast<std::size_t>(tier) - 1];
}

Result<int> RouterService::slot_for(std::uint64_t worker_id, std::uint32_t dp_rank) {
  if (auto it = slot_of_.find({worker_id, dp_rank}); it != slot_of_.end()) return it->second;
  const int n = static_cast<int>(slots_.size());
  int slot = -1;
  if (dp_rank == 0 && worker_id < static_cast<std::uint64_t>(n) && !slots_[worker_id].claimed) slot = static_cast<int>(worker_id);
  for (int s = 0; slot < 0 && s < n; ++s)
    if (!slots_[static_cast<std::size_t>(s)].claimed) slot = s;
  if (slot < 0)
    return make_error(ErrorCode::kInfeasible, fmt::format("worker_id {} dp_rank {}: all {} router workers are taken by other engines "
                                                          "(serve --router-workers)", worker_id, dp_rank, n));
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  s.claimed = true;
  s.worker_id = worker_id;
  s.dp_rank = dp_rank;
  slot_of_[{worker_id, dp_rank}] = slot;
  return slot;
}

// Translates the engine's block names into the router's and applies the event to the tier's
// index (see api.h).
Result<void> RouterService::apply_locked(int slot, const RouterEvent& event) {
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  auto& names = s.names[static_cast<std::size_t>(event.tier)];
  KvIndex& index = tier_index(event.tier);
  if (const auto* st = std::get_if<ExternalStored>(&event.data)) {
    std::optional<std::uint64_t> prev;
    if (st->parent_hash) {
      auto it = names.find(*st->parent_hash);
      if (it == names.end() || !index.holds(slot, it->second))
        return make_error(ErrorCode::kNotFound, fmt::format("stored event of worker {} ({}): parent block {} is not cached there", slot,
                                                            storage_tier_name(event.tier), *st->parent_hash));
      prev = it->second;
    }
    for (const ExternalBlock& b : st->blocks) {
      std::uint64_t name = b.tokens_hash ? (prev ? chain_hash(*prev, *b.tokens_hash) : *b.tokens_hash) : b.block_hash;
      names[b.block_hash] = name;
      index.store(slot, name);
      prev = name;
    }
  } else if (const auto* rm = std::get_if<ExternalRemoved>(&event.data)) {
    for (std::uint64_t h : rm->block_hashes) {
      auto it = names.find(h);
      if (it == names.end()) continue;  // never stored here (Dynamo logs and skips too)
      index.remove(slot, it->second);
      names.erase(it);
    }
  } else {
    index.clear(slot);
    names.clear();
  }
  return {};
}

Result<Json> RouterService::kv_events(const Json& body) {
  TOPOSCHED_TRY(events, parse_router_events(body));
  MutexLock lock(router_mutex_);
  std::size_t applied = 0;
  for (const RouterEvent& e : events) {
    TOPOSCHED_TRY(slot, slot_for(e.worker_id, e.dp_rank));
    TOPOSCHED_CHECK(apply_locked(slot, e));
    ++applied;
  }
  return Json{{"applied", applied}};
}

ApplyOutcome RouterService::apply_to_slot(int slot, const std::vector<RouterEvent>& events) {
  ApplyOutcome out;
  MutexLock lock(router_mutex_);
  if (slot < 0 || slot >= static_cast<int>(slots_.size())) {
    out.refused = events.size();
    out.first_refusal = fmt::format("worker {} out of range", slot);
    return out;
  }
  if (!slots_[static_cast<std::size_t>(slot)].claimed) {
    Slot& s = slots_[static_cast<std::size_t>(slot)];
    s.claimed = true;
    s.worker_id = static_cast<std::uint64_t>(slot);
    slot_of_[{s.worker_id, 0}] = slot;
  }
  for (const RouterEvent& e : events) {
    if (auto r = apply_locked(slot, e); r) {
      ++out.applied;
    } else {
      if (out.refused++ == 0) out.first_refusal = r.error().message;
    }
  }
  return out;
}

void RouterService::clear_slot(int slot) {
  MutexLock lock(router_mutex_);
  if (slot < 0 || slot >= static_cast<int>(slots_.size())) return;
  for (int t = 0; t < kStorageTiers; ++t) {
    tier_index(static_cast<StorageTier>(t)).clear(slot);
    slots_[static_cast<std::size_t>(slot)].names[static_cast<std::size_t>(t)].clear();
  }
}

Result<Json> RouterService::register_worker(const Json& body) {
  if (!body.is_object() || !body.contains("worker_id")) return bad("body", "expected {\"worker_id\", \"dp_rank\"?}");
  TOPOSCHED_TRY(id, u64(body["worker_id"], "worker_id"));
  std::uint32_t dp = 0;
  if (auto r = body.find("dp_rank"); r != body.end() && !r->is_null()) {
    TOPOSCHED_TRY(v, dp_rank_of(*r, "dp_rank"));
    dp = v;
  }
  MutexLock lock(router_mutex_);
  TOPOSCHED_TRY(slot, slot_for(id, dp));
  return Json{{"worker", slot}, {"worker_id", id}, {"dp_rank", dp}};
}

Json RouterService::dump() {
  MutexLock lock(router_mutex_);
  Json workers = Json::array();
  for (int w = 0; w < static_cast<int>(slots_.size()); ++w) {
    const Slot& s = slots_[static_cast<std::size_t>(w)];
    Json blocks = Json::object();
    for (int t = 0; t < kStorageTiers; ++t) {
      auto held = tier_index(static_cast<StorageTier>(t)).blocks_of(w);
      if (!held.empty() || t == 0) blocks[std::string(storage_tier_name(static_cast<StorageTier>(t)))] = held;
    }
    workers.push_back(Json{{"worker", w},
                           {"worker_id", s.claimed ? Json(s.worker_id) : Json(nullptr)},
                           {"dp_rank", s.dp_rank},
                           {"blocks", std::move(blocks)}});
  }
  return Json{{"block_tokens", block_tokens_}, {"workers", std::move(workers)}};
}

namespace {

// The prompt's blocks under the router's names, from whichever form the body uses.
Result<std::vector<std::uint64_t>> route_sequence(const Json& body, int block_tokens, std::int64_t& input_length) {
  if (body.contains("block_hashes")) return u64_list(body, "block_hashes", true);
  if (body.contains("hash_ids")) {
    TOPOSCHED_TRY(ids, u64_list(body, "hash_ids"));
    return sequence_hashes(ids);
  }
  if (body.contains("token_ids")) {
    const Json& t = body["token_ids"];
    if (!t.is_array()) return bad("token_ids", fmt::format("expected an array, found {}", t.type_name()));
    std::vector<std::uint32_t> tokens;
    tokens.reserve(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
      TOPOSCHED_TRY(v, u64(t[i], fmt::format("token_ids[{}]", i)));
      if (v > 0xffffffffu) return bad(fmt::format("token_ids[{}]", i), fmt::format("expected a 32-bit token id, found {}", v));
      tokens.push_back(static_cast<std::uint32_t>(v));
    }
    if (input_length == 0) input_length = static_cast<std::int64_t>(tokens.size());
    return token_sequence_hashes(tokens, block_tokens);
  }
  return bad("body", "expected \"block_hashes\" (chained sequence hashes), \"hash_ids\" (block content ids) or \"token_ids\"");
}

}  // namespace

// HTTP's Retry-After is whole seconds: the shortest prefill queue among the workers (the
// router's own estimate of when one of them has room again), at least 1.
int RouterService::retry_after_s() {
  double shortest = std::numeric_limits<double>::infinity();
  for (int w = 0; w < router_.workers(); ++w) shortest = std::min(shortest, router_.load(w).prefill_seconds);
  return static_cast<int>(std::clamp(std::ceil(shortest), 1.0, 3600.0));
}

Result<RouteReply> RouterService::route_or_shed(const Json& body) {
  if (!body.is_object()) return bad("body", "expected a JSON object");
  std::int64_t input_length = 0;
  if (auto len = body.find("input_length"); len != body.end()) {
    if (!len->is_number_integer() || len->get<std::int64_t>() < 1) return bad("input_length", "expected an integer >= 1");
    input_length = len->get<std::int64_t>();
  } else if (!body.contains("token_ids")) {
    return bad("input_length", "expected an integer >= 1");
  }
  TOPOSCHED_TRY(sequence, route_sequence(body, block_tokens_, input_length));
  if (input_length < 1) return bad("token_ids", "expected at least one token");
  std::optional<std::uint64_t> id;
  if (body.contains("request_id")) {
    TOPOSCHED_TRY(rid, u64(body["request_id"], "request_id"));
    id = rid;
  }
  MutexLock lock(router_mutex_);
  if (id && router_.is_active(*id))
    return make_error(ErrorCode::kConflict, fmt::format("request_id {} is already in flight (POST /v1/route/done ends it)", *id));
  if (max_in_flight_ > 0 && router_.in_flight() >= max_in_flight_) {
    RouteReply shed;
    shed.shed = true;
    shed.retry_after_s = retry_after_s();
    shed.answer = Json{{"error",
                        {{"code", "overloaded"},
                         {"message", fmt::format("the router's queue is full: {} requests in flight (--router-max-in-flight {})",
                                                 router_.in_flight(), max_in_flight_)}}},
                       {"in_flight", router_.in_flight()},
                       {"retry_after_s", shed.retry_after_s}};
    return shed;
  }
  const double now_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  RouteDecision d = router_.route(id.value_or(next_anonymous_++),
                                  RouteQuery{sequence, static_cast<int>(std::min<std::int64_t>(input_length, 1 << 30)), now_s});
  if (!id) router_.finished(next_anonymous_ - 1);
  const WorkerPlacement& w = workers_[static_cast<std::size_t>(d.worker)];
  const Slot& slot = slots_[static_cast<std::size_t>(d.worker)];
  Json gpus = Json::array();
  for (GpuId g : w.gpus) gpus.push_back(fmt::format("{}:{}", cluster_.node_name(w.node), cluster_.gpu_local_index(g)));
  Json tiers = Json::object();
  static thread_local std::vector<int> overlap;
  for (int t = 1; t < kStorageTiers; ++t) {
    const KvIndex& index = tier_index(static_cast<StorageTier>(t));
    if (index.distinct_blocks() == 0) continue;
    index.longest_prefixes(sequence, overlap);
    tiers[std::string(storage_tier_name(static_cast<StorageTier>(t)))] = overlap[static_cast<std::size_t>(d.worker)];
  }
  Json answer = Json{{"worker", d.worker},
              {"worker_id", slot.claimed ? slot.worker_id : static_cast<std::uint64_t>(d.worker)},
              {"dp_rank", slot.dp_rank},
              {"node", cluster_.node_name(w.node)},
              {"gpus", std::move(gpus)},
              {"overlap_blocks", d.local_overlap},
              {"tier_overlap_blocks", std::move(tiers)},
              {"pull_from", d.pull_from >= 0 ? Json(d.pull_from) : Json(nullptr)},
              {"pull_blocks", d.pull_blocks},
              {"host_blocks", d.host_blocks},
              {"cost", d.cost},
              {"predicted_ttft_s", d.predicted_ttft_s},
              {"policy", std::string(router_.policy_name())}};
  if (auto ex = body.find("explain"); ex != body.end() && ex->is_boolean() && ex->get<bool>()) answer["overlaps"] = router_.prefixes(RouteQuery{sequence, 1});
  return RouteReply{std::move(answer), false, 0};
}

Result<Json> RouterService::route(const Json& body) {
  TOPOSCHED_TRY(reply, route_or_shed(body));
  if (reply.shed) return make_error(ErrorCode::kUnavailable, reply.answer["error"]["message"].get<std::string>());
  return std::move(reply.answer);
}

void RouterService::finished(std::uint64_t request_id) {
  MutexLock lock(router_mutex_);
  router_.finished(request_id);
}

std::size_t RouterService::in_flight() {
  MutexLock lock(router_mutex_);
  return router_.in_flight();
}

Result<Json> RouterService::done(const Json& body) {
  if (!body.is_object() || !body.contains("request_id")) return bad("body", "expected {\"request_id\", \"stage\"?}");
  TOPOSCHED_TRY(id, u64(body["request_id"], "request_id"));
  std::string stage = "finished";
  if (auto st = body.find("stage"); st != body.end()) {
    if (!st->is_string() || (st->get<std::string>() != "prefill" && st->get<std::string>() != "finished"))
      return bad("stage", fmt::format("expected \"prefill\" or \"finished\", found {}", quote_json(*st)));
    stage = st->get<std::string>();
  }
  MutexLock lock(router_mutex_);
  if (!router_.is_active(id)) return make_error(ErrorCode::kNotFound, fmt::format("request_id {} is not in flight", id));
  if (stage == "prefill") router_.prefill_done(id);
  else router_.finished(id);
  return Json{{"request_id", id}, {"stage", stage}, {"in_flight", router_.in_flight()}};
}

}  // namespace toposched::router
