// JSON views of a cluster shared by the CLI (`show`, `path`) and the service
// (GET /v1/cluster, /v1/path): the `show` summary and the `path` answer of DESIGN.md's
// contract. Pure functions; thread-safe on a const Cluster.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "topology/cluster.h"

namespace toposched {

// {"name","nodes","gpus","hostlist","tiers","accelerator_domains","node_types","fabric",
//  "nodes_without_switch"}
nlohmann::ordered_json cluster_summary_json(const Cluster& cluster);

// {"level","bandwidth_GBps","latency_us","from","to"} between two GPUs named as given.
nlohmann::ordered_json path_json(const Cluster& cluster, GpuId a, GpuId b, std::string_view a_name,
                                 std::string_view b_name);

}  // namespace toposched
