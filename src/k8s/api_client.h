// BindingClient: posts a pod's Binding to the Kubernetes API server, as kube-scheduler's
// default binder does (POST /api/v1/namespaces/{ns}/pods/{name}/binding), carrying
// toposched's annotations (the API server copies a Binding's annotations onto the pod).
//
// Where the API server is: `--k8s-api URL`, else in-cluster from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT (https); the bearer token from `--k8s-token-file` or the service
// account's /var/run/secrets/kubernetes.io/serviceaccount/token (re-read on every call:
// projected tokens rotate), the CA from `--k8s-ca-file` or that directory's ca.crt.
// Thread-safe: every call opens its own connection.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "k8s/gang_planner.h"
#include "topology/error.h"

namespace toposched::k8s {

inline constexpr std::string_view kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct ApiServerConfig {
  std::string url;         // "https://10.0.0.1:443" or "http://127.0.0.1:8080"
  std::string token_file;  // empty: no Authorization header
  std::string ca_file;     // empty: the system's CA store
};

// The API server to use, from the flags (empty = not given) and the environment (`getenv`
// is injectable for tests). nullopt when there is none (not in a cluster, no --k8s-api).
std::optional<ApiServerConfig> resolve_api_server(const std::string& url_flag, const std::string& token_flag,
                                                  const std::string& ca_flag,
                                                  const std::function<const char*(const char*)>& getenv_fn);

// JSON body of the Binding (core/v1) for `plan`.
std::string binding_body(const BindingPlan& plan);

class BindingClient {
 public:
  explicit BindingClient(ApiServerConfig config) : config_(std::move(config)) {}
  // kUnavailable when the API server cannot be reached; kConflict/kInvalidArgument with the
  // API server's message for a refused Binding.
  Result<void> bind(const BindingPlan& plan) const;
  const ApiServerConfig& config() const { return config_; }

 private:
  ApiServerConfig config_;
};

}  // namespace toposched::k8s
