// Topograph's API (github.com/NVIDIA/topograph, docs/api.md), so a Topograph client can use
// toposched as its server: POST /v1/generate takes Topograph's request body and answers 202
// with a request id as plain text; GET /v1/topology?uid=ID answers 200 with the topology
// text, 202 "not completed yet" while it is computed, 404 for an unknown id.
//
// The topology comes from the server's cluster model (provider and nodes of the request are
// not consulted): engine slurm + plugin topology/tree (default) -> `export --to slurm-tree`,
// topology/block (+ blockSizes) -> slurm-block, engine k8s -> k8s-labels, graph -> the
// native JSON spec; engine slurm takes all of Topograph's Slurm engine parameters (plugin,
// blockSizes, blockName, skeletonOnly, topologies: formats/topograph_export.h). Requests
// are computed in order by one worker thread. Bounded (a flood of 1,100 requests on an
// 8,192-node cluster held 1.5 GB): at most kMaxPending wait (more get 503 with
// Retry-After), and the newest results are kept up to kMaxKept of them and kMaxKeptBytes.
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "formats/exporter.h"
#include "formats/json_input.h"
#include "formats/topograph_export.h"
#include "service/component.h"
#include "service/http.h"
#include "topology/mutex.h"

namespace toposched::service {

namespace {
struct TopographJob {
  std::string format;
  ExportOptions options;
  std::optional<TopographParams> slurm;  // engine slurm: Topograph's Slurm engine parameters
};

// Topograph's body -> an export format and options; kInvalidArgument when it asks for
// something toposched cannot produce.
Result<TopographJob> topograph_job(const nlohmann::json& body) {
  auto bad = [](std::string m) { return make_error(ErrorCode::kInvalidArgument, std::move(m)); };
  if (!body.is_object()) return bad("expected Topograph's request object {\"provider\":...,\"engine\":...}");
  TopographJob job{"slurm-tree", {}, std::nullopt};
  const nlohmann::json engine = body.value("engine", nlohmann::json::object());
  if (!engine.is_object()) return bad("'engine' must be an object");
  if (engine.contains("name") && !engine["name"].is_string()) return bad("'engine.name' must be a string");
  const std::string name = engine.value("name", std::string("slurm"));
  const nlohmann::json params = engine.value("params", nlohmann::json::object());
  if (!params.is_object()) return bad("'engine.params' must be an object");
  if (name == "k8s") {
    job.format = "k8s-labels";
  } else if (name == "graph") {
    job.format = "json";
  } else if (name == "slurm") {
    // plugin, blockSizes, blockName, skeletonOnly, topologies: formats/topograph_export.h.
    TOPOSCHED_TRY(slurm, topograph_params_from_json(params));
    job.slurm = std::move(slurm);
    return job;
  } else {
    return bad(fmt::format("engine.name must be slurm, k8s or graph, not '{}'", name));
  }
  if (params.contains("blockSizes")) {
    const auto& sizes = params["blockSizes"];
    if (!sizes.is_array()) return bad("engine.params.blockSizes must be an array of node counts");
    for (const auto& s : sizes) {
      if (!s.is_number_integer() || s.get<long>() <= 0)
        return bad(fmt::format("engine.params.blockSizes: expected positive node counts, found {}", quote_json(s)));
      job.options.block_sizes.push_back(s.get<long>());
    }
  }
  return job;
}

// Request ids, their results, and the worker that computes them.
class TopographRequests {
 public:
  explicit TopographRequests(const Cluster& cluster) : cluster_(cluster) {}
  ~TopographRequests() { stop(); }

  void start() { worker_ = std::thread([this] { run(); }); }
  // Ends the worker after the request it computes (queued ones stay "not completed yet").
  void stop() EXCLUDES(mutex_) {
    {
      MutexLock lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  static constexpr std::size_t kMaxPending = 32;
  static constexpr std::size_t kMaxKept = 1024;
  static constexpr std::size_t kMaxKeptBytes = std::size_t{64} << 20;

  // The new request's id, or nullopt when kMaxPending requests already wait.
  std::optional<std::string> submit(TopographJob job) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (queue_.size() >= kMaxPending) return std::nullopt;
    std::string uid = fmt::format("{:016x}{:016x}", rng_(), rng_());
    results_[uid] = Answer{202, "not completed yet\n"};
    order_.push_back(uid);
    evict_oldest();
    queue_.emplace_back(uid, std::move(job));
    wake_.notify_one();
    return uid;
  }

  struct Answer {
    int status = 404;
    std::string body;
  };
  Answer get(const std::string& uid) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    auto it = results_.find(uid);
    return it == results_.end() ? Answer{404, fmt::format("request '{}' not found\n", uid)} : it->second;
  }

 private:
  void run() {
    while (auto next = next_request()) {
      const TopographJob& job = next->second;
      auto out = job.slurm ? generate_topograph(cluster_, *job.slurm) : export_cluster(cluster_, job.format, job.options);
      finish(next->first, out ? Answer{200, std::move(out->text)}
                              : Answer{http_status(out.error().code), out.error().to_string() + "\n"});
    }
  }

  // The oldest queued request; nothing once the destructor asks the worker to stop.
  std::optional<std::pair<std::string, TopographJob>> next_request() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    while (!stopping_ && queue_.empty()) wake_.wait(mutex_);
    if (stopping_) return std::nullopt;
    auto next = std::move(queue_.front());
    queue_.pop_front();
    return next;
  }

  // Keeps the answer to request `uid` unless it was evicted meanwhile.
  void finish(const std::string& uid, Answer answer) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (auto it = results_.find(uid); it != results_.end()) {
      kept_bytes_ += answer.body.size();
      it->second = std::move(answer);
    }
    evict_oldest();
  }

  // Drops the oldest results past kMaxKept or kMaxKeptBytes (never the newest one).
  void evict_oldest() REQUIRES(mutex_) {
    while (order_.size() > 1 && (order_.size() > kMaxKept || kept_bytes_ > kMaxKeptBytes)) {
      if (auto it = results_.find(order_.front()); it != results_.end()) {
        if (it->second.status != 202) kept_bytes_ -= it->second.body.size();
        results_.erase(it);
      }
      order_.pop_front();
    }
  }

  const Cluster& cluster_;
  Mutex mutex_;
  CondVar wake_;  // a request was queued, or stop() asks the worker to end
  std::map<std::string, Answer> results_ GUARDED_BY(mutex_);
  std::deque<std::string> order_ GUARDED_BY(mutex_);
  std::size_t kept_bytes_ GUARDED_BY(mutex_) = 0;  // bodies of finished results_
  std::deque<std::pair<std::string, TopographJob>> queue_ GUARDED_BY(mutex_);
  std::mt19937_64 rng_ GUARDED_BY(mutex_) = std::mt19937_64(std::random_device{}());
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread worker_;
};

// The request queue and its worker, and the two endpoints over them.
class TopographQueue final : public Component {
 public:
  explicit TopographQueue(const Cluster& cluster) : requests_(std::make_shared<TopographRequests>(cluster)) {}
  Result<void> start() override {
    requests_->start();
    return {};
  }
  void stop() override { requests_->stop(); }
  void install(Endpoints& endpoints) override { install_endpoints(endpoints.api, requests_); }

 private:
  // The handlers share the queue: cpp-httplib keeps them until the server is destroyed.
  static void install_endpoints(httplib::Server& http, const std::shared_ptr<TopographRequests>& requests) {
    http.Post("/v1/generate", [requests](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_json_body(req);
      if (!body) return send_error(res, body.error());
      auto job = topograph_job(*body);
      if (!job) return send_error(res, job.error());
      auto uid = requests->submit(std::move(*job));
      if (!uid) {
        res.set_header("Retry-After", "1");
        return send_error(res, 503, "busy", "too many /v1/generate requests are waiting; retry later");
      }
      res.status = 202;
      res.set_content(std::move(*uid), "text/plain");
    });
    http.Get("/v1/topology", [requests](const httplib::Request& req, httplib::Response& res) {
      if (!req.has_param("uid")) return send_error(res, 400, "invalid_argument", "give the request id as ?uid=ID");
      auto r = requests->get(req.get_param_value("uid"));
      res.status = r.status;
      res.set_content(std::move(r.body), "text/plain");
    });
  }

  std::shared_ptr<TopographRequests> requests_;
};
}  // namespace

std::unique_ptr<Component> make_topograph_queue(ServiceContext& ctx) {
  return std::make_unique<TopographQueue>(ctx.cluster);
}

}  // namespace toposched::service
