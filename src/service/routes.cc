#include "service/server.h"

namespace toposched::service {

// One row per endpoint group (the extension point documented in server.h).
const std::vector<RouteSet>& route_sets() {
  static const std::vector<RouteSet> kRoutes = {
      {"health", "GET /healthz, /readyz, /metrics", install_health_routes},
      {"jobs", "POST/GET/DELETE /v1/jobs", install_job_routes},
      {"cluster", "GET /v1/cluster, /v1/path, /v1/fragmentation, /v1/export; POST /v1/cost", install_cluster_routes},
      {"topograph", "Topograph-compatible POST /v1/generate, GET /v1/topology", install_topograph_routes},
  };
  return kRoutes;
}

}  // namespace toposched::service
