// DiscoveredTopology: what one discovery source (a `topo -m` file, an ibnetdiscover dump, a
// Slurm topology.conf, Kubernetes labels, ...) says about a cluster, before the sources are
// merged into one validated Cluster by merge_discovered (formats/discovery.h).
//
// Names only, no ids: sources refer to nodes and switches by the names the tools print.
// Invariants a reader guarantees: tier indices are < tiers.size(); a switch's parent (when
// set) names a switch of the same source in a higher tier; a node appears at most once.
// Plain values (the node type is shared and never modified); safe to copy between threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/cluster.h"

namespace toposched {

struct DiscoveredSwitch {
  std::string name;
  int tier = 0;        // 0 = closest to the nodes
  std::string parent;  // empty = a root
};

// What a node's DRA ResourceSlices say of where its GPUs sit on PCIe (NVIDIA's driver v25.8+
// publishes `uuid`, `resource.kubernetes.io/pciBusID`, `resource.kubernetes.io/pcieRoot` and
// `resource.kubernetes.io/numaNode` per GPU). One entry per GPU, in PCI bus order (the order
// nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID number them, and toposched's GPU indices).
// Invariant: all vectors have the node's GPU count of entries; a value a device did not
// publish is empty (strings) or -1 (numa). Immutable once made; shared between threads.
struct GpuPcieLayout {
  std::vector<std::string> uuid;
  std::vector<std::string> pci_bus_id;  // lower case, e.g. "0000:1b:00.0"
  std::vector<std::string> pcie_root;   // e.g. "pci0000:00"
  std::vector<int> numa;
};

struct DiscoveredNode {
  std::string name;
  std::string switch_name;           // the switch the node hangs under; empty = unknown
  std::string domain;                // accelerator (multi-node NVLink) domain; empty = none
  std::string sub_domain;            // optional, only with a domain
  // GPUs and NICs, from `nvidia-smi topo -m`; null = unknown. Shared and immutable: a
  // NodeType is large (its GPU/NIC tables) and a million-node NodeList has none, so a node
  // holds a pointer (16 bytes) rather than an optional NodeType inline.
  std::shared_ptr<const NodeType> hardware;
  int gpu_count = 0;                 // hint from labels or the instance type; 0 = unknown
  std::string gpu_model;             // hint, e.g. "NVIDIA H100 80GB HBM3"; empty = unknown
  SourceLocation gpu_model_at;       // where the hint was read, for errors; may be empty
  double nic_gbit = 0;               // hint: line rate of its compute NICs (from the fabric); 0 = unknown
  // Hint: the node's system memory in whole GB (10^9 bytes, rounded down), from Kubernetes'
  // status.capacity.memory or Slurm's RealMemory; becomes its node type's host_memory_gb.
  // 0 = unknown.
  double host_memory_gb = 0;
  // Hint from ResourceSlices: the GPUs' PCIe roots and NUMA nodes (a generic node type takes
  // its PCIe distances from it); null = unknown.
  std::shared_ptr<const GpuPcieLayout> pcie;
};

struct DiscoveredTopology {
  std::string source;              // the file it came from, for messages
  std::vector<std::string> tiers;  // closest first; empty when the source has no switch tree
  std::vector<DiscoveredSwitch> switches;
  std::vector<DiscoveredNode> nodes;
  std::vector<std::string> warnings;  // things a careful operator should look at
};

// "leaf", "spine", "core", then "tier3", "tier4", ...: tier names by level, closest first.
std::string tier_name_for_level(int level);

// Appends "N WHAT: HOSTLIST" (the names compressed) to `warnings` when `names` is not empty:
// one warning for every node a reader left out for one reason, however many there are.
void warn_about_names(std::vector<std::string>& warnings, const std::vector<std::string>& names,
                      std::string_view what);

// The node type given to nodes that no `topo -m` describes (its name is left empty).
// `gpu_model` names the product (find_gpu_product); every GPU pair is NVLinked with the
// product's per-GPU link count (an NVSwitch baseboard) when the product has NVLink, else
// joined over PCIe (SYS); one `nic_gbit` NIC per GPU at PIX.
Result<NodeType> generic_node_type(const std::string& gpu_model, int gpu_count, double nic_gbit);

// Refines a generic node type with what ResourceSlices say of its GPUs' PCIe placement
// (layout.pcie_root.size() must equal type.gpu_count): GPUs not joined by NVLink are PHB apart
// on one PCIe root, NODE apart on two roots of one NUMA node, else SYS; each GPU's NIC
// (generic: one beside each GPU) is as far from the other GPUs as its GPU is; the NUMA nodes
// become the GPUs' `gpu_numa` when every GPU has one.
void apply_pcie_layout(const GpuPcieLayout& layout, NodeType& type);

}  // namespace toposched
