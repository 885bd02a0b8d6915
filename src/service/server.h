// Server: `toposched serve`, the HTTP/JSON front of a Scheduler (cpp-httplib, TLS through
// OpenSSL), and the extension point other front ends plug their endpoints into.
//
// Extension point: endpoints live in files under src/service/, one file per group (jobs,
// cluster, topograph, ...). Each file defines a RouteInstaller and adds ONE row to the
// table in routes.cc:
//
//     void install_k8s_extender_routes(httplib::Server& http, ServiceContext& ctx);   // k8s_routes.cc
//     {"k8s-extender", "Kubernetes scheduler extender verbs", install_k8s_extender_routes},
//
// An installer registers its handlers with http.Get/Post/Delete (paths may use
// ctx.options.url_prefix), reads its own options from ctx.options (ServeOptions below holds
// the flags of every front end: --k8s-extender, --url-prefix, --k8s-api, --slurm, and the
// --store URL for etcd), decides through ctx.scheduler and answers with the helpers of
// service/http.h (send_json, send_error, authorize). An installer whose flag is off
// registers nothing. Handlers only parse, call and serialise (DESIGN.md).
//
// Thread-safety: handlers run on the server's worker threads concurrently; everything in a
// ServiceContext is safe to use from them (Scheduler, Metrics and Auth are thread-safe;
// options and cluster are read-only while serving). A Server object itself is started and
// stopped from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
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
  // Front ends built on the service (their installers read these).
  bool k8s_extender = false;  // --k8s-extender
  // --extender-listen ADDR:PORT: the extender verbs on their own plain-HTTP listener, which
  // needs no token (kube-scheduler's extender config cannot send one); only kube-scheduler
  // may reach it (loopback, or a NetworkPolicy: docs/kubernetes.md). Empty: the verbs are
  // on --listen and, with --token-file, need the token like every other POST.
  std::string extender_listen;
  std::string url_prefix;     // --url-prefix, e.g. /scheduler
  std::string k8s_api;        // --k8s-api URL
  std::string k8s_token_file;  // --k8s-token-file (default in-cluster: the service account's)
  std::string k8s_ca_file;     // --k8s-ca-file
  int k8s_reservation_timeout_s = 300;  // --k8s-reservation-timeout
  bool k8s_test_clock = false;          // --k8s-test-clock (tests only: manual clock endpoint)
  bool slurm = false;         // --slurm
  // The LLM request router (POST /v1/route, /v1/kv-events; router_routes.cc).
  std::string router_model = "llama3-8b";  // --router-model
  int router_workers = 8;                  // --router-workers
  int router_tp = 1;                       // --router-tp
  std::string router_policy = "kv-topo";   // --router-policy
  int router_block_tokens = 512;           // --router-block-tokens: tokens per KV block (the engines' block size)
  double router_load_weight = -1;          // --router-load-weight: anti-burst weight (< 0: router::kDefaultLoadWeight)
  std::size_t router_max_in_flight = 0;    // --router-max-in-flight: admission bound (0: none)
  std::vector<std::string> router_kv_events;  // --router-kv-events W=ENDPOINT[,replay=ENDPOINT][,topic=T], per worker
  // The replicas are real engines (--router-workers or --router-kv-events given): their GPUs
  // are held in the engine as jobs router:worker-N, so POST /v1/jobs never hands them out.
  bool router_hold_workers = false;
  double slurm_poll_interval_s = 5;  // --slurm-poll-interval
  // HA (--store etcd://...; service/replication.h).
  std::string advertise;      // --advertise URL followers name as the leader (default: this server's URL)
  int lease_ttl_s = 3;        // --lease-ttl: the leader's etcd lease
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

struct ServiceContext {
  const ServeOptions& options;
  const Cluster& cluster;
  Scheduler& scheduler;
  Metrics& metrics;
  const Auth& auth;
  // Background workers an installer starts (serve --slurm's sync) register how to stop them;
  // Server::stop runs these after the last request and before the scheduler stops.
  std::vector<std::function<void()>> stop_hooks = {};
  // Pre-routing steps an installer adds (HA answers mutations on a follower with 503): each
  // returns true once it has answered. They run after the HTTP layer's framing and token
  // checks (http_limits.h), before the body is read.
  std::vector<PreRoutingHook> pre_routing = {};
};

using RouteInstaller = void (*)(httplib::Server& http, ServiceContext& ctx);
struct RouteSet {
  std::string_view name;
  std::string_view summary;
  RouteInstaller install;
};
// Every endpoint group, in installation order (routes.cc).
const std::vector<RouteSet>& route_sets();

// Installers of this folder's own groups (one file each).
void install_health_routes(httplib::Server& http, ServiceContext& ctx);    // health_routes.cc
void install_job_routes(httplib::Server& http, ServiceContext& ctx);       // job_routes.cc
void install_node_routes(httplib::Server& http, ServiceContext& ctx);      // node_routes.cc
void install_cluster_routes(httplib::Server& http, ServiceContext& ctx);   // cluster_routes.cc
void install_topograph_routes(httplib::Server& http, ServiceContext& ctx); // topograph_routes.cc
void install_router_routes(httplib::Server& http, ServiceContext& ctx);    // router_routes.cc
void install_slurm_sync(httplib::Server& http, ServiceContext& ctx);        // slurm_sync.cc
void install_k8s_extender_routes(httplib::Server& http, ServiceContext& ctx);  // k8s_routes.cc
void install_ha_routes(httplib::Server& http, ServiceContext& ctx);        // ha_routes.cc

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
  Scheduler& scheduler() { return *scheduler_; }
  // Stops accepting, finishes the requests in flight and the queued decisions.
  void stop();

 private:
  Server() = default;
  ServeOptions options_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  Auth auth_;
  std::unique_ptr<ServiceContext> context_;
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
