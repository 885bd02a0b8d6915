// `toposched serve`: the placement engine as an HTTP/JSON service with a durable store
// (service/server.h; docs/service.md).
#include "cli/common.h"
#include "service/server.h"

namespace toposched::cli {

namespace {
// --k8s-extender and its flags (ServeOptions::k8s).
void add_extender_flags(CLI::App* cmd, service::ExtenderOptions& o) {
  cmd->add_flag("--k8s-extender", o.enabled,
                "Serve kube-scheduler's extender verbs: POST PREFIX/filter, prioritize, bind, preempt "
                "(docs/kubernetes.md)");
  cmd->add_option("--url-prefix", o.url_prefix, "Path prefix of the extender verbs (e.g. /toposched)");
  cmd->add_option("--extender-listen", o.listen,
                  "ADDR:PORT of a second, plain-HTTP listener for the extender verbs alone, which needs no\n"
                  "token (kube-scheduler cannot send one): keep it on loopback or behind a NetworkPolicy");
  cmd->add_option("--k8s-api", o.api,
                  "API server URL the extender binds pods through (default in a cluster: "
                  "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)");
  cmd->add_option("--k8s-token-file", o.token_file,
                  "Bearer token for the API server (default in a cluster: the service account's token)");
  cmd->add_option("--k8s-ca-file", o.ca_file,
                  "CA bundle for the API server (default in a cluster: the service account's ca.crt)");
  cmd->add_option("--k8s-reservation-timeout", o.reservation_timeout_s,
                  "Seconds a planned pod group holds its GPUs until a member is bound (default 300)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--k8s-test-clock", o.test_clock,
                "TESTS ONLY: the extender's clock moves only through POST PREFIX/test/clock?advance_ms=N");
}

// --slurm (ServeOptions::slurm).
void add_slurm_flags(CLI::App* cmd, service::SlurmSyncOptions& o) {
  cmd->add_flag("--slurm", o.enabled,
                "Keep the state equal to Slurm's: hold the GPUs of Slurm jobs started outside toposched, "
                "release jobs that end (sinfo/squeue on PATH, SLURM_CONF; docs/slurm.md)");
  cmd->add_option("--slurm-poll-interval", o.poll_interval_s,
                  "Seconds between two reads of Slurm's state with --slurm (default 5)")
      ->check(CLI::Range(0.1, 3600.0));
}

// The LLM router's flags (ServeOptions::router). The replicas are held as jobs when their
// number or an engine's events are given.
CLI::Option* add_router_flags(CLI::App* cmd, service::RouterFrontOptions& o) {
  cmd->add_option("--router-model", o.model, "POST /v1/route: model of the replicas (default llama3-8b; docs/router.md)");
  CLI::Option* workers = cmd->add_option(
      "--router-workers", o.workers,
      "POST /v1/route: number of replicas, spread over the nodes (default 8). Given (or with\n"
      "--router-kv-events), the replicas are real: their GPUs are held as jobs router:worker-N");
  cmd->add_option("--router-tp", o.tp, "POST /v1/route: GPUs per replica (default 1)");
  cmd->add_option("--router-policy", o.policy, "POST /v1/route: routing policy (default kv-topo)");
  cmd->add_option("--router-block-tokens", o.block_tokens,
                  "Tokens per KV block of the router's index and of the engines' events (default 512; vLLM's is 16)");
  cmd->add_option("--router-load-weight", o.load_weight,
                  "Anti-burst weight of the kv policies: each request active on a worker adds this to the weight\n"
                  "of the prefill routed there (default 1; 0 = Dynamo's cost exactly; docs/router.md)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--router-max-in-flight", o.max_in_flight,
                  "Admission control: POST /v1/route answers 429 with Retry-After while this many requests\n"
                  "routed with a request_id are not yet reported done (POST /v1/route/done); 0 = no bound (default)");
  cmd->add_option("--router-kv-events", o.kv_events,
                  "Subscribe router worker W to an engine's ZMQ KV event publisher (vLLM, SGLang):\n"
                  "W=tcp://HOST:PORT[,replay=tcp://HOST:PORT][,topic=T]; repeat per worker (docs/router.md)");
  return workers;
}

// HA with an etcd store (ServeOptions::ha).
void add_ha_flags(CLI::App* cmd, service::ReplicationFlags& o) {
  cmd->add_option("--advertise", o.advertise,
                  "With an etcd store: the URL other replicas give clients as the leader's (default: this\n"
                  "server's http://ADDR:PORT; set it when listening on 0.0.0.0)");
  cmd->add_option("--lease-ttl", o.lease_ttl_s,
                  "With an etcd store: seconds of the leader's lease (default 3; etcd's minimum is about 2).\n"
                  "A crashed leader is replaced after about this long")
      ->check(CLI::Range(2, 60));
}

}  // namespace

// The server's own flags here; each component's in its own function above, in --help order.
void register_serve(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<service::ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Run the placement engine as an HTTP/JSON service with a durable store");
  cmd->add_option("--cluster,-c", o->cluster_spec, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_option("--store", o->store_url,
                  "Where the state lives: sqlite:PATH (default sqlite:./toposched-state.db), or\n"
                  "etcd://HOST:PORT[,HOST:PORT...][/PREFIX] shared by several replicas (HA: one leads,\n"
                  "the others serve reads and answer mutations with 503 naming the leader)");
  cmd->add_option("--listen", o->listen, "ADDR:PORT to listen on (default 127.0.0.1:7070; port 0 picks a free one)");
  cmd->add_option("--token-file", o->token_file,
                  "File holding the bearer token (one line) that every request but GET and HEAD must send\n"
                  "(Authorization: Bearer T): placements, releases, dry runs, cost, generate, route, the\n"
                  "extender verbs on --listen");
  cmd->add_option("--tls-cert", o->tls_cert, "PEM certificate: serve HTTPS (with --tls-key)");
  cmd->add_option("--tls-key", o->tls_key, "PEM private key of --tls-cert");
  cmd->add_flag("--insecure", o->insecure, "Allow a non-loopback --listen address without --token-file");
  cmd->add_option("--max-body", o->max_body_bytes, "Largest request body in bytes (default 1048576; larger: 413)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", o->max_connections,
                  "Connections open at once, a thread each (default 1024); more are closed at once")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--read-timeout", o->read_timeout_s, "Seconds to wait for a request's headers and body (default 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--group-commit", o->group_commit_max,
                  "Most decisions committed to the store in one transaction (default 256; 1 = one commit each)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--event-log-keep", o->event_log_keep,
                  "Newest place/release events the store's event log keeps; older ones are deleted as new\n"
                  "ones come (default: every event with SQLite, the last 100000 with etcd; 0 = every event)")
      ->check(CLI::NonNegativeNumber);
  add_extender_flags(cmd, o->k8s);
  add_slurm_flags(cmd, o->slurm);
  CLI::Option* router_workers = add_router_flags(cmd, o->router);
  add_ha_flags(cmd, o->ha);
  cmd->footer(
      "Example:\n"
      "  toposched serve --cluster 'preset:dgx-h100?nodes=64'\n"
      "  curl -s -X POST localhost:7070/v1/jobs -d '{\"job\":\"j1\",\"gpus\":16,\"tp\":8}'\n"
      "Every placement and release is committed to the store before it is answered; a restart\n"
      "restores the same jobs. Endpoints, security and deployment: docs/service.md.\n"
      "As a kube-scheduler extender (deploy/kubernetes/, docs/kubernetes.md):\n"
      "  toposched serve --cluster cluster.yaml --k8s-extender --url-prefix /toposched");
  cmd->callback([o, router_workers, &exit_code] {
    o->router.hold_workers = router_workers->count() > 0 || !o->router.kv_events.empty();
    auto ok = service::serve_until_signal(*o);
    exit_code = ok ? kExitOk : report(ok.error());
  });
}

}  // namespace toposched::cli
