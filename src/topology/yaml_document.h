// Strict loading of one YAML (or JSON) document with yaml-cpp, shared by every YAML/JSON
// reader in every layer: a syntax error, a repeated key in any mapping, or content after the
// first document is an error with its file:line:col, and so is a byte that is not UTF-8
// (text with a UTF-16 or UTF-32 byte order mark is decoded by yaml-cpp). yaml-cpp alone
// keeps the first of two equal keys and ignores a second document, which would drop data
// silently.
// Stateless functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "topology/error.h"

namespace toposched {

// Parses `text` (named `file` in messages) as exactly one document. An empty text gives a
// null node. Errors: kParse with the position of the offending token, key or document.
Result<YAML::Node> load_yaml_document(std::string_view text, const std::string& file);

// 1-based file:line:col of a yaml-cpp mark (0:0 for a node built in memory, whose mark is null).
SourceLocation location_of(const YAML::Mark& mark, const std::string& file);

// Checks a parsed tree: every mapping's scalar keys are distinct. The walk is iterative
// (no recursion), linear in the number of nodes.
Result<void> check_unique_yaml_keys(const YAML::Node& root, const std::string& file);

}  // namespace toposched
