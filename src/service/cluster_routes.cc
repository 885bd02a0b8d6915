// Read-only views of the cluster and its state: GET /v1/cluster (the `show` JSON),
// /v1/path?a=&b= (the `path` JSON), /v1/fragmentation[?sizes=] (the `frag` JSON),
// /v1/export?to=FORMAT[&block_sizes=18,36] (the `export` text), POST /v1/cost (the `cost`
// JSON of one collective).
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "cost/collective.h"
#include "cost/selection.h"
#include "formats/cluster_summary.h"
#include "formats/exporter.h"
#include "placement/fragmentation.h"
#include "service/component.h"
#include "service/http.h"

namespace toposched::service {

namespace {
Result<std::vector<long>> parse_block_sizes(std::string_view text) {
  std::vector<long> sizes;
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    long v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || v <= 0)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("block_sizes: expected comma-separated node counts such as 18,36,72, found '{}'", part));
    sizes.push_back(v);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return sizes;
}

void get_path(ServiceContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!req.has_param("a") || !req.has_param("b"))
    return send_error(res, 400, "invalid_argument", "give two GPUs as ?a=NODE:INDEX&b=NODE:INDEX");
  std::string a_name = req.get_param_value("a"), b_name = req.get_param_value("b");
  auto a = parse_gpu(ctx.cluster, a_name);
  if (!a) return send_error(res, a.error());
  auto b = parse_gpu(ctx.cluster, b_name);
  if (!b) return send_error(res, b.error());
  send_json(res, 200, path_json(ctx.cluster, *a, *b, a_name, b_name).dump());
}

void get_fragmentation(ServiceContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::vector<JobSizeWeight> sizes = default_job_sizes();
  if (req.has_param("sizes")) {
    auto parsed = parse_job_sizes(req.get_param_value("sizes"));
    if (!parsed) return send_error(res, parsed.error());
    sizes = std::move(*parsed);
  }
  FragmentationReport f =
      ctx.scheduler.engine().read([&](const AllocationState& s) { return fragmentation(s, sizes); });
  send_json(res, 200, fragmentation_to_json(f, sizes).dump());
}

// POST /v1/cost {"gpus": SEL, "collective": "allreduce", "bytes": "8G" | 8589934592,
// "algorithm": "auto"} -> the `cost` JSON.
Result<std::string> cost(const Cluster& cluster, const nlohmann::json& body) {
  auto bad = [](std::string m) { return make_error(ErrorCode::kInvalidArgument, std::move(m)); };
  if (!body.is_object()) return bad("expected {\"gpus\":SEL,\"collective\":C,\"bytes\":B}");
  for (const auto& [key, value] : body.items())
    if (key != "gpus" && key != "collective" && key != "bytes" && key != "algorithm")
      return bad(fmt::format("unknown key '{}'; known keys: gpus, collective, bytes, algorithm", key));
  if (!body.contains("gpus") || !body["gpus"].is_string()) return bad("'gpus' must be a GPU selection such as \"dgx[001-004]\"");
  for (const char* key : {"collective", "algorithm"})
    if (body.contains(key) && !body[key].is_string()) return bad(fmt::format("'{}' must be a string", key));
  auto coll = parse_collective(body.value("collective", std::string("allreduce")));
  if (!coll)
    return bad("'collective' must be allreduce, allgather, reduce-scatter, broadcast, reduce, all-to-all or send-recv");
  auto algo = parse_algorithm(body.value("algorithm", std::string("auto")));
  if (!algo) return bad("'algorithm' must be auto, ring, tree, nvls, hierarchical or direct");
  double bytes = 0;
  if (!body.contains("bytes")) return bad("'bytes' is required (a number or a size such as \"8G\")");
  if (body["bytes"].is_number()) {
    bytes = body["bytes"].get<double>();
  } else if (body["bytes"].is_string()) {
    TOPOSCHED_TRY(size, parse_size(body["bytes"].get<std::string>()));
    bytes = size;
  } else {
    return bad("'bytes' must be a number or a size such as \"8G\"");
  }
  if (!(bytes > 0) || !std::isfinite(bytes)) return bad("'bytes' must be a positive finite number");
  TOPOSCHED_TRY(gpus, parse_gpu_selection(cluster, body["gpus"].get<std::string>()));
  TOPOSCHED_TRY(estimate, estimate_collective(cluster, gpus, *coll, bytes, *algo));
  return estimate_to_json(estimate, bytes).dump();
}

void get_export(ServiceContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!req.has_param("to")) return send_error(res, 400, "invalid_argument", "give the format as ?to=FORMAT");
  ExportOptions options;
  if (req.has_param("block_sizes")) {
    auto sizes = parse_block_sizes(req.get_param_value("block_sizes"));
    if (!sizes) return send_error(res, sizes.error());
    options.block_sizes = std::move(*sizes);
  }
  auto out = export_cluster(ctx.cluster, req.get_param_value("to"), options);
  if (!out) return send_error(res, out.error());
  res.set_content(std::move(out->text), "text/plain");
}
}  // namespace

void install_cluster_routes(httplib::Server& http, ServiceContext& ctx) {
  http.Get("/v1/cluster", [&ctx](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, cluster_summary_json(ctx.cluster).dump());
  });
  http.Get("/v1/path", [&ctx](const httplib::Request& req, httplib::Response& res) { get_path(ctx, req, res); });
  http.Get("/v1/fragmentation",
           [&ctx](const httplib::Request& req, httplib::Response& res) { get_fragmentation(ctx, req, res); });
  http.Post("/v1/cost", [&ctx](const httplib::Request& req, httplib::Response& res) {
    auto body = parse_json_body(req);
    if (!body) return send_error(res, body.error());
    auto answer = cost(ctx.cluster, *body);
    if (!answer) return send_error(res, answer.error());
    send_json(res, 200, std::move(*answer));
  });
  http.Get("/v1/export", [&ctx](const httplib::Request& req, httplib::Response& res) { get_export(ctx, req, res); });
}

}  // namespace toposched::service
