// HA front: with --store etcd://..., this replica campaigns for leadership, keeps its copy
// of the state current (service/replication.h), answers mutations it may not decide with
// 503 naming the leader, and reports its role on GET /readyz. Registers nothing for other
// stores. Installed first (routes.cc), so its /readyz and its pre-routing check come first.
#include <memory>

#include <fmt/format.h>

#include "service/http.h"
#include "service/replica.h"

namespace toposched::service {
namespace {

// The routes that change the state: their requests go to the leader only.
struct MutationRoute {
  std::string_view method;
  std::string_view path;
  bool path_is_prefix;  // "/v1/jobs/" covers every job's path
  bool dry_run_allowed;  // ?dry_run=1 changes nothing: any replica answers it
};
constexpr MutationRoute kMutationRoutes[] = {
    {"POST", "/v1/jobs", false, true},
    {"DELETE", "/v1/jobs/", true, false},
    {"PUT", "/v1/nodes/", true, false},
};

bool is_mutation(const httplib::Request& req) {
  for (const MutationRoute& route : kMutationRoutes) {
    const bool path_matches = route.path_is_prefix ? req.path.starts_with(route.path) : req.path == route.path;
    if (req.method != route.method || !path_matches) continue;
    if (!route.dry_run_allowed) return true;
    auto dry = req.get_param_value("dry_run");
    return dry.empty() || dry == "0" || dry == "false";
  }
  return false;
}

// 503 {"error":{"code":"not_leader"|"unavailable","message"},"leader":URL} + Location.
void refuse(const Replica& rep, httplib::Response& res) {
  const std::string leader = rep.leader();
  const Error why = rep.refusal();
  nlohmann::json body = {{"error", {{"code", leader.empty() ? "unavailable" : "not_leader"}, {"message", why.message}}},
                         {"leader", leader}};
  if (!leader.empty()) res.set_header("Location", leader);
  res.set_header("Retry-After", "1");
  send_json(res, 503, body.dump());
}

}  // namespace

void install_ha_routes(httplib::Server& http, ServiceContext& ctx) {
  auto replica = ctx.scheduler.store().replicate(
      {ctx.options.advertise, std::chrono::seconds(ctx.options.lease_ttl_s)}, ctx.scheduler.mutable_engine());
  if (!replica) return;  // a store this server uses alone
  Replica* rep = replica.get();  // owned by the scheduler, which outlives the HTTP server
  ctx.scheduler.set_batch_gate(std::move(replica));
  ctx.pre_routing.push_back([rep](const httplib::Request& req, httplib::Response& res) {
    if (!is_mutation(req) || rep->leads()) return false;
    refuse(*rep, res);
    return true;
  });
  http.Get("/readyz", [rep](const httplib::Request&, httplib::Response& res) { send_json(res, 200, rep->status_json()); });
}

}  // namespace toposched::service
