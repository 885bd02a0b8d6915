// Serialising JSON output with one rule for invalid UTF-8, used by every JSON output of
// toposched (CLI --format json, state files, reports, exported objects): JSON text must be
// UTF-8, so a string (value or key) that is not valid UTF-8 makes the output fail with a
// clear error naming where it is (a JSON pointer such as /gpus/0/node) and the first bad
// byte. Nothing is replaced or dropped silently, and nlohmann's type_error 316 can no
// longer escape. Also the rounding that keeps numbers in reports byte-stable.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "topology/error.h"
#include "topology/utf8.h"  // first_invalid_utf8, for callers that check before writing

namespace toposched {

// Checks every string and key of `j`; an invalid one gives kValidation (exit 1) with its path.
Result<void> check_json_utf8(const nlohmann::json& j);
Result<void> check_json_utf8(const nlohmann::ordered_json& j);

// `v` rounded to `decimals` places, so a JSON text does not depend on the last bits of a
// double (the reports are byte-stable); a non-finite value gives 0 and -0.0 gives 0.
double round_decimals(double v, int decimals);

// j.dump(indent) after check_json_utf8.
Result<std::string> dump_json(const nlohmann::json& j, int indent = -1);
Result<std::string> dump_json(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace toposched
