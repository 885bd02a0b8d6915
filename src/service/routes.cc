#include "service/server.h"

namespace toposched::service {

// One row per endpoint group (the extension point documented in server.h).
const std::vector<RouteSet>& route_sets() {
  static const std::vector<RouteSet> kRoutes = {
      // First: its pre-routing check sends mutations on a follower to the leader, and its
      // /readyz (role, leader) replaces health's. Installs nothing unless the store is etcd.
      {"ha", "etcd store: leader election, 503 not_leader on followers, GET /readyz with the role", install_ha_routes},
      {"health", "GET /healthz, /readyz, /metrics", install_health_routes},
      {"jobs", "POST/GET/DELETE /v1/jobs", install_job_routes},
      {"nodes", "GET /v1/nodes, PUT /v1/nodes/{name}/availability", install_node_routes},
      {"cluster", "GET /v1/cluster, /v1/path, /v1/fragmentation, /v1/export; POST /v1/cost", install_cluster_routes},
      {"topograph", "Topograph-compatible POST /v1/generate, GET /v1/topology", install_topograph_routes},
      {"router", "LLM request routing: POST /v1/route, POST /v1/kv-events (Dynamo's KV event schema)", install_router_routes},
      {"slurm", "serve --slurm: the state follows Slurm's jobs; GET /v1/slurm/sync", install_slurm_sync},
      {"k8s-extender", "kube-scheduler extender: POST {prefix}/filter, /prioritize, /bind, /preempt",
       install_k8s_extender_routes},
  };
  return kRoutes;
}

}  // namespace toposched::service
