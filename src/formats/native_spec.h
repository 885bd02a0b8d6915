// The native cluster spec: toposched's own YAML (or the same structure as JSON) describing
// node types, nodes by hostlist, fabric tiers and switches, and accelerator domains.
// Documented in docs/cluster-spec.md. read_native_spec validates everything and reports
// file:line:col; write_native_* produce text that reads back into an equal Cluster.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

// `file` is used in error positions only.
Result<Cluster> read_native_spec(std::string_view text, const std::string& file);

std::string write_native_yaml(const Cluster& cluster);
std::string write_native_json(const Cluster& cluster);

// True when the text looks like a native spec (a mapping with `node_types` or `nodes`).
bool looks_like_native_spec(std::string_view text);

}  // namespace toposched
