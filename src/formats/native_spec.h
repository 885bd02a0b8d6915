// The native cluster spec: toposched's own YAML (or the same structure as JSON) describing
// node types, nodes by hostlist, fabric tiers and switches, and accelerator domains.
// Documented in docs/cluster-spec.md. read_native_spec validates everything and reports
// file:line:col; write_native_* produce text that reads back into an equal Cluster.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

// `file` is used in error positions only.
Result<Cluster> read_native_spec(std::string_view text, const std::string& file);
// The same, from a document already parsed with load_yaml_document (one parse per input).
Result<Cluster> read_native_spec(const YAML::Node& root, const std::string& file);

// The same cluster, read without a yaml-cpp tree of the large lists, where the text has the
// plain shape of formats/native_spec_fast.h and reads without error; nullopt otherwise (then
// read_native_spec answers, errors at file:line:col). load_cluster_text tries it first.
std::optional<Cluster> read_native_spec_fast(std::string_view text, const std::string& file);

std::string write_native_yaml(const Cluster& cluster);
// Fails (kValidation) when a name is not valid UTF-8 (formats/json_output.h).
Result<std::string> write_native_json(const Cluster& cluster);
// The spec a service store's cluster digest is taken of (service/store.h, cluster_digest):
// write_native_json less the node types' host_memory_gb, which decides no placement and came
// after stores were first bound to the digest, so adding it to a spec (or to a preset, as
// 2026-12-07 did) leaves existing stores with their cluster.
Result<std::string> write_native_json_identity(const Cluster& cluster);

// True when the text looks like a native spec (a mapping with `node_types` or `nodes`).
bool looks_like_native_spec(std::string_view text);
bool looks_like_native_spec(const YAML::Node& root);

}  // namespace toposched
