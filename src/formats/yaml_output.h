// YAML text from a JSON value: the one emitter behind the native spec writer and the
// Kubernetes-side export formats, so both quote strings and print numbers the same way.
// Pure function; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace toposched {

enum class YamlStyle {
  kBlock,    // every mapping and list in block style (Kubernetes manifests)
  kCompact,  // small mappings of scalars and lists of numbers on one line (cluster specs)
};

// Strings are always double-quoted, so YAML never misreads "on", "1e3" or "08" as non-strings.
std::string json_to_yaml(const nlohmann::ordered_json& value, YamlStyle style = YamlStyle::kBlock);

}  // namespace toposched
