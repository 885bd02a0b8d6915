#include "service/component.h"

namespace toposched::service {

namespace {
class RouteGroup final : public Component {
 public:
  RouteGroup(ServiceContext& ctx, InstallFn install) : ctx_(ctx), install_(install) {}
  void install(Endpoints& endpoints) override { install_(endpoints.api, ctx_); }

 private:
  ServiceContext& ctx_;
  InstallFn install_;
};

template <InstallFn Install>
std::unique_ptr<Component> make_routes(ServiceContext& ctx) {
  return routes_only(ctx, Install);
}
}  // namespace

std::unique_ptr<Component> routes_only(ServiceContext& ctx, InstallFn install) {
  return std::make_unique<RouteGroup>(ctx, install);
}

// One row per component (the extension point documented in component.h), in start order;
// they stop in reverse.
const std::vector<ComponentKind>& component_kinds() {
  static const std::vector<ComponentKind> kKinds = {
      {"ha", "etcd store: 503 not_leader for mutations on a follower (role on GET /readyz)", make_ha_front},
      {"health", "GET /healthz, /readyz, /metrics", make_routes<install_health_routes>},
      {"jobs", "POST/GET/DELETE /v1/jobs", make_routes<install_job_routes>},
      {"nodes", "GET /v1/nodes, PUT /v1/nodes/{name}/availability", make_routes<install_node_routes>},
      {"cluster", "GET /v1/cluster, /v1/path, /v1/fragmentation, /v1/export; POST /v1/cost",
       make_routes<install_cluster_routes>},
      {"topograph", "Topograph-compatible POST /v1/generate, GET /v1/topology (one worker thread)",
       make_topograph_queue},
      {"router", "LLM request routing: POST /v1/route, POST /v1/kv-events (Dynamo's KV event schema)", make_router},
      {"slurm", "serve --slurm: the state follows Slurm's jobs; GET /v1/slurm/sync", make_slurm_sync},
      {"k8s-extender", "kube-scheduler extender: POST {prefix}/filter, /prioritize, /bind, /preempt",
       make_k8s_extender},
  };
  return kKinds;
}

}  // namespace toposched::service
