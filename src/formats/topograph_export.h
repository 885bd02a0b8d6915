// Topograph's Slurm engine as one call, for `POST /v1/generate` (Topograph's API) and
// anything else that receives Topograph's engine parameters:
//
//   {"plugin": "topology/tree" | "topology/block",          // cluster-wide topology.conf
//    "blockSizes": [18, 36, 72],                              // block; validated as Topograph does
//    "blockName": {"nodeNameRegexp": "...", "format": "..."}, // block
//    "skeletonOnly": false,                                   // toposched: Topograph's slinky engine mode
//    "topologies": {NAME: {"plugin", "nodes": [hostlists], "blockSizes", "blockName",
//                          "clusterDefault"}}}                // topology.yaml, one per partition
//
// `plugin` and `topologies` are mutually exclusive; neither means topology/tree (Topograph's
// legacy default). A topology without `nodes` is an error unless it is a flat cluster
// default (Topograph would ask `scontrol show partition`, which a service must not do);
// `partition`, `topologyConfigPath` and `reconfigure` are refused with a message, since
// toposched returns the text and writes no Slurm file. Unknown keys are refused.
//
// generate_topograph returns slurm-tree, slurm-block or slurm-yaml output (export.md),
// with toposched's header comments (Slurm ignores them). Errors are kInvalidArgument (HTTP
// 400) for bad parameters, kValidation when the cluster cannot give the topology asked for.
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "formats/export_common.h"

namespace toposched {

struct TopographParams {
  std::string plugin;  // "topology/tree" or "topology/block"; "" = tree unless topologies
  std::vector<long> block_sizes;
  std::optional<BlockNameRule> block_name;
  bool skeleton_only = false;
  std::vector<TopologyPartition> topologies;
};

// Reads the engine parameters object (`params` of a /v1/generate request's engine).
Result<TopographParams> topograph_params_from_json(const nlohmann::json& params);

// A YAML or JSON file holding Topograph's `topologies` object (or engine parameters with a
// `topologies` key), for `export --to slurm-yaml --topologies FILE`. Errors name the file.
Result<std::vector<TopologyPartition>> read_topologies(std::string_view text, const std::string& file);

Result<ExportOutput> generate_topograph(const Cluster& cluster, const TopographParams& params);

}  // namespace toposched
