// HA front: with --store etcd://..., the scheduler's replica (Store::replicate, made by
// Scheduler::open before its writer starts) campaigns for leadership and keeps the copy of
// the state current (service/replication.h); this component answers the mutations this
// replica may not decide with 503 naming the leader (a pre-routing step). GET /readyz reports
// the role (health_routes.cc). Not made for a store one server uses alone.
#include <memory>

#include <fmt/format.h>

#include "service/component.h"
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

class HaFront final : public Component {
 public:
  explicit HaFront(const Replica& replica) : replica_(replica) {}
  void install(Endpoints& endpoints) override {
    endpoints.pre_routing.push_back([rep = &replica_](const httplib::Request& req, httplib::Response& res) {
      if (!is_mutation(req) || rep->leads()) return false;
      refuse(*rep, res);
      return true;
    });
  }

 private:
  const Replica& replica_;  // the scheduler's, which outlives every handler
};

}  // namespace

std::unique_ptr<Component> make_ha_front(ServiceContext& ctx) {
  const Replica* replica = ctx.scheduler.replica();
  if (!replica) return nullptr;
  return std::make_unique<HaFront>(*replica);
}

}  // namespace toposched::service
