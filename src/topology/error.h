// Error and Result: how every library function in toposched reports failure.
// An Error carries a machine-readable code, a human message and, for parsers, the
// file:line:column where the input went wrong. No exception crosses a layer boundary:
// functions return Result<T> (tl::expected). Plain values; safe to copy across threads.
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace toposched {

enum class ErrorCode {
  kInvalidArgument,  // a caller passed something unusable (bad GPU name, bad option value)
  kParse,            // input text does not follow its format
  kValidation,       // input parses but describes an impossible cluster or job
  kNotFound,         // a named thing (node, preset, file) does not exist
  kIo,               // reading or writing a file failed
  kInfeasible,       // a request cannot be satisfied (e.g. not enough free GPUs)
  kUnsupported,      // a valid request this build cannot serve
  kConflict,         // the request collides with existing state (a job id already in use)
  kUnavailable,      // a service this call needs (a store, the leader) cannot be reached now
};

struct SourceLocation {
  std::string file;  // may be empty for in-memory text
  int line = 0;      // 1-based; 0 = unknown
  int column = 0;    // 1-based; 0 = unknown
};

struct Error {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;
  SourceLocation where;

  // "file:line:col: message", dropping the parts that are unknown.
  std::string to_string() const {
    std::string out;
    if (!where.file.empty()) out += where.file + ":";
    if (where.line > 0) {
      out += std::to_string(where.line) + ":";
      if (where.column > 0) out += std::to_string(where.column) + ":";
    }
    if (!out.empty()) out += " ";
    return out + message;
  }
};

template <class T>
using Result = tl::expected<T, Error>;

inline tl::unexpected<Error> make_error(ErrorCode code, std::string message,
                                        SourceLocation where = {}) {
  return tl::unexpected<Error>(Error{code, std::move(message), std::move(where)});
}

}  // namespace toposched

// Early return for Result-returning functions, used by the parsers:
//   TOPOSCHED_TRY(value, parse_number(node));   // declares `value`, or returns the error
//   TOPOSCHED_CHECK(validate(node));            // returns the error, if any
#define TOPOSCHED_TRY(var, expr)                          \
  auto var##_result_ = (expr);                            \
  if (!var##_result_) return tl::unexpected(var##_result_.error()); \
  auto var = std::move(*var##_result_)
#define TOPOSCHED_CHECK(expr)                                      \
  do {                                                             \
    auto check_result_ = (expr);                                   \
    if (!check_result_) return tl::unexpected(check_result_.error()); \
  } while (0)
