// Strict parsing of one JSON document with nlohmann-json: the one entry point for every
// reader that takes JSON only (e.g. the Philly trace, Slurm's --json output, the Mooncake
// trace's rows), every HTTP request body, the stores' records and the replies of etcd and
// the API server. A syntax error, trailing content after the document, a key repeated
// within one object (nlohmann alone keeps the last value), or arrays and objects nested
// deeper than kMaxJsonDepth is an error with its file:line:col (a document that ends early
// says so: "truncated output?"). Pure functions; thread-safe. The extender's Node lists are
// read with simdjson instead (k8s/extender_types: measurably faster on 7 MB bodies); its
// errors are the same Error, located through this parser ("request body:LINE:COL"). So is a
// JSON NodeList (formats/k8s_nodes), whose errors come from its yaml-cpp path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/error.h"
#include "topology/text.h"

namespace toposched {

// Deepest nesting of arrays and objects accepted. nlohmann parses iteratively, but dump(),
// comparison and every reader that walks a value recurse: a 100,000-deep value in a 200 kB
// body overflowed the stack of the error message that quoted it. No format toposched reads
// nests deeper than a dozen levels.
inline constexpr int kMaxJsonDepth = 128;

// `first_line` numbers the text's first line in locations (a row of a JSON-lines file).
Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& file, int first_line = 1);

// A value as an error message quotes it: scalars as JSON cut to about 60 bytes, arrays and
// objects by their type and size ("an array of 3 elements"), never a recursive dump of what
// the client sent; invalid UTF-8 is replaced, not thrown.
std::string quote_json(const nlohmann::json& value);

// `value` as an array of strings; kParse "SOURCE: expected an array of strings, found ..."
// otherwise.
Result<std::vector<std::string>> json_string_array(const nlohmann::json& value, const std::string& source);

// Typed reads of one parsed JSON object's members, for records and replies toposched did
// not just check itself (store records, etcd's and the API server's answers): a member that
// is missing or of the wrong type is kParse "SOURCE: 'KEY': expected ..., found ...", never
// an exception and never a default put in silently. nlohmann keeps no positions, so the
// error names the source and the key; a syntax error or a repeated key, found by
// parse_json_document, has its line:col too. Holds a reference to the object: use it while
// the object lives, on one thread.
class JsonFields {
 public:
  // kParse "SOURCE: expected a JSON object, found ..." when `value` is not an object.
  static Result<JsonFields> of(const nlohmann::json& value, std::string source);

  // Required members.
  Result<std::string> string(std::string_view key) const;
  Result<std::int64_t> integer(std::string_view key) const;
  Result<std::vector<std::string>> strings(std::string_view key) const;
  // Members that may be absent (nullopt then); present, they must have the type.
  Result<std::optional<std::string>> opt_string(std::string_view key) const;
  Result<std::optional<std::int64_t>> opt_integer(std::string_view key) const;
  Result<std::optional<bool>> opt_boolean(std::string_view key) const;

  // The member, or nullptr when absent.
  const nlohmann::json* find(std::string_view key) const;
  // kParse "SOURCE: 'KEY': MESSAGE", for checks the typed reads above do not cover.
  tl::unexpected<Error> error(std::string_view key, std::string_view message) const;
  const std::string& source() const { return source_; }

 private:
  JsonFields(const nlohmann::json& object, std::string source) : object_(&object), source_(std::move(source)) {}
  Result<const nlohmann::json*> required(std::string_view key) const;

  const nlohmann::json* object_;
  std::string source_;
};

}  // namespace toposched
