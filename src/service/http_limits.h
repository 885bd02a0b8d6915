// The checks every request passes before it is routed, which cpp-httplib runs after the
// headers are read and BEFORE the body is read (its pre-routing handler): strict framing
// (one well-formed Content-Length, or Transfer-Encoding: chunked alone, whose body
// cpp-httplib stops reading at --max-body), well-formed header names and values, at most
// 64 header fields (the library stops reading at 100), at most one Authorization
// header, and the bearer token on every request that is not a GET or HEAD when a token is
// set. A refused request is answered with the JSON error object and its connection closed
// (its body, if any, is never read). Pure functions of the request; thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>

#include "service/server.h"

namespace toposched::service {

// More header fields than any client of the service sends (curl sends 3, kube-scheduler 4).
inline constexpr std::size_t kMaxHeaderCount = 64;

// Why a request is refused before routing: its HTTP status and the error object's code and
// message. nullopt when it may be routed.
struct Refusal {
  int status = 400;
  std::string code;
  std::string message;
};

// Framing and header checks: 400 (malformed or conflicting Content-Length or
// Transfer-Encoding, a header name that is not a token, a control character in a value, a
// body on a GET or HEAD), 413 (Content-Length over max_body).
std::optional<Refusal> check_framing(const httplib::Request& req, std::size_t max_body);

// Token check: 400 for a second Authorization header, 401 when a token is required for this
// method and the request does not carry it. GET and HEAD read and need no token; every
// other method decides (a dry run, a cost estimate, a route, an extender filter all do).
std::optional<Refusal> check_token(const Auth& auth, const httplib::Request& req);

// Installs the one pre-routing handler of `http`: check_framing, then (unless `auth` is
// null: the extender's own listener) check_token, then each hook in order.
void install_request_checks(httplib::Server& http, std::size_t max_body, const Auth* auth,
                            std::vector<PreRoutingHook> hooks);

}  // namespace toposched::service
