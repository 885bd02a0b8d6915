// Reader for Kubernetes nodes (`kubectl get nodes -o json`: a List/NodeList with `items`, or
// one Node), taking the topology from node labels:
//   fabric.topograph.run/tier-N              switch at tier N (0 = closest), Topograph
//   accelerator.topograph.run/domain, .../sub-domain   accelerator domain, Topograph
//   network.topology.nvidia.com/{leaf,spine,core,accelerator}   older NVIDIA labels
//   nvidia.com/gpu.clique                    NVLink clique (GPU Feature Discovery)
//   nvidia.com/gpu.count, nvidia.com/gpu.product   GPU hints (GPU Feature Discovery)
// `label_map` entries "KEY=ROLE" add site-specific keys, tried before the built-in ones;
// ROLE is tier-N, leaf, spine, core, domain, sub-domain, gpu-count or gpu-product.
// A switch whose nodes disagree on its parent is kept under the first, with a warning.
// Nodes with neither GPU nor topology labels (CPU and control-plane nodes) are skipped and
// counted in a warning.
// Errors name file:line:col. Pure function; thread-safe.
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

// What a built-in label key above stands for (the same table read_k8s_nodes uses): the
// fabric tier it names (0 = closest), or nullopt; and whether it names an accelerator
// (NVLink) domain or sub-domain.
std::optional<int> builtin_label_tier(std::string_view key);
bool builtin_label_is_domain(std::string_view key);

}  // namespace toposched
