// `toposched serve`: the placement engine as an HTTP/JSON service with a durable store
// (service/server.h; docs/service.md).
#include "cli/common.h"
#include "service/server.h"

namespace toposched::cli {

void register_serve(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<service::ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Run the placement engine as an HTTP/JSON service with a durable store");
  cmd->add_option("--cluster,-c", o->cluster_spec, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_option("--store", o->store_url,
                  "Where the state lives: sqlite:PATH (default sqlite:./toposched-state.db)");
  cmd->add_option("--listen", o->listen, "ADDR:PORT to listen on (default 127.0.0.1:7070; port 0 picks a free one)");
  cmd->add_option("--token-file", o->token_file,
                  "File holding the bearer token that POST/DELETE requests must send (Authorization: Bearer T)");
  cmd->add_option("--tls-cert", o->tls_cert, "PEM certificate: serve HTTPS (with --tls-key)");
  cmd->add_option("--tls-key", o->tls_key, "PEM private key of --tls-cert");
  cmd->add_flag("--insecure", o->insecure, "Allow a non-loopback --listen address without --token-file");
  cmd->add_option("--max-body", o->max_body_bytes, "Largest request body in bytes (default 1048576; larger: 413)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", o->max_connections,
                  "Connections served at once (default 64); more wait in the listen backlog")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--read-timeout", o->read_timeout_s, "Seconds to wait for a request's headers and body (default 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--group-commit", o->group_commit_max,
                  "Most decisions committed to the store in one transaction (default 256; 1 = one commit each)")
      ->check(CLI::PositiveNumber);
  // Front ends built on the service; their endpoints are installed only when enabled.
  cmd->add_flag("--k8s-extender", o->k8s_extender, "Serve the Kubernetes scheduler-extender verbs (filter, prioritize, bind)");
  cmd->add_option("--url-prefix", o->url_prefix, "Path prefix of the extender verbs (e.g. /scheduler)");
  cmd->add_option("--k8s-api", o->k8s_api, "Kubernetes API server URL the extender binds pods through");
  cmd->add_flag("--slurm", o->slurm, "Serve the Slurm endpoints (job_submit.lua plans)");
  cmd->footer(
      "Example:\n"
      "  toposched serve --cluster 'preset:dgx-h100?nodes=64'\n"
      "  curl -s -X POST localhost:7070/v1/jobs -d '{\"job\":\"j1\",\"gpus\":16,\"tp\":8}'\n"
      "Every placement and release is committed to the store before it is answered; a restart\n"
      "restores the same jobs. Endpoints, security and deployment: docs/service.md.");
  cmd->callback([o, &exit_code] {
    auto ok = service::serve_until_signal(*o);
    exit_code = ok ? kExitOk : report(ok.error());
  });
}

}  // namespace toposched::cli
