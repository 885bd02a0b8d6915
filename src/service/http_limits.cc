#include "service/http_limits.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "service/http.h"
#include "topology/text.h"

namespace toposched::service {

namespace {

// RFC 9110 token characters: what a header name may be made of.
bool is_token(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(ch) != std::string_view::npos;
  });
}

// Field values: visible characters, spaces and tabs; NUL or CR/LF inside one smuggles text
// past the comparison ("Bearer TOKEN\0junk").
bool is_field_value(std::string_view v) {
  return std::none_of(v.begin(), v.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t') || c == 0x7f;
  });
}

bool reads_only(const httplib::Request& req) { return req.method == "GET" || req.method == "HEAD"; }

Refusal bad(std::string message) { return Refusal{400, "bad_request", std::move(message)}; }

std::optional<Refusal> check_headers(const httplib::Request& req) {
  if (req.headers.size() > kMaxHeaderCount)
    return bad(fmt::format("{} header fields; at most {} are accepted", req.headers.size(), kMaxHeaderCount));
  for (const auto& [name, value] : req.headers) {
    if (!is_token(name)) return bad(fmt::format("malformed header name '{}'", name.substr(0, 60)));
    if (!is_field_value(value)) return bad(fmt::format("header '{}' holds a control character", name.substr(0, 60)));
  }
  return std::nullopt;
}

std::optional<Refusal> check_body_framing(const httplib::Request& req, std::size_t max_body) {
  const std::size_t lengths = req.get_header_value_count("Content-Length");
  const std::size_t encodings = req.get_header_value_count("Transfer-Encoding");
  if (encodings > 0) {
    if (lengths > 0) return bad("a request may not carry both Content-Length and Transfer-Encoding");
    const std::string te = req.get_header_value("Transfer-Encoding");
    if (encodings > 1 || !equals_ignoring_ascii_case(te, "chunked"))
      return bad(fmt::format("unsupported Transfer-Encoding '{}'", te.substr(0, 60)));
    if (reads_only(req)) return bad(fmt::format("a {} request has no body", req.method));
    return std::nullopt;  // chunked: cpp-httplib stops reading at --max-body (413) as the chunks arrive
  }
  if (lengths == 0) return std::nullopt;
  if (lengths > 1) return bad("more than one Content-Length header");
  const std::string v = req.get_header_value("Content-Length");
  if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return bad(fmt::format("malformed Content-Length '{}'", v.substr(0, 60)));
  const unsigned long long length = std::stoull(v);
  if (length > 0 && reads_only(req)) return bad(fmt::format("a {} request has no body", req.method));
  if (length > max_body)
    return Refusal{413, "payload_too_large",
                   fmt::format("the request body is {} bytes; at most {} are accepted (--max-body)", length, max_body)};
  return std::nullopt;
}

}  // namespace

std::optional<Refusal> check_framing(const httplib::Request& req, std::size_t max_body) {
  if (auto r = check_headers(req)) return r;
  return check_body_framing(req, max_body);
}

std::optional<Refusal> check_token(const Auth& auth, const httplib::Request& req) {
  const std::size_t given = req.get_header_value_count("Authorization");
  if (given > 1) return bad("more than one Authorization header");
  if (!auth.required() || reads_only(req)) return std::nullopt;
  if (auth.allows(req.get_header_value("Authorization"))) return std::nullopt;
  return Refusal{401, "unauthorized",
                 given > 0 ? "the bearer token is wrong"
                           : "this endpoint needs an 'Authorization: Bearer <token>' header (every request but GET "
                             "and HEAD does when serve has --token-file)"};
}

void install_request_checks(httplib::Server& http, std::size_t max_body, const Auth* auth,
                            std::vector<PreRoutingHook> hooks) {
  http.set_pre_routing_handler([max_body, auth, hooks = std::move(hooks)](const httplib::Request& req,
                                                                          httplib::Response& res) {
    std::optional<Refusal> refusal = check_framing(req, max_body);
    if (!refusal && auth) refusal = check_token(*auth, req);
    if (refusal) {
      if (refusal->status == 401) res.set_header("WWW-Authenticate", "Bearer");
      // The body was not read: the connection cannot carry another request.
      res.set_header("Connection", "close");
      send_error(res, refusal->status, refusal->code, refusal->message);
      return httplib::Server::HandlerResponse::Handled;
    }
    for (const PreRoutingHook& hook : hooks)
      if (hook(req, res)) return httplib::Server::HandlerResponse::Handled;
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

}  // namespace toposched::service
