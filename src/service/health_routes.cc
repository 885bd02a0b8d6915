// GET /healthz, /readyz and /metrics.
#include <fmt/format.h>

#include "placement/fragmentation.h"
#include "service/component.h"
#include "service/http.h"
#include "service/replica.h"

namespace toposched::service {

void install_health_routes(httplib::Server& http, ServiceContext& ctx) {
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("OK\n", "text/plain"); });
  // Ready = the store was restored and the writer runs (both hold once the server listens);
  // answers with the number of jobs restored/held, or, with a shared store, the replica's
  // role and leader as JSON.
  http.Get("/readyz", [&ctx](const httplib::Request&, httplib::Response& res) {
    if (const Replica* replica = ctx.scheduler.replica()) return send_json(res, 200, replica->status_json());
    res.set_content(fmt::format("OK {} jobs\n", ctx.scheduler.engine().job_count()), "text/plain");
  });
  http.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    ctx.scheduler.engine().read([&](const AllocationState& s) {
      FragmentationReport f = fragmentation(s, default_job_sizes());
      ctx.metrics.set_state(s.cluster().gpu_count() - s.total_free_gpus(), s.total_free_gpus(),
                            static_cast<std::int64_t>(s.job_count()), f.unusable_fraction);
      return 0;
    });
    const UnavailableSummary unavailable = ctx.scheduler.engine().unavailable_summary();
    ctx.metrics.set_unavailable(unavailable.nodes, unavailable.jobs_on_them);
    res.set_content(ctx.metrics.render(), "text/plain; version=0.0.4");
  });
}

}  // namespace toposched::service
