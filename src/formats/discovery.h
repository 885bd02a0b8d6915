// Discovery merge: combines what several sources said (DiscoveredTopology, one per file) into
// one validated Cluster, the way NVIDIA Topograph merges its providers into one graph.
//
// Rules (docs/formats.md, "Merging"): GPUs and NICs come from `topo -m` (nodes with the same
// hardware share one node type); nodes that no `topo -m` describes get a generic node type
// built from label hints or the defaults. The switch tree is the union of the sources' trees
// (the first source to name a switch or a node's switch wins; later disagreements are
// warnings). Accelerator domains likewise. When any source gives a switch tree, nodes it
// does not place hang under a leaf-tier switch named `no-topology` (as Topograph does) and
// are reported; nodes without any topology data are reported too. With `strict`, every
// warning becomes an error. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "formats/discovered.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

inline constexpr const char* kNoTopologySwitch = "no-topology";

struct DiscoveryOptions {
  std::string cluster_name = "discovered";
  bool strict = false;
  // Used for nodes without `topo -m` and without GPU hints.
  std::string default_gpu_model = "H100";
  int default_gpu_count = 8;
  double default_nic_gbit = 400;
  // When set, a node's NIC speed hint from the fabric (ibnetdiscover link rates) replaces the
  // speed of its compute NICs; the CLI clears it when --nic-gbit is given explicitly.
  bool nic_gbit_from_fabric = true;
};

struct DiscoveryResult {
  Cluster cluster;
  std::vector<std::string> warnings;  // each prefixed with the source it concerns
};

// Takes the sources by value and moves their nodes and switches into the merge (pass
// std::move(sources) when they are not needed afterwards: a large NodeList is not copied).
Result<DiscoveryResult> merge_discovered(std::vector<DiscoveredTopology> sources,
                                         const DiscoveryOptions& options);

// Orders names naturally ("n2" before "n10"), so that hostlists compress well.
bool natural_less(std::string_view a, std::string_view b);

// The node type merge_discovered gives every node that has no `topo -m` file and no hints
// (GPU model, GPU count, NIC speed, PCIe layout), named as it names it (e.g.
// "H100x8-generic"): the options' defaults. For readers that build a cluster without a
// DiscoveredTopology (formats/slurm_topology_fast.h) and must give the same model.
Result<NodeType> hintless_node_type(const DiscoveryOptions& options);

}  // namespace toposched
