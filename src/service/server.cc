#include "service/server.h"

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <mutex>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "formats/cluster_source.h"
#include "service/http.h"
#include "topology/file_io.h"

namespace toposched::service {

namespace {
Error invalid(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message), {}}; }

// Splits "ADDR:PORT" ("[::1]:7070" for IPv6).
Result<std::pair<std::string, int>> parse_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return tl::unexpected(invalid(fmt::format("--listen: expected ADDR:PORT such as 127.0.0.1:7070, found '{}'", listen)));
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = -1;
  try {
    std::size_t used = 0;
    port = std::stoi(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535)
    return tl::unexpected(invalid(fmt::format("--listen: the port must be 0..65535, found '{}'", listen.substr(colon + 1))));
  return std::make_pair(host, port);
}

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

Result<std::string> read_token(const std::string& path) {
  TOPOSCHED_TRY(text, read_text_file(path));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.erase(text.begin());
  if (text.empty()) return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: the token file is empty", path));
  return text;
}

// At most `limit` connections are served at once; the acceptor waits for a free worker,
// so further clients wait in the kernel's listen backlog instead of piling up in memory.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  explicit BoundedTaskQueue(std::size_t limit) : limit_(limit), pool_(limit) {}
  void enqueue(std::function<void()> fn) override {
    {
      std::unique_lock lock(mutex_);
      free_.wait(lock, [this] { return active_ < limit_; });
      ++active_;
    }
    pool_.enqueue([this, fn = std::move(fn)] {
      fn();
      {
        std::lock_guard lock(mutex_);
        --active_;
      }
      free_.notify_one();
    });
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  std::size_t limit_;
  std::mutex mutex_;
  std::condition_variable free_;
  std::size_t active_ = 0;  // guarded by mutex_
  httplib::ThreadPool pool_;
};

Result<void> check_options(const ServeOptions& o, const std::string& host) {
  if (o.tls_cert.empty() != o.tls_key.empty()) return tl::unexpected(invalid("--tls-cert and --tls-key go together"));
  if (!is_loopback(host) && o.token_file.empty() && !o.insecure)
    return tl::unexpected(invalid(fmt::format(
        "refusing to serve on non-loopback address '{}' without --token-file (anyone who reaches it could "
        "place and release jobs); give --token-file F, or --insecure to accept that",
        host)));
  if (o.max_connections < 1) return tl::unexpected(invalid("--max-connections must be at least 1"));
  return {};
}

void configure_http(httplib::Server& http, const ServeOptions& o, Metrics& metrics) {
  http.set_payload_max_length(o.max_body_bytes);
  http.set_read_timeout(o.read_timeout_s, 0);
  http.set_write_timeout(o.write_timeout_s, 0);
  http.set_keep_alive_timeout(o.keep_alive_s);
  http.set_keep_alive_max_count(100000);
  // Answers go out as header and body writes; with Nagle's algorithm on, the second waits
  // for the client's delayed ACK (40 ms on Linux) on every keep-alive request.
  http.set_tcp_nodelay(true);
  const auto limit = static_cast<std::size_t>(o.max_connections);
  http.new_task_queue = [limit] { return new BoundedTaskQueue(limit); };
  // Statuses httplib sets itself (404 no route, 413 body too large, 400 bad request line)
  // get the JSON error object too; answers a handler wrote are left alone.
  http.set_error_handler(httplib::Server::HandlerWithResponse([max = o.max_body_bytes](const httplib::Request& req,
                                                                                        httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 413)
      send_error(res, 413, "payload_too_large", fmt::format("the request body is larger than {} bytes", max));
    else if (res.status == 404)
      send_error(res, 404, "not_found", fmt::format("no endpoint {} {}", req.method, req.path));
    else
      send_error(res, res.status, "http", fmt::format("HTTP error {}", res.status));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, "internal", what);
  });
  http.set_logger([&metrics](const httplib::Request&, const httplib::Response& res) { metrics.count_http(res.status); });
}
}  // namespace

Result<std::unique_ptr<Server>> Server::start(ServeOptions options) {
  TOPOSCHED_TRY(listen, parse_listen(options.listen));
  TOPOSCHED_CHECK(check_options(options, listen.first));
  std::unique_ptr<Server> s(new Server());
  s->options_ = std::move(options);
  s->host_ = listen.first;
  const ServeOptions& o = s->options_;
  if (!o.token_file.empty()) {
    TOPOSCHED_TRY(token, read_token(o.token_file));
    s->auth_ = Auth(std::move(token));
  }
  TOPOSCHED_TRY(cluster, load_cluster(o.cluster_spec));
  s->cluster_ = std::make_unique<Cluster>(std::move(cluster));
  s->metrics_ = std::make_unique<Metrics>();
  TOPOSCHED_TRY(store, open_store(o.store_url));
  if (o.event_log_keep >= 0) store->set_event_log_limit(o.event_log_keep);
  TOPOSCHED_TRY(scheduler, Scheduler::open(*s->cluster_, std::move(store), *s->metrics_, o.group_commit_max));
  s->scheduler_ = std::move(scheduler);
  s->context_.reset(new ServiceContext{s->options_, *s->cluster_, *s->scheduler_, *s->metrics_, s->auth_});
  if (o.tls_cert.empty())
    s->http_ = std::make_unique<httplib::Server>();
  else
    s->http_ = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
  if (!s->http_->is_valid())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("cannot use --tls-cert {} / --tls-key {}: not a readable PEM certificate and key",
                                  o.tls_cert, o.tls_key));
  configure_http(*s->http_, o, *s->metrics_);
  int port = listen.second;
  if (port == 0) {
    port = s->http_->bind_to_any_port(s->host_);
  } else if (!s->http_->bind_to_port(s->host_, port)) {
    port = -1;
  }
  if (port <= 0)
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("cannot listen on {}: address in use or not available", o.listen));
  s->port_ = static_cast<std::uint16_t>(port);
  // Routes are installed once the port is known: an HA replica advertises its own URL.
  if (s->options_.advertise.empty()) s->options_.advertise = s->url();
  for (const RouteSet& r : route_sets()) r.install(*s->http_, *s->context_);
  s->listener_ = std::thread([http = s->http_.get()] { http->listen_after_bind(); });
  // Answer only once the accept loop runs: stop() before that would not reach it.
  for (int i = 0; i < 10000 && !s->http_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

std::string Server::url() const {
  std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return fmt::format("{}://{}:{}", options_.tls_cert.empty() ? "http" : "https", host, port_);
}

void Server::stop() {
  if (stopped_.exchange(true)) return;
  if (http_) http_->stop();
  if (listener_.joinable()) listener_.join();
  if (context_)
    for (auto& hook : context_->stop_hooks) hook();
  if (scheduler_) scheduler_->stop();
}

Server::~Server() { stop(); }

Result<void> serve_until_signal(ServeOptions options) {
  // Diagnostics and the per-mutation log lines go to stderr; stdout stays free.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("toposched"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // Blocked in every thread (inherited), delivered to sigwait below.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  const std::string options_store_url = options.store_url;
  TOPOSCHED_TRY(server, Server::start(std::move(options)));
  spdlog::info("listening on {} (cluster {}, store {}, {} jobs restored)", server->url(), server->scheduler().engine().cluster().name(), options_store_url, server->scheduler().engine().job_count());
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  server->stop();
  return {};
}

}  // namespace toposched::service
