// POST /v1/jobs (place; ?dry_run=1 decides without holding), GET /v1/jobs,
// GET /v1/jobs/{id}, DELETE /v1/jobs/{id} (release).
#include <fmt/format.h>

#include "service/component.h"
#include "service/http.h"

namespace toposched::service {

namespace {
bool dry_run_requested(const httplib::Request& req) {
  if (!req.has_param("dry_run")) return false;
  std::string v = req.get_param_value("dry_run");
  return v == "1" || v == "true" || v.empty();
}

void post_job(ServiceContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const bool dry_run = dry_run_requested(req);
  if (!dry_run && !authorize(ctx, req, res)) return;
  auto body = parse_json_body(req);
  if (!body) return send_error(res, body.error());
  auto request = place_request_from_json(*body);
  if (!request) return send_error(res, request.error());
  Command command;
  command.kind = Command::Kind::kPlace;
  command.place = std::move(*request);
  auto decision = dry_run ? ctx.scheduler.dry_run(std::move(command)) : ctx.scheduler.submit(std::move(command));
  if (!decision) return send_error(res, decision.error());
  if (!dry_run) res.set_header("Location", fmt::format("/v1/jobs/{}", decision->job_id));
  send_json(res, dry_run ? 200 : 201, std::move(decision->answer_json));
}

void delete_job(ServiceContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!authorize(ctx, req, res)) return;
  Command command;
  command.kind = Command::Kind::kRelease;
  command.job_id = req.matches[1];
  auto decision = ctx.scheduler.submit(std::move(command));
  if (!decision) return send_error(res, decision.error());
  send_json(res, 200, std::move(decision->answer_json));
}
}  // namespace

void install_job_routes(httplib::Server& http, ServiceContext& ctx) {
  http.Post("/v1/jobs", [&ctx](const httplib::Request& req, httplib::Response& res) { post_job(ctx, req, res); });
  http.Get("/v1/jobs", [&ctx](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, ctx.scheduler.engine().jobs_json());
  });
  http.Get(R"(/v1/jobs/([^/]+))", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    auto job = ctx.scheduler.engine().job_json(id);
    if (!job) return send_error(res, 404, "not_found", fmt::format("no job '{}'", id));
    send_json(res, 200, std::move(*job));
  });
  http.Delete(R"(/v1/jobs/([^/]+))",
              [&ctx](const httplib::Request& req, httplib::Response& res) { delete_job(ctx, req, res); });
}

}  // namespace toposched::service
