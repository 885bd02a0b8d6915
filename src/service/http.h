// HTTP helpers shared by every endpoint file: the one mapping from ErrorCode to HTTP status,
// JSON answers and error objects ({"error":{"code","message"}}), the bearer-token check and
// JSON body parsing with the position of a syntax error. Stateless; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "service/server.h"
#include "topology/error.h"

namespace toposched::service {

// 400 kInvalidArgument/kParse/kValidation, 404 kNotFound, 409 kConflict, 422 kInfeasible,
// 501 kUnsupported, 503 kUnavailable, 500 kIo.
int http_status(ErrorCode code);
// "invalid_argument", "not_found", ... (the "code" of the error object).
std::string_view error_code_name(ErrorCode code);

void send_json(httplib::Response& res, int status, std::string body);
void send_error(httplib::Response& res, const Error& error);
void send_error(httplib::Response& res, int status, std::string_view code, std::string_view message);

// For mutating endpoints: false after answering 401 when a token is required and the
// request does not carry it.
bool authorize(const ServiceContext& ctx, const httplib::Request& req, httplib::Response& res);

// The request body as JSON; kParse "request body:LINE:COL: ..." on a syntax error, a key
// repeated in one object, or nesting deeper than kMaxJsonDepth (formats/json_input.h).
Result<nlohmann::json> parse_json_body(const httplib::Request& req);

}  // namespace toposched::service
