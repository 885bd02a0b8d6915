// Reader for NVIDIA Topograph's cluster model YAML (the simulated clusters of its test
// provider), so Topograph users can bring their models:
//   switches:  NAME: {switches: [child...], labels: {...}}     (a mapping of switches)
//   blocks:    - {name?, switch: LEAF, nodes: [HOSTLIST...], labels: {ACCEL_KEY: DOMAIN}}
// and the older layout (switches as a list with `name` and `capacity_blocks`, and a
// `capacity_blocks:` list with `type`, `nvlink`, `nodes`). Tiers follow switch height (a
// switch holding blocks only is tier 0). A block's accelerator domain comes from the label
// `accelerator.topograph.run/domain`, `network.topology.nvidia.com/accelerator` or
// `accelerated.topology.nvidia.com/level-0`, or the old `nvlink` field; its sub-domain from
// `accelerator.topograph.run/sub-domain`. Errors name file:line:col. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

Result<DiscoveredTopology> read_topograph_model(std::string_view text, const std::string& file);
// The same, from a document already parsed with load_yaml_document (one parse per input).
Result<DiscoveredTopology> read_topograph_model(const YAML::Node& root, const std::string& file);

// A YAML mapping with `blocks` or `capacity_blocks`, or `switches` without `node_types`.
bool looks_like_topograph_model(std::string_view text);
bool looks_like_topograph_model(const YAML::Node& root);

}  // namespace toposched
