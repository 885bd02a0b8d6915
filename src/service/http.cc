#include "service/http.h"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include "formats/json_input.h"

namespace toposched::service {

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kParse:
    case ErrorCode::kValidation: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kConflict: return 409;
    case ErrorCode::kInfeasible: return 422;
    case ErrorCode::kUnsupported: return 501;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kIo: return 500;
  }
  return 500;
}

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kParse: return "parse";
    case ErrorCode::kValidation: return "validation";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kInfeasible: return "infeasible";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kConflict: return "conflict";
    case ErrorCode::kUnavailable: return "unavailable";
  }
  return "internal";
}

void send_json(httplib::Response& res, int status, std::string body) {
  res.status = status;
  body += '\n';
  res.set_content(std::move(body), "application/json");
}

void send_error(httplib::Response& res, int status, std::string_view code, std::string_view message) {
  nlohmann::ordered_json e;
  e["error"] = {{"code", code}, {"message", message}};
  // Messages quote what the client sent (a job id from the URL): invalid UTF-8 is replaced.
  send_json(res, status, e.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

void send_error(httplib::Response& res, const Error& error) {
  send_error(res, http_status(error.code), error_code_name(error.code), error.to_string());
}

bool Auth::allows(std::string_view header) const {
  if (token_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (!header.starts_with(kBearer)) return false;
  std::string_view given = header.substr(kBearer.size());
  // Constant time in the token's content; the length is not secret.
  if (given.size() != token_.size()) return false;
  return CRYPTO_memcmp(given.data(), token_.data(), token_.size()) == 0;
}

bool authorize(const ServiceContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (ctx.auth.allows(req.get_header_value("Authorization"))) return true;
  res.set_header("WWW-Authenticate", "Bearer");
  send_error(res, 401, "unauthorized",
             req.has_header("Authorization") ? "the bearer token is wrong"
                                             : "this endpoint needs an 'Authorization: Bearer <token>' header");
  return false;
}

Result<nlohmann::json> parse_json_body(const httplib::Request& req) {
  // The file readers' strict parser: syntax errors, repeated keys and nesting past
  // kMaxJsonDepth are 400 "request body:LINE:COL: ...".
  return parse_json_document(req.body, "request body");
}

}  // namespace toposched::service
