#include "k8s/api_client.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "formats/json_input.h"

namespace toposched::k8s {

std::optional<ApiServerConfig> resolve_api_server(const std::string& url_flag, const std::string& token_flag,
                                                  const std::string& ca_flag,
                                                  const std::function<const char*(const char*)>& getenv_fn) {
  ApiServerConfig cfg;
  const std::string sa(kServiceAccountDir);
  if (!url_flag.empty()) {
    cfg.url = url_flag;
  } else {
    const char* host = getenv_fn("KUBERNETES_SERVICE_HOST");
    const char* port = getenv_fn("KUBERNETES_SERVICE_PORT");
    if (!host || !*host) return std::nullopt;
    const std::string h(host);
    // An IPv6 service address needs brackets in a URL.
    cfg.url = fmt::format("https://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h,
                          port && *port ? port : "443");
    cfg.token_file = sa + "/token";
    cfg.ca_file = sa + "/ca.crt";
  }
  if (!token_flag.empty()) cfg.token_file = token_flag;
  if (!ca_flag.empty()) cfg.ca_file = ca_flag;
  return cfg;
}

std::string binding_body(const BindingPlan& plan) {
  nlohmann::json meta = {{"name", plan.pod_name}, {"namespace", plan.pod_namespace}};
  if (!plan.pod_uid.empty()) meta["uid"] = plan.pod_uid;
  if (!plan.annotations.empty()) meta["annotations"] = plan.annotations;
  nlohmann::json body = {{"kind", "Binding"},
                         {"apiVersion", "v1"},
                         {"metadata", std::move(meta)},
                         {"target", {{"kind", "Node"}, {"apiVersion", "v1"}, {"name", plan.node}}}};
  return body.dump();
}

namespace {

Result<std::string> read_token(const std::string& file) {
  std::ifstream in(file);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("cannot read the API token file {}", file));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return t;
}

// The API server's reason for a refusal: the message of its Status object. A reply that is
// not one says where it went wrong, then how it begins (a proxy's plain-text page, say).
std::string status_message(const std::string& body) {
  const std::string source = "kube-apiserver response";
  const std::string begins = body.substr(0, 200);
  auto reply = parse_json_document(body, source);
  if (!reply) return fmt::format("{}; the reply begins: {}", reply.error().to_string(), begins);
  auto status = JsonFields::of(*reply, source);
  if (!status) return begins;
  auto message = status->string("message");
  return message ? *message : begins;
}

}  // namespace

Result<void> BindingClient::bind(const BindingPlan& plan) const {
  httplib::Client client(config_.url);
  if (!client.is_valid())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("API server URL '{}' is not usable", config_.url));
  client.set_connection_timeout(5);
  client.set_tcp_nodelay(true);
  client.set_read_timeout(10);
  client.set_write_timeout(10);
  if (!config_.ca_file.empty()) client.set_ca_cert_path(config_.ca_file.c_str());
  client.enable_server_certificate_verification(true);
  httplib::Headers headers;
  if (!config_.token_file.empty()) {
    TOPOSCHED_TRY(token, read_token(config_.token_file));
    headers.emplace("Authorization", "Bearer " + token);
  }
  const std::string path = fmt::format("/api/v1/namespaces/{}/pods/{}/binding", plan.pod_namespace, plan.pod_name);
  auto res = client.Post(path, headers, binding_body(plan), "application/json");
  if (!res)
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("API server {} unreachable: {}", config_.url, httplib::to_string(res.error())));
  if (res->status == 200 || res->status == 201) return {};
  const ErrorCode code = res->status == 409 ? ErrorCode::kConflict : ErrorCode::kInvalidArgument;
  return make_error(code, fmt::format("API server refused the binding of {}/{} to {} ({}): {}", plan.pod_namespace,
                                      plan.pod_name, plan.node, res->status, status_message(res->body)));
}

}  // namespace toposched::k8s
