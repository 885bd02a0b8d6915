// Reader for NVIDIA Topograph's cluster model YAML (the simulated clusters of its test
// provider, `tests/models/*.yaml`), so Topograph users can bring their models:
//   switches:  NAME: {switches: [child...], labels: {...}, annotations: {...}}
//   blocks:    - {switch: LEAF, nodes: [HOSTLIST...], annotations: {DOMAIN_KEY: D, SUB_KEY: S}}
// as Topograph reads it since e2b62507 (2026-08-21): a switch named only as another's child
// exists implicitly (Topograph #409); a block's accelerator domain and sub-domain are
// annotations `accelerator.topology.test/domain` / `.../sub-domain` (Topograph #430), or
// labels in older models (`accelerator.topograph.run/domain`,
// `network.topology.nvidia.com/accelerator`, `accelerated.topology.nvidia.com/level-0`,
// `accelerator.topograph.run/sub-domain`); a switch's annotations apply to every node below
// it unless the block or a closer switch names its own. Also the older layout (switches as a
// list with `name` and `capacity_blocks`, and a `capacity_blocks:` list with `type`,
// `nvlink`, `nodes`). Tiers follow switch height (a switch holding blocks only is tier 0).
// Errors name file:line:col. Pure; thread-safe.
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
