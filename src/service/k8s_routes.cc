// The Kubernetes scheduler-extender verbs (docs/kubernetes.md), installed when `serve` runs
// with --k8s-extender: POST {prefix}/filter, /prioritize, /bind, /preempt (the table of
// k8s/extender.h), and with --k8s-test-clock the test-only POST {prefix}/test/clock.
//
// The extender reserves through the service's own Scheduler (k8s::EngineLedger), so its
// reservations are durable jobs like those of POST /v1/jobs and both share one set of GPUs.
// A background thread, started and stopped with the component, expires reservations once a
// second (the planner also expires them on every call). Handlers only decode, call the
// extender and send its bytes.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "k8s/extender.h"
#include "service/component.h"
#include "service/http.h"
#include "topology/mutex.h"

namespace toposched::service {

namespace {

// Everything the verbs share; owned by the handlers (shared_ptr), so it lives as long as
// the HTTP server's routes.
class ExtenderRuntime {
 public:
  ExtenderRuntime(ServiceContext& ctx, std::optional<k8s::BindingClient> api)
      : ledger_(ctx.scheduler.engine(), [&scheduler = ctx.scheduler](Command c) { return scheduler.submit(std::move(c)); }),
        planner_(ledger_, clock(ctx.options.k8s.test_clock),
                 k8s::PlannerOptions{"topo", static_cast<std::int64_t>(ctx.options.k8s.reservation_timeout_s) * 1000}),
        extender_(planner_, std::move(api)) {}

  ~ExtenderRuntime() { stop(); }

  void start() { sweeper_ = std::thread([this] { sweep(); }); }
  void stop() {
    stop_.request();
    if (sweeper_.joinable()) sweeper_.join();
  }

  k8s::Extender& extender() { return extender_; }
  void advance_test_clock(std::int64_t ms) {
    manual_ms_ += ms;
    log_released(planner_.expire());
  }

 private:
  k8s::Clock clock(bool manual) {
    if (!manual) return k8s::steady_clock_ms();
    return [this] { return manual_ms_.load(); };
  }

  static void log_released(const std::vector<std::string>& jobs) {
    for (const auto& job : jobs) spdlog::info("k8s: reservation of {} expired and released", job);
  }

  void sweep() {
    while (!stop_.sleep_for(std::chrono::seconds(1))) log_released(planner_.expire());
  }

  std::atomic<std::int64_t> manual_ms_{0};
  k8s::EngineLedger ledger_;  // every reservation is a committed decision of the service's scheduler
  k8s::GangPlanner planner_;
  k8s::Extender extender_;
  StopSignal stop_;
  std::thread sweeper_;  // expires reservations once a second, from start() to stop()
};


void install_verbs(httplib::Server& http, const ExtenderOptions& o, const std::shared_ptr<ExtenderRuntime>& runtime) {
  std::string prefix = o.url_prefix;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  for (const k8s::ExtenderVerb& verb : k8s::extender_verbs()) {
    http.Post(fmt::format("{}/{}", prefix, verb.name),
              [runtime, handle = verb.handle](const httplib::Request& req, httplib::Response& res) {
                k8s::ExtenderReply reply = (runtime->extender().*handle)(req.body);
                send_json(res, reply.status, std::move(reply.body));
              });
  }
  if (!o.test_clock) return;
  spdlog::warn("k8s: --k8s-test-clock: the extender's clock only moves through POST {}/test/clock", prefix);
  http.Post(fmt::format("{}/test/clock", prefix), [runtime](const httplib::Request& req, httplib::Response& res) {
    long long ms = 0;
    const std::string v = req.has_param("advance_ms") ? req.get_param_value("advance_ms") : "";
    try {
      std::size_t used = 0;
      ms = std::stoll(v, &used);
      if (used != v.size() || ms < 0) throw std::invalid_argument(v);
    } catch (...) {
      return send_error(res, 400, "invalid_argument", "give ?advance_ms=N with N >= 0");
    }
    runtime->advance_test_clock(ms);
    send_json(res, 200, "{}");
  });
}

// serve --k8s-extender: the runtime (planner, ledger, reservation sweeper) and its verbs,
// on --extender-listen's listener when there is one.
class K8sExtender final : public Component {
 public:
  K8sExtender(const ExtenderOptions& options, std::shared_ptr<ExtenderRuntime> runtime)
      : options_(options), runtime_(std::move(runtime)) {}
  Result<void> start() override {
    runtime_->start();
    return {};
  }
  void stop() override { runtime_->stop(); }
  void install(Endpoints& endpoints) override { install_verbs(endpoints.extender, options_, runtime_); }

 private:
  const ExtenderOptions& options_;
  std::shared_ptr<ExtenderRuntime> runtime_;  // shared with the handlers
};

}  // namespace

std::unique_ptr<Component> make_k8s_extender(ServiceContext& ctx) {
  const ExtenderOptions& o = ctx.options.k8s;
  if (!o.enabled) return nullptr;
  auto api = k8s::resolve_api_server(o.api, o.token_file, o.ca_file,
                                     [](const char* name) -> const char* { return std::getenv(name); });
  if (api) spdlog::info("k8s: binding pods through {}", api->url);
  else spdlog::warn("k8s: no API server (no --k8s-api, not in a cluster): the bind verb will answer an Error");
  auto runtime = std::make_shared<ExtenderRuntime>(
      ctx, api ? std::optional<k8s::BindingClient>(k8s::BindingClient(*api)) : std::nullopt);
  return std::make_unique<K8sExtender>(o, std::move(runtime));
}

}  // namespace toposched::service
