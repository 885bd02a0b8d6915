#include "service/server.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <arpa/inet.h>
#include <sys/stat.h>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "formats/cluster_source.h"
#include "service/component.h"
#include "service/http.h"
#include "service/replica.h"
#include "service/http_limits.h"
#include "topology/file_io.h"
#include "topology/mutex.h"

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

// The token file: one line of visible characters (a trailing newline is allowed), a
// regular file of at most 4 kB. A second line, a NUL or a device (/dev/zero) is refused at
// start: a two-line file was accepted and then no request could match it.
Result<std::string> read_token(const std::string& path) {
  auto bad = [&](std::string why) { return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", path, why)); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot read the token file: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return bad("the token file must be a regular file");
  if (st.st_size > 4096) return bad(fmt::format("the token file holds {} bytes; a token is one line of at most 4 kB", st.st_size));
  TOPOSCHED_TRY(text, read_text_file(path));
  if (text.ends_with("\n")) text.pop_back();
  if (text.ends_with("\r")) text.pop_back();
  if (text.empty()) return bad("the token file is empty");
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (ch == '\n') return bad("the token file holds more than one line; it must hold the token alone");
    if (c <= ' ' || c == 0x7f)
      return bad("the token holds a space or a control character (NUL, tab, CR); it must be one word of visible characters");
  }
  if (st.st_mode & S_IROTH)
    spdlog::warn("{}: the token file is readable by every user (chmod 600 it)", path);
  return text;
}

// One thread per connection, started when the connection is accepted, at most `limit` at
// once; a connection beyond the limit is refused at once (cpp-httplib closes it unanswered
// when enqueue returns false) rather than queued. A fixed pool of workers was the
// connection limit itself: 200 slowloris connections (one header byte a second) held all 64
// workers, and no /healthz was answered for 30 s. A thread per connection costs an idle
// stack while the client dawdles, so a slow client delays only itself. The library hides
// the accepted socket from the task queue, so there is no per-client limit here
// (docs/service.md, "Limits").
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(std::size_t limit) : limit_(limit) {}
  bool enqueue(std::function<void()> fn) override {
    MutexLock lock(mutex_);
    if (active_ >= limit_) {
      spdlog::warn("refused a connection: {} are open (--max-connections)", active_);
      return false;
    }
    ++active_;
    std::thread([this, fn = std::move(fn)] {
      fn();
      MutexLock done(mutex_);
      --active_;
      ended_.notify_all();  // under the lock: shutdown() may destroy this queue once it sees 0
    }).detach();
    return true;
  }
  // Waits for every connection's thread to end (they end within the read or keep-alive
  // time-out once the listener is closed).
  void shutdown() override {
    MutexLock lock(mutex_);
    while (active_ != 0) ended_.wait(mutex_);
  }

 private:
  std::size_t limit_;
  Mutex mutex_;
  CondVar ended_;  // a connection's thread ended
  std::size_t active_ GUARDED_BY(mutex_) = 0;
};

Result<void> check_options(const ServeOptions& o, const std::string& host) {
  if (o.tls_cert.empty() != o.tls_key.empty()) return tl::unexpected(invalid("--tls-cert and --tls-key go together"));
  if (!is_loopback(host) && o.token_file.empty() && !o.insecure)
    return tl::unexpected(invalid(fmt::format(
        "refusing to serve on non-loopback address '{}' without --token-file (anyone who reaches it could "
        "place and release jobs); give --token-file F, or --insecure to accept that",
        host)));
  if (o.max_connections < 1) return tl::unexpected(invalid("--max-connections must be at least 1"));
  if (!o.k8s.listen.empty() && !o.k8s.enabled)
    return tl::unexpected(invalid("--extender-listen needs --k8s-extender"));
  return {};
}

// Binds `http` to ADDR:PORT (port 0: a free one); the port, or kUnavailable.
Result<std::uint16_t> bind_listener(httplib::Server& http, const std::string& host, int port, const std::string& what) {
  if (port == 0) {
    port = http.bind_to_any_port(host);
  } else if (!http.bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) return make_error(ErrorCode::kUnavailable, fmt::format("cannot listen on {}: address in use or not available", what));
  return static_cast<std::uint16_t>(port);
}

// Starts the accept loop of `http` on a thread and returns once it runs (stop() before
// that would not reach it).
std::thread start_accepting(httplib::Server& http) {
  std::thread t([&http] { http.listen_after_bind(); });
  for (int i = 0; i < 10000 && !http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return t;
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
  http.new_task_queue = [limit] { return new ConnectionThreads(limit); };
  // Statuses httplib sets itself (404 no route, 413 body too large, 400 bad request line or
  // headers)
  // get the JSON error object too; answers a handler wrote are left alone.
  http.set_error_handler(httplib::Server::HandlerWithResponse([max = o.max_body_bytes](const httplib::Request& req,
                                                                                        httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 413 && req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded"))
      // The library caps form-encoded bodies at 8 kB whatever --max-body says.
      send_error(res, 413, "payload_too_large",
                 fmt::format("form-encoded request bodies are limited to {} bytes (curl -d sends that type): send "
                             "'Content-Type: application/json'", CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH));
    else if (res.status == 413)
      send_error(res, 413, "payload_too_large", fmt::format("the request body is larger than {} bytes", max));
    else if (res.status == 404)
      send_error(res, 404, "not_found", fmt::format("no endpoint {} {}", req.method, req.path));
    else if (res.status == 400)
      send_error(res, 400, "bad_request",
                 fmt::format("malformed request line or header fields (at most {} fields of at most {} bytes each)",
                             CPPHTTPLIB_HEADER_MAX_COUNT, CPPHTTPLIB_HEADER_MAX_LENGTH));
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

Result<std::unique_ptr<Service>> Service::open(ServeOptions options) {
  return open(std::move(options), component_kinds());
}

Result<std::unique_ptr<Service>> Service::open(ServeOptions options, std::span<const ComponentKind> kinds) {
  std::unique_ptr<Service> s(new Service());
  s->options_ = std::move(options);
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
  const ReplicaOptions replication{o.ha.advertise, std::chrono::seconds(o.ha.lease_ttl_s)};
  TOPOSCHED_TRY(scheduler,
                Scheduler::open(*s->cluster_, std::move(store), *s->metrics_, o.group_commit_max, &replication));
  s->scheduler_ = std::move(scheduler);
  s->context_.reset(new ServiceContext{s->options_, *s->cluster_, *s->scheduler_, *s->metrics_, s->auth_});
  for (const ComponentKind& kind : kinds) {
    std::unique_ptr<Component> component = kind.make(*s->context_);
    if (!component) continue;
    s->components_.push_back(std::move(component));
    s->names_.push_back(kind.name);
    // On error the destructor stops those already started (this one included), then the scheduler.
    if (auto started = s->components_.back()->start(); !started)
      return make_error(started.error().code, fmt::format("{}: {}", kind.name, started.error().message));
  }
  return s;
}

std::vector<std::string_view> Service::component_names() const { return names_; }

void Service::install(httplib::Server& api, httplib::Server& extender, std::vector<PreRoutingHook>& pre_routing) {
  Endpoints endpoints{api, extender, pre_routing};
  for (auto& component : components_) component->install(endpoints);
}

void Service::stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto it = components_.rbegin(); it != components_.rend(); ++it) (*it)->stop();
  if (scheduler_) scheduler_->stop();
}

Service::~Service() { stop(); }

Result<std::unique_ptr<Server>> Server::start(ServeOptions options) {
  TOPOSCHED_TRY(listen, parse_listen(options.listen));
  TOPOSCHED_CHECK(check_options(options, listen.first));
  std::unique_ptr<Server> s(new Server());
  s->host_ = listen.first;
  s->tls_cert_ = options.tls_cert;
  const ServeOptions& o = options;
  if (o.tls_cert.empty())
    s->http_ = std::make_unique<httplib::Server>();
  else
    s->http_ = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
  if (!s->http_->is_valid())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("cannot use --tls-cert {} / --tls-key {}: not a readable PEM certificate and key",
                                  o.tls_cert, o.tls_key));
  // The HTTP settings need the metrics, which the service owns; they are applied below,
  // before the first request is accepted.
  TOPOSCHED_TRY(port, bind_listener(*s->http_, s->host_, listen.second, o.listen));
  s->port_ = port;
  if (!o.k8s.listen.empty()) {
    TOPOSCHED_TRY(ext, parse_listen(o.k8s.listen));
    s->extender_http_ = std::make_unique<httplib::Server>();
    TOPOSCHED_TRY(ext_port, bind_listener(*s->extender_http_, ext.first, ext.second, o.k8s.listen));
    s->extender_port_ = ext_port;
    if (!is_loopback(ext.first))
      spdlog::warn("--extender-listen {}: the extender verbs need no token; only kube-scheduler may reach this "
                   "address (deploy/kubernetes/networkpolicy.yaml)", o.k8s.listen);
  } else if (o.k8s.enabled && !o.token_file.empty()) {
    spdlog::warn("--k8s-extender with --token-file: the extender verbs need the token, which kube-scheduler "
                 "cannot send; give --extender-listen");
  }
  // The service opens once the port is known: an HA replica advertises its own URL.
  if (options.ha.advertise.empty()) options.ha.advertise = s->url();
  const std::string extender_host = o.k8s.listen.substr(0, o.k8s.listen.rfind(':'));
  TOPOSCHED_TRY(service, Service::open(std::move(options)));
  s->service_ = std::move(service);
  ServiceContext& ctx = s->service_->context();
  configure_http(*s->http_, ctx.options, ctx.metrics);
  if (s->extender_http_) configure_http(*s->extender_http_, ctx.options, ctx.metrics);
  std::vector<PreRoutingHook> pre_routing;
  s->service_->install(*s->http_, s->extender_http_ ? *s->extender_http_ : *s->http_, pre_routing);
  install_request_checks(*s->http_, ctx.options.max_body_bytes, &ctx.auth, std::move(pre_routing));
  s->listener_ = start_accepting(*s->http_);
  if (s->extender_http_) {
    install_request_checks(*s->extender_http_, ctx.options.max_body_bytes, nullptr, {});
    s->extender_listener_ = start_accepting(*s->extender_http_);
    spdlog::info("k8s: the extender verbs are served on http://{}:{} (--extender-listen)", extender_host,
                 s->extender_port_);
  }
  return s;
}

std::string Server::url() const {
  std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return fmt::format("{}://{}:{}", tls_cert_.empty() ? "http" : "https", host, port_);
}

void Server::stop() {
  if (stopped_.exchange(true)) return;
  if (http_) http_->stop();
  if (listener_.joinable()) listener_.join();
  if (extender_http_) extender_http_->stop();
  if (extender_listener_.joinable()) extender_listener_.join();
  if (service_) service_->stop();
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
  spdlog::info("listening on {} (cluster {}, store {}, {} jobs held)", server->url(), server->scheduler().engine().cluster().name(), options_store_url, server->scheduler().engine().job_count());
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  server->stop();
  return {};
}

}  // namespace toposched::service
