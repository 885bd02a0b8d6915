#include "router/api.h"

#include <fmt/format.h>

#include "formats/json_input.h"

namespace toposched::router {

namespace {

using Json = nlohmann::json;

tl::unexpected<Error> bad(std::string where, std::string what) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", where, what));
}

Result<std::uint64_t> u64(const Json& j, const std::string& where) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<std::int64_t>() >= 0))
    return bad(where, fmt::format("expected an unsigned 64-bit integer, found {}", quote_json(j)));
  return j.get<std::uint64_t>();
}

Result<std::vector<std::uint64_t>> u64_list(const Json& body, const char* key) {
  auto it = body.find(key);
  if (!it->is_array()) return bad(key, fmt::format("expected an array, found {}", it->type_name()));
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < it->size(); ++i) {
    TOPOSCHED_TRY(v, u64((*it)[i], fmt::format("{}[{}]", key, i)));
    out.push_back(v);
  }
  return out;
}

Result<KvEventData> event_data(const Json& data, const std::string& where) {
  if (data.is_string() && data.get<std::string>() == "cleared") return KvCleared{};
  if (!data.is_object() || data.size() != 1) return bad(where, "expected {\"stored\": ...}, {\"removed\": ...} or \"cleared\"");
  if (auto s = data.find("stored"); s != data.end()) {
    KvStored st;
    if (auto p = s->find("parent_hash"); p != s->end() && !p->is_null()) {
      TOPOSCHED_TRY(parent, u64(*p, where + ".stored.parent_hash"));
      st.parent_hash = parent;
    }
    auto blocks = s->find("blocks");
    if (blocks == s->end() || !blocks->is_array()) return bad(where + ".stored", "expected \"blocks\": an array");
    for (std::size_t i = 0; i < blocks->size(); ++i) {
      const Json& b = (*blocks)[i];
      std::string at = fmt::format("{}.stored.blocks[{}]", where, i);
      if (!b.is_object() || !b.contains("block_hash")) return bad(at, "expected {\"block_hash\", \"tokens_hash\"}");
      TOPOSCHED_TRY(h, u64(b["block_hash"], at + ".block_hash"));
      std::uint64_t t = 0;
      if (b.contains("tokens_hash")) {
        TOPOSCHED_TRY(tk, u64(b["tokens_hash"], at + ".tokens_hash"));
        t = tk;
      }
      st.blocks.push_back({h, t});
    }
    return st;
  }
  if (auto r = data.find("removed"); r != data.end()) {
    if (!r->is_object() || !r->contains("block_hashes")) return bad(where + ".removed", "expected {\"block_hashes\": [...]}");
    TOPOSCHED_TRY(hashes, u64_list(*r, "block_hashes"));
    return KvRemoved{std::move(hashes)};
  }
  return bad(where, fmt::format("unknown event kind '{}'", data.begin().key()));
}

}  // namespace

Result<std::vector<KvEvent>> parse_kv_events(const Json& body) {
  if (!body.is_object() || !body.contains("worker_id")) return bad("body", "expected {\"worker_id\", \"event\" | \"events\"}");
  TOPOSCHED_TRY(worker, u64(body["worker_id"], "worker_id"));
  std::vector<const Json*> events;
  std::vector<std::string> names;
  if (auto e = body.find("event"); e != body.end()) {
    events.push_back(&*e);
    names.push_back("event");
  } else if (auto es = body.find("events"); es != body.end() && es->is_array()) {
    for (std::size_t i = 0; i < es->size(); ++i) {
      events.push_back(&(*es)[i]);
      names.push_back(fmt::format("events[{}]", i));
    }
  } else {
    return bad("body", "expected \"event\": {...} or \"events\": [...]");
  }
  std::vector<KvEvent> out;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Json& e = *events[i];
    if (!e.is_object() || !e.contains("data")) return bad(names[i], "expected {\"event_id\", \"data\"}");
    KvEvent ev;
    ev.worker = static_cast<int>(std::min<std::uint64_t>(worker, kMaxWorkers));
    if (e.contains("event_id")) {
      TOPOSCHED_TRY(id, u64(e["event_id"], names[i] + ".event_id"));
      ev.event_id = id;
    }
    TOPOSCHED_TRY(data, event_data(e["data"], names[i] + ".data"));
    ev.data = std::move(data);
    out.push_back(std::move(ev));
  }
  return out;
}

Result<std::unique_ptr<RouterService>> RouterService::create(const Cluster& cluster, const RouteServiceOptions& o) {
  TOPOSCHED_TRY(policy, find_policy(o.policy));
  TOPOSCHED_TRY(model, find_model(o.model));
  TOPOSCHED_TRY(workers, place_workers(cluster, o.workers, o.tp));
  TOPOSCHED_TRY(gpu, find_gpu_spec(cluster.node_type(workers.front().node).gpu_model));
  TimeModel time(model, gpu, o.tp);
  TOPOSCHED_TRY(table, transfer_table(cluster, workers, model.kv_bytes_per_token() * kMooncakeBlockTokens));
  Router router(*policy, o.workers, time, std::move(table));
  return std::unique_ptr<RouterService>(new RouterService(cluster, std::move(workers), std::move(router)));
}

Result<Json> RouterService::route(const Json& body) {
  if (!body.is_object()) return bad("body", "expected a JSON object");
  auto len = body.find("input_length");
  if (len == body.end() || !len->is_number_integer() || len->get<std::int64_t>() < 1) return bad("input_length", "expected an integer >= 1");
  std::vector<std::uint64_t> sequence;
  if (body.contains("block_hashes")) {
    TOPOSCHED_TRY(h, u64_list(body, "block_hashes"));
    sequence = std::move(h);
  } else if (body.contains("hash_ids")) {
    TOPOSCHED_TRY(ids, u64_list(body, "hash_ids"));
    sequence = sequence_hashes(ids);
  } else {
    return bad("body", "expected \"block_hashes\" (chained sequence hashes) or \"hash_ids\" (block content ids)");
  }
  std::optional<std::uint64_t> id;
  if (body.contains("request_id")) {
    TOPOSCHED_TRY(rid, u64(body["request_id"], "request_id"));
    id = rid;
  }
  std::lock_guard lock(router_mutex_);
  RouteDecision d = router_.route(id.value_or(next_anonymous_++), RouteQuery{sequence, static_cast<int>(len->get<std::int64_t>())});
  if (!id) router_.finished(next_anonymous_ - 1);
  const WorkerPlacement& w = workers_[static_cast<std::size_t>(d.worker)];
  Json gpus = Json::array();
  for (GpuId g : w.gpus) gpus.push_back(fmt::format("{}:{}", cluster_.node_name(w.node), cluster_.gpu_local_index(g)));
  return Json{{"worker", d.worker},
              {"node", cluster_.node_name(w.node)},
              {"gpus", std::move(gpus)},
              {"overlap_blocks", d.local_overlap},
              {"pull_from", d.pull_from >= 0 ? Json(d.pull_from) : Json(nullptr)},
              {"pull_blocks", d.pull_blocks},
              {"cost", d.cost},
              {"predicted_ttft_s", d.predicted_ttft_s},
              {"policy", std::string(router_.policy_name())}};
}

Result<Json> RouterService::kv_events(const Json& body) {
  TOPOSCHED_TRY(events, parse_kv_events(body));
  std::lock_guard lock(router_mutex_);
  std::size_t applied = 0;
  for (const KvEvent& e : events) {
    TOPOSCHED_CHECK(router_.index().apply(e));
    ++applied;
  }
  return Json{{"applied", applied}};
}

void RouterService::finished(std::uint64_t request_id) {
  std::lock_guard lock(router_mutex_);
  router_.finished(request_id);
}

}  // namespace toposched::router
