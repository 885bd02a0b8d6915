// The LLM request router (router/api.h) behind the service:
//   POST /v1/route (429 + Retry-After when --router-max-in-flight requests are in flight),
//   POST /v1/route/done (a request's prefill computed, or the request ended), POST /v1/kv-events (Dynamo's RouterEvent), POST /v1/kv-workers (claim a
//   worker slot for a Dynamo worker id), GET /v1/kv-index (dump of the index), GET
//   /v1/kv-subscribers (state of the engine event subscribers).
// Handlers parse the body, call RouterService and serialise its answer; the router is built
// once when the component starts, from ServeOptions' `router` options (its replicas held as
// jobs through the scheduler), and with --router-kv-events an EngineSubscriber feeds it the
// engines' ZMQ events (stopped with the component).
// When its workers do not fit the cluster (or the model or GPU is unknown, or an endpoint
// is malformed), every endpoint answers 501 with why.
// Thread-safety: RouterService serialises calls on its own mutex.
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "router/api.h"
#include "router/engine_subscriber.h"
#include "service/component.h"
#include "service/http.h"
#include "topology/mutex.h"

namespace toposched::service {

namespace {

struct RouterState {
  std::shared_ptr<router::RouterService> service;
  std::shared_ptr<router::EngineSubscriber> subscriber;
  std::string why;         // not empty when the router could not be built
  bool retryable = false;  // the workers could not be held for now (an HA replica not leading yet)
};

std::string worker_job_id(int w) { return fmt::format("router:worker-{}", w); }

// The workers' GPUs as the engine holds them: a worker already held (restored from the store)
// keeps its GPUs; the others are placed on GPUs no job holds and held through the scheduler
// (committed like any job, policy "router"), so no POST /v1/jobs answer includes them and a
// restart finds them again. A held worker of another size is an error naming the fix.
Result<std::vector<router::WorkerPlacement>> hold_workers(ServiceContext& ctx) {
  const RouterFrontOptions& so = ctx.options.router;
  const Cluster& c = ctx.cluster;
  std::vector<std::optional<router::WorkerPlacement>> held(static_cast<std::size_t>(std::max(0, so.workers)));
  std::vector<char> busy(c.gpu_count(), 0);
  ctx.scheduler.engine().read([&](const AllocationState& s) {
    for (std::size_t g = 0; g < busy.size(); ++g) busy[g] = !s.gpu_free(GpuId(static_cast<std::uint32_t>(g)));
    for (std::size_t w = 0; w < held.size(); ++w) {
      const auto gpus = s.job_gpus(worker_job_id(static_cast<int>(w)));
      if (!gpus.empty()) held[w] = router::WorkerPlacement{c.gpu_node(gpus.front()), {gpus.begin(), gpus.end()}};
    }
  });
  int missing = 0;
  for (std::size_t w = 0; w < held.size(); ++w) {
    if (!held[w]) {
      ++missing;
      continue;
    }
    const auto& gpus = held[w]->gpus;
    const bool one_node = std::all_of(gpus.begin(), gpus.end(), [&](GpuId g) { return c.gpu_node(g) == held[w]->node; });
    if (static_cast<int>(gpus.size()) != so.tp || !one_node)
      return make_error(ErrorCode::kConflict,
                        fmt::format("job {} holds {} GPUs{} but --router-tp is {}: release it (DELETE /v1/jobs/{}) or "
                                    "serve with the --router-tp it was placed with",
                                    worker_job_id(static_cast<int>(w)), gpus.size(), one_node ? "" : " on several nodes",
                                    so.tp, worker_job_id(static_cast<int>(w))));
  }
  if (missing > 0) {
    TOPOSCHED_TRY(fresh, router::place_workers(c, missing, so.tp, busy));
    std::size_t next = 0;
    for (std::size_t w = 0; w < held.size(); ++w) {
      if (held[w]) continue;
      Command hold;
      hold.kind = Command::Kind::kPlace;
      hold.place.job.job_id = worker_job_id(static_cast<int>(w));
      hold.place.policy = "router";
      hold.hold_gpus = fresh[next].gpus;
      TOPOSCHED_TRY(decision, ctx.scheduler.submit(std::move(hold)));
      (void)decision;
      held[w] = std::move(fresh[next++]);
    }
  }
  std::vector<router::WorkerPlacement> out;
  for (auto& w : held) out.push_back(std::move(*w));
  return out;
}

RouterState build_router(ServiceContext& ctx) {
  const RouterFrontOptions& so = ctx.options.router;
  router::RouteServiceOptions o{so.model,  so.workers,      so.tp,
                                so.policy, so.block_tokens, so.load_weight < 0 ? router::kDefaultLoadWeight : so.load_weight,
                                so.max_in_flight};
  RouterState st;
  std::vector<router::WorkerPlacement> workers;  // empty: placed on an empty cluster, held by nobody
  if (so.hold_workers) {
    auto held = hold_workers(ctx);
    if (!held) {
      st.why = fmt::format("router workers not held: {}", held.error().message);
      st.retryable = held.error().code == ErrorCode::kUnavailable;
      return st;
    }
    workers = std::move(*held);
  }
  auto created = workers.empty() ? router::RouterService::create(ctx.cluster, o)
                                 : router::RouterService::create(ctx.cluster, o, std::move(workers));
  if (!created) {
    st.why = created.error().message;
    return st;
  }
  st.service = std::move(*created);
  std::vector<router::EngineEndpoint> endpoints;
  for (const std::string& spec : so.kv_events) {
    auto e = router::parse_engine_endpoint(spec, st.service->workers());
    if (!e) {
      st.why = e.error().message;
      st.service.reset();
      return st;
    }
    endpoints.push_back(std::move(*e));
  }
  if (endpoints.empty()) return st;
  auto sub = router::EngineSubscriber::start(*st.service, std::move(endpoints), [](const std::string& m) { spdlog::warn("{}", m); });
  if (!sub) {
    st.why = sub.error().message;
    st.service.reset();
    return st;
  }
  st.subscriber = std::move(*sub);
  spdlog::info("router: subscribed to {} engine KV event publishers", so.kv_events.size());
  return st;
}

// The router, built when the component starts; when its workers could not be held then (an
// HA replica that does not lead yet: the hold is a write), built again on a later request, so
// the replica that becomes leader holds them (or finds them in the store, held by the previous
// leader).
class RouterHolder {
 public:
  explicit RouterHolder(ServiceContext& ctx) : ctx_(ctx) {}
  void build() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    state_ = build_router(ctx_);
    log();
    built_.store(state_.service != nullptr, std::memory_order_release);
  }
  // Once built the state never changes again, so routing takes no lock then.
  RouterState current() EXCLUDES(mutex_) {
    if (built_.load(std::memory_order_acquire)) return built_state();
    MutexLock lock(mutex_);
    if (!state_.service && state_.retryable) {
      state_ = build_router(ctx_);
      log();
      built_.store(state_.service != nullptr, std::memory_order_release);
    }
    return state_;
  }
  void stop() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (state_.subscriber) state_.subscriber->stop();
  }

 private:
  // Read without the lock: once built_ is set (release, read here after an acquire load),
  // state_ is never written again.
  const RouterState& built_state() const NO_THREAD_SAFETY_ANALYSIS { return state_; }
  void log() const REQUIRES(mutex_) {
    if (!state_.why.empty() && ctx_.options.router.hold_workers) spdlog::error("router: {}", state_.why);
  }
  ServiceContext& ctx_;
  Mutex mutex_;
  RouterState state_ GUARDED_BY(mutex_);  // until built_; read-only from then on
  std::atomic<bool> built_{false};         // state_ holds a router
};

void install_endpoints(httplib::Server& http, ServiceContext& ctx, const std::shared_ptr<RouterHolder>& holder) {
  enum class Kind { kRoute, kDone, kEvents, kWorkers, kIndex, kSubscribers };
  auto handle = [&ctx, holder](Kind kind) {
    return [&ctx, holder, kind](const httplib::Request& req, httplib::Response& res) {
      if (!authorize(ctx, req, res)) return;
      const RouterState state = holder->current();
      if (!state.service) return send_error(res, 501, "unsupported", fmt::format("the router is not configured: {}", state.why));
      if (kind == Kind::kIndex) return send_json(res, 200, state.service->dump().dump());
      if (kind == Kind::kSubscribers)
        return send_json(res, 200, (state.subscriber ? state.subscriber->status() : nlohmann::json{{"subscribers", nlohmann::json::array()}}).dump());
      auto body = parse_json_body(req);
      if (!body) return send_error(res, body.error());
      if (kind == Kind::kRoute) {
        auto reply = state.service->route_or_shed(*body);
        if (!reply) return send_error(res, reply.error());
        // Admission control: the router's queue is full; the client is told when to retry.
        if (reply->shed) res.set_header("Retry-After", std::to_string(reply->retry_after_s));
        return send_json(res, reply->shed ? 429 : 200, reply->answer.dump());
      }
      auto answer = kind == Kind::kEvents    ? state.service->kv_events(*body)
                    : kind == Kind::kWorkers ? state.service->register_worker(*body)
                                             : state.service->done(*body);
      if (!answer) return send_error(res, answer.error());
      send_json(res, 200, answer->dump());
    };
  };
  http.Post("/v1/route", handle(Kind::kRoute));
  http.Post("/v1/route/done", handle(Kind::kDone));
  http.Post("/v1/kv-events", handle(Kind::kEvents));
  http.Post("/v1/kv-workers", handle(Kind::kWorkers));
  http.Get("/v1/kv-index", handle(Kind::kIndex));
  http.Get("/v1/kv-subscribers", handle(Kind::kSubscribers));
}

// The router and its endpoints (made always: unconfigured, they answer 501 with why).
class RouterFront final : public Component {
 public:
  explicit RouterFront(ServiceContext& ctx) : ctx_(ctx), holder_(std::make_shared<RouterHolder>(ctx)) {}
  // A router that cannot be built is not fatal: its endpoints say why (an HA follower builds
  // it again once it leads).
  Result<void> start() override {
    holder_->build();
    return {};
  }
  void stop() override { holder_->stop(); }
  void install(Endpoints& endpoints) override { install_endpoints(endpoints.api, ctx_, holder_); }

 private:
  ServiceContext& ctx_;
  std::shared_ptr<RouterHolder> holder_;  // shared with the handlers
};

}  // namespace

std::unique_ptr<Component> make_router(ServiceContext& ctx) { return std::make_unique<RouterFront>(ctx); }

}  // namespace toposched::service
