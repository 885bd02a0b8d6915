// Server: `toposched serve`, the HTTP/JSON front of a Service (cpp-httplib, TLS through
// OpenSSL); Service: the composition root that builds what the server serves.
//
// Service::open builds, in this order: the cluster; the store; the scheduler, whose batch
// gate (an HA store's replica: Store::replicate, service/replica.h) is in place before its
// writer starts; then the components (service/component.h: the HA front, the Kubernetes
// extender, the Slurm sync, the Topograph request queue, the LLM router, and the plain
// endpoint groups), each made from its own options and started in table order. Only then
// does the Server install the components' routes, which only route, and accept requests.
// Shutdown runs in reverse: the listeners close and the requests in flight end, the
// components stop last-made first, then the scheduler answers what is queued and stops.
//
// ServeOptions holds the server's own flags and one options struct per component; each
// component reads only its own (cli/cmd_serve.cc registers the flags in the same groups).
//
// Thread-safety: handlers run on the server's worker threads concurrently; everything in a
// ServiceContext is safe to use from them (Scheduler, Metrics and Auth are thread-safe;
// options and cluster are read-only while serving). Server and Service objects are opened
// and stopped from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "service/metrics.h"
#include "service/scheduler.h"
#include "topology/cluster.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace toposched::service {

// serve --k8s-extender and its flags (k8s_routes.cc).
struct ExtenderOptions {
  bool enabled = false;  // --k8s-extender
  // --extender-listen ADDR:PORT: the extender verbs on their own plain-HTTP listener, which
  // needs no token (kube-scheduler's extender config cannot send one); only kube-scheduler
  // may reach it (loopback, or a NetworkPolicy: docs/kubernetes.md). Empty: the verbs are
  // on --listen and, with --token-file, need the token like every other POST.
  std::string listen;
  std::string url_prefix;            // --url-prefix, e.g. /scheduler
  std::string api;                   // --k8s-api URL
  std::string token_file;            // --k8s-token-file (default in-cluster: the service account's)
  std::string ca_file;               // --k8s-ca-file
  int reservation_timeout_s = 300;   // --k8s-reservation-timeout
  bool test_clock = false;           // --k8s-test-clock (tests only: manual clock endpoint)
};

// serve --slurm (slurm_sync.cc).
struct SlurmSyncOptions {
  bool enabled = false;        // --slurm
  double poll_interval_s = 5;  // --slurm-poll-interval
};

// The LLM request router: POST /v1/route, /v1/kv-events (router_routes.cc).
struct RouterFrontOptions {
  std::string model = "llama3-8b";  // --router-model
  int workers = 8;                  // --router-workers
  int tp = 1;                       // --router-tp
  std::string policy = "kv-topo";   // --router-policy
  int block_tokens = 512;           // --router-block-tokens: tokens per KV block (the engines' block size)
  double load_weight = -1;          // --router-load-weight: anti-burst weight (< 0: router::kDefaultLoadWeight)
  std::size_t max_in_flight = 0;    // --router-max-in-flight: admission bound (0: none)
  std::vector<std::string> kv_events;  // --router-kv-events W=ENDPOINT[,replay=ENDPOINT][,topic=T], per worker
  // The replicas are real engines (--router-workers or --router-kv-events given): their GPUs
  // are held in the engine as jobs router:worker-N, so POST /v1/jobs never hands them out.
  bool hold_workers = false;
};

// HA with a shared store (--store etcd://...; service/replication.h).
struct ReplicationFlags {
  std::string advertise;  // --advertise URL followers name as the leader (default: this server's URL)
  int lease_ttl_s = 3;    // --lease-ttl: the leader's etcd lease
};

struct ServeOptions {
  std::string cluster_spec;
  std::string store_url = "sqlite:./toposched-state.db";
  std::string listen = "127.0.0.1:7070";  // ADDR:PORT; port 0 picks a free one
  std::string token_file;                 // bearer token every request but GET/HEAD must carry
  std::string tls_cert, tls_key;          // both or neither
  bool insecure = false;                  // allow a non-loopback address without a token
  std::size_t max_body_bytes = 1 << 20;   // larger bodies get 413
  int max_connections = 1024;             // connections open at once (a thread each); more are closed
  int read_timeout_s = 10;                // per request header/body read
  int write_timeout_s = 10;
  int keep_alive_s = 5;                   // idle keep-alive connections are closed after this
  std::size_t group_commit_max = 256;     // most mutations in one store commit
  std::int64_t event_log_keep = -1;       // --event-log-keep: newest events kept (0 all; -1 the store's default)
  // The components' own options (service/component.h).
  ExtenderOptions k8s;
  SlurmSyncOptions slurm;
  RouterFrontOptions router;
  ReplicationFlags ha;
};

// Bearer-token check (constant-time compare); http_limits.h applies it to every request
// but GET and HEAD before the body is read. Thread-safe.
class Auth {
 public:
  Auth() = default;
  explicit Auth(std::string token) : token_(std::move(token)) {}
  bool required() const { return !token_.empty(); }
  // True when no token is configured or `authorization_header` is "Bearer <token>".
  bool allows(std::string_view authorization_header) const;

 private:
  std::string token_;
};

using PreRoutingHook = std::function<bool(const httplib::Request&, httplib::Response&)>;

// What every component and handler may use; lives as long as the Service.
struct ServiceContext {
  const ServeOptions& options;
  const Cluster& cluster;
  Scheduler& scheduler;
  Metrics& metrics;
  const Auth& auth;
};

class Component;
struct ComponentKind;

// The composition root (see the top of this file): everything `serve` runs but the HTTP
// listeners.
class Service {
 public:
  // `options.ha.advertise` must be set when the store is shared (the Server sets it to its
  // URL). Errors: kInvalidArgument (options, token file), kValidation (store of another
  // cluster), kIo/kUnavailable (files, store), or a component's start error.
  static Result<std::unique_ptr<Service>> open(ServeOptions options);
  // The same with another component table (tests).
  static Result<std::unique_ptr<Service>> open(ServeOptions options, std::span<const ComponentKind> kinds);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  ServiceContext& context() { return *context_; }
  Scheduler& scheduler() { return *scheduler_; }
  // The names of the components made, in start order.
  std::vector<std::string_view> component_names() const;
  // Registers every component's endpoints on `api` (and the extender's on `extender`, which
  // is `api` without --extender-listen); the pre-routing steps they add go to `pre_routing`.
  void install(httplib::Server& api, httplib::Server& extender, std::vector<PreRoutingHook>& pre_routing);
  // Stops the components in reverse order, then the scheduler (after the queued decisions).
  void stop();

 private:
  Service() = default;
  ServeOptions options_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  Auth auth_;
  std::unique_ptr<ServiceContext> context_;
  std::vector<std::unique_ptr<Component>> components_;  // in start order
  std::vector<std::string_view> names_;                 // of components_
  bool stopped_ = false;
};

// A running server: loads the cluster, opens the store, restores, listens.
class Server {
 public:
  // Checks the options (TLS pair, token on non-loopback), loads everything and binds the
  // listening socket; serving starts on a background thread. Errors: kInvalidArgument
  // (options), kValidation (store of another cluster), kIo/kUnavailable (files, bind).
  static Result<std::unique_ptr<Server>> start(ServeOptions options);
  ~Server();

  std::uint16_t port() const { return port_; }
  std::uint16_t extender_port() const { return extender_port_; }  // 0 without --extender-listen
  std::string url() const;  // http(s)://ADDR:PORT
  Scheduler& scheduler() { return service_->scheduler(); }
  Service& service() { return *service_; }
  // Stops accepting, finishes the requests in flight, then stops the service.
  void stop();

 private:
  Server() = default;
  std::string tls_cert_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::uint16_t port_ = 0;
  std::unique_ptr<httplib::Server> extender_http_;  // --extender-listen only
  std::thread extender_listener_;
  std::uint16_t extender_port_ = 0;
  std::string host_;
  std::atomic<bool> stopped_{false};
};

// Runs a server until SIGINT or SIGTERM (the `toposched serve` command); prints the URL it
// listens on to stderr once it is ready.
Result<void> serve_until_signal(ServeOptions options);

}  // namespace toposched::service
