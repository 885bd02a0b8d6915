// GET /v1/nodes, GET /v1/nodes/{name}: every node (or one) with its availability, GPUs and
// jobs; PUT /v1/nodes/{name}/availability: a source marks the node unavailable, or lifts
// its mark (placement/node_availability.h). The PUT is idempotent: asking for the state the
// node already has commits nothing and answers the same.
#include <fmt/format.h>

#include "service/component.h"
#include "service/http.h"

namespace toposched::service {

namespace {
void send_node(ServiceContext& ctx, const std::string& name, httplib::Response& res) {
  auto node = ctx.scheduler.engine().node_json(name);
  if (!node) return send_error(res, 404, "not_found", fmt::format("no node named '{}' in cluster '{}'", name, ctx.cluster.name()));
  send_json(res, 200, std::move(*node));
}

void put_availability(ServiceContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!authorize(ctx, req, res)) return;
  const std::string name = req.matches[1];
  if (!ctx.cluster.find_node(name))
    return send_error(res, 404, "not_found", fmt::format("no node named '{}' in cluster '{}'", name, ctx.cluster.name()));
  auto body = parse_json_body(req);
  if (!body) return send_error(res, body.error());
  auto change = node_availability_from_json(name, *body);
  if (!change) return send_error(res, change.error());
  Command command;
  command.kind = Command::Kind::kSetNodeAvailability;
  command.availability = std::move(*change);
  auto decision = ctx.scheduler.submit(std::move(command));
  if (!decision) return send_error(res, decision.error());
  send_node(ctx, name, res);
}
}  // namespace

void install_node_routes(httplib::Server& http, ServiceContext& ctx) {
  http.Get("/v1/nodes", [&ctx](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, ctx.scheduler.engine().nodes_json());
  });
  http.Get(R"(/v1/nodes/([^/]+))",
           [&ctx](const httplib::Request& req, httplib::Response& res) { send_node(ctx, req.matches[1], res); });
  http.Put(R"(/v1/nodes/([^/]+)/availability)",
           [&ctx](const httplib::Request& req, httplib::Response& res) { put_availability(ctx, req, res); });
}

}  // namespace toposched::service
