// The LLM request router (router/api.h) behind the service:
//   POST /v1/route, POST /v1/kv-events (Dynamo's RouterEvent), POST /v1/kv-workers (claim a
//   worker slot for a Dynamo worker id), GET /v1/kv-index (dump of the index), GET
//   /v1/kv-subscribers (state of the engine event subscribers).
// Handlers parse the body, call RouterService and serialise its answer; the router is built
// once at installation from ServeOptions' router_* fields, and with --router-kv-events an
// EngineSubscriber feeds it the engines' ZMQ events (stopped by the server's stop hooks).
// When its workers do not fit the cluster (or the model or GPU is unknown, or an endpoint
// is malformed), every endpoint answers 501 with why.
// Thread-safety: RouterService serialises calls on its own mutex.
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "router/api.h"
#include "router/engine_subscriber.h"
#include "service/http.h"

namespace toposched::service {

namespace {

struct RouterState {
  std::shared_ptr<router::RouterService> service;
  std::shared_ptr<router::EngineSubscriber> subscriber;
  std::string why;  // not empty when the router could not be built
};

RouterState build_router(ServiceContext& ctx) {
  const ServeOptions& so = ctx.options;
  router::RouteServiceOptions o{so.router_model, so.router_workers, so.router_tp, so.router_policy, so.router_block_tokens};
  RouterState st;
  auto created = router::RouterService::create(ctx.cluster, o);
  if (!created) {
    st.why = created.error().message;
    return st;
  }
  st.service = std::move(*created);
  std::vector<router::EngineEndpoint> endpoints;
  for (const std::string& spec : so.router_kv_events) {
    auto e = router::parse_engine_endpoint(spec, st.service->workers());
    if (!e) {
      st.why = e.error().message;
      st.service.reset();
      return st;
    }
    endpoints.push_back(std::move(*e));
  }
  if (endpoints.empty()) return st;
  auto sub = router::EngineSubscriber::start(*st.service, std::move(endpoints), [](const std::string& m) { spdlog::warn("{}", m); });
  if (!sub) {
    st.why = sub.error().message;
    st.service.reset();
    return st;
  }
  st.subscriber = std::move(*sub);
  spdlog::info("router: subscribed to {} engine KV event publishers", so.router_kv_events.size());
  return st;
}

}  // namespace

void install_router_routes(httplib::Server& http, ServiceContext& ctx) {
  auto state = std::make_shared<RouterState>(build_router(ctx));
  if (!state->why.empty() && !ctx.options.router_kv_events.empty()) spdlog::error("router: {}", state->why);
  if (state->subscriber) ctx.stop_hooks.push_back([state] { state->subscriber->stop(); });
  enum class Kind { kRoute, kEvents, kWorkers, kIndex, kSubscribers };
  auto handle = [&ctx, state](Kind kind) {
    return [&ctx, state, kind](const httplib::Request& req, httplib::Response& res) {
      if (!authorize(ctx, req, res)) return;
      if (!state->service) return send_error(res, 501, "unsupported", fmt::format("the router is not configured: {}", state->why));
      if (kind == Kind::kIndex) return send_json(res, 200, state->service->dump().dump());
      if (kind == Kind::kSubscribers)
        return send_json(res, 200, (state->subscriber ? state->subscriber->status() : nlohmann::json{{"subscribers", nlohmann::json::array()}}).dump());
      auto body = parse_json_body(req);
      if (!body) return send_error(res, body.error());
      auto answer = kind == Kind::kEvents    ? state->service->kv_events(*body)
                    : kind == Kind::kWorkers ? state->service->register_worker(*body)
                                             : state->service->route(*body);
      if (!answer) return send_error(res, answer.error());
      send_json(res, 200, answer->dump());
    };
  };
  http.Post("/v1/route", handle(Kind::kRoute));
  http.Post("/v1/kv-events", handle(Kind::kEvents));
  http.Post("/v1/kv-workers", handle(Kind::kWorkers));
  http.Get("/v1/kv-index", handle(Kind::kIndex));
  http.Get("/v1/kv-subscribers", handle(Kind::kSubscribers));
}

}  // namespace toposched::service
