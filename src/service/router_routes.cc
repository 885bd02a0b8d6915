// POST /v1/route and POST /v1/kv-events: the LLM request router (router/api.h) behind the
// service. Handlers parse the body, call RouterService and serialise its answer; the
// router is built once at installation from ServeOptions' router_* fields. When its workers
// do not fit the cluster (or the model or GPU is unknown), both endpoints answer 501 with why.
// Thread-safety: RouterService serialises calls on its own mutex.
#include <memory>

#include <fmt/format.h>

#include "router/api.h"
#include "service/http.h"

namespace toposched::service {

void install_router_routes(httplib::Server& http, ServiceContext& ctx) {
  router::RouteServiceOptions o{ctx.options.router_model, ctx.options.router_workers, ctx.options.router_tp, ctx.options.router_policy};
  auto created = router::RouterService::create(ctx.cluster, o);
  std::shared_ptr<router::RouterService> service;
  std::string why;
  if (created) service = std::move(*created);
  else why = created.error().message;
  auto handle = [&ctx, service, why](bool events) {
    return [&ctx, service, why, events](const httplib::Request& req, httplib::Response& res) {
      if (!authorize(ctx, req, res)) return;
      if (!service) return send_error(res, 501, "unsupported", fmt::format("the router is not configured: {}", why));
      auto body = parse_json_body(req);
      if (!body) return send_error(res, body.error());
      auto answer = events ? service->kv_events(*body) : service->route(*body);
      if (!answer) return send_error(res, answer.error());
      send_json(res, 200, answer->dump());
    };
  };
  http.Post("/v1/route", handle(false));
  http.Post("/v1/kv-events", handle(true));
}

}  // namespace toposched::service
