// Built-in reference clusters, each modelled on a published system (sources in
// docs/presets.md) and sized by parameters: "preset:dgx-h100?nodes=64&nic_gbit=400".
// The registry is constant data; building a preset is a pure function. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

struct PresetParam {
  std::string name;
  std::string default_value;
  std::string help;
};

struct PresetInfo {
  std::string name;
  std::string description;
  std::vector<PresetParam> params;
};

const std::vector<PresetInfo>& preset_catalog();

// `spec` is "NAME" or "NAME?key=value&key=value" (without the "preset:" prefix).
// An unknown preset is kNotFound ("unknown preset 'x'; known: ..."); unknown keys and
// out-of-range values are kInvalidArgument errors that list what is accepted.
Result<Cluster> build_preset(std::string_view spec);

}  // namespace toposched
