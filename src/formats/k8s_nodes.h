// Reader for Kubernetes nodes (`kubectl get nodes -o json`: a List/NodeList with `items`, or
// one Node), taking the topology from node labels:
//   fabric.topograph.run/tier-N              switch at tier N (0 = closest), Topograph
//   accelerator.topograph.run/domain, .../sub-domain   accelerator domain, Topograph
//   network.topology.nvidia.com/{leaf,spine,core,accelerator}   older NVIDIA labels
//   nvidia.com/gpu.clique                    NVLink clique (GPU Feature Discovery)
//   nvidia.com/gpu.count, nvidia.com/gpu.product   GPU hints (GPU Feature Discovery)
// `label_map` entries "KEY=ROLE" add site-specific keys, tried before the built-in ones;
// ROLE is tier-N, leaf, spine, core, domain, sub-domain, gpu-count or gpu-product.
// From the Node's status.capacity: `memory` as the node's host memory (whole GB) and
// `nvidia.com/gpu` (the device plugin's count) as the GPU count where no gpu.count label gives it.
// A switch whose nodes disagree on its parent is kept under the first, with a warning.
// Nodes with neither GPUs (labels or capacity) nor topology labels (CPU and control-plane
// nodes) are skipped and counted in a warning.
// Errors name file:line:col. Pure function; thread-safe.
//
// Two parsers, one result: a JSON NodeList is read with simdjson On Demand, Node by Node
// without a document tree; anything that path does not read exactly as yaml-cpp would (YAML,
// a single Node, a \u escape, a repeated key, every error) is read again through yaml-cpp,
// whose tree gives every error its file:line:col (tests/formats/k8s_nodes_paths_test.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

Result<DiscoveredTopology> read_k8s_nodes(std::string_view text, const std::string& file,
                                          const std::vector<std::string>& label_map = {});

bool looks_like_k8s_nodes(std::string_view text);

// The two paths of read_k8s_nodes alone, for the tests that hold them equal: the simdjson
// path's result, or nullopt where it declines (and read_k8s_nodes takes the yaml-cpp path);
// the yaml-cpp path's result or error.
std::optional<DiscoveredTopology> read_k8s_nodes_fast_path(std::string_view text, const std::string& file,
                                                           const std::vector<std::string>& label_map = {});
Result<DiscoveredTopology> read_k8s_nodes_yaml_path(std::string_view text, const std::string& file,
                                                    const std::vector<std::string>& label_map = {});

// What a built-in label key above stands for (the same table read_k8s_nodes uses): the
// fabric tier it names (0 = closest), or nullopt; and whether it names an accelerator
// (NVLink) domain or sub-domain.
std::optional<int> builtin_label_tier(std::string_view key);
bool builtin_label_is_domain(std::string_view key);

}  // namespace toposched
