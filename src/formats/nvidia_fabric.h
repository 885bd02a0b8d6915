// Reader for a node's multi-node NVLink membership, from either
//   `nvidia-smi --query-gpu=fabric.clusterUuid,fabric.cliqueId --format=csv,noheader`
//   (one "UUID, CLIQUE" line per GPU), or
//   the `Fabric` sections of `nvidia-smi -q` (State, Status, CliqueId, ClusterUUID per GPU).
// The format is detected by content. The node's accelerator domain is
// "<ClusterUUID>.<CliqueId>". `N/A`, an all-zero UUID, or a Status other than Success puts the
// node outside any domain, with a warning; GPUs of one node that disagree are an error
// ("ambiguous"). Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/error.h"

namespace toposched {

struct NodeFabric {
  std::string domain;  // empty = in no accelerator domain
  int gpus = 0;        // GPUs the file reports
  std::vector<std::string> warnings;
};

Result<NodeFabric> read_nvidia_fabric(std::string_view text, const std::string& file);

bool looks_like_nvidia_fabric(std::string_view text);

}  // namespace toposched
