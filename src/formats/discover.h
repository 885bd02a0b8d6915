// discover(): the whole of `toposched discover` below the command line. Reads every input
// file, runs the matching reader and merges the results (formats/discovery.h).
// Per-node inputs (`topo -m`, fabric) are files or directories of files, each named after
// its node: the node name is the file name without its last extension ("dgx01.topo" ->
// "dgx01"); hidden files are skipped. Pure function of the files it reads; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "formats/discovery.h"
#include "formats/nvidia_topo.h"
#include "topology/error.h"

namespace toposched {

struct DiscoverRequest {
  std::vector<std::string> topo_m;          // files or directories, one file per node
  std::vector<std::string> fabric;          // files or directories, one file per node
  // nvidia-smi --query-gpu=name,pci.bus_id --format=csv: files or directories, one per node.
  // Names the GPU of that node's topo -m (unless topo.gpu_model is given), or of the node.
  std::vector<std::string> gpu_info;
  std::vector<std::string> ibnetdiscover;   // whole-fabric dumps
  std::vector<std::string> slurm_topology;  // topology.conf files
  std::vector<std::string> topograph_models;
  std::vector<std::string> k8s_nodes;     // kubectl get nodes -o json
  std::vector<std::string> resource_slices;  // kubectl get resourceslices -o json|yaml
  std::vector<std::string> aws_topology;  // describe-instance-topology JSON
  std::vector<std::string> gcp_instances;  // gcloud compute instances list --format=json
  std::vector<std::string> oci_compute_hosts;  // oci compute compute-host list --all
  // OCI instance metadata rdmaTopologyData: files or directories, one file per host (or
  // pdsh's "NODE: JSON" lines for many hosts in one file).
  std::vector<std::string> oci_rdma_topology;
  // Renames applied to every source before the merge (formats/node_renames.h): YAML/JSON
  // mappings {name in a source: node name}, and pdsh's "NODE: INSTANCE-ID" lines.
  std::vector<std::string> node_name_maps;
  std::vector<std::string> instance_ids;
  // Sources read by a layer above this one (Slurm's node lists: slurm/slurm_nodes.h), merged
  // after the files above.
  std::vector<DiscoveredTopology> read_sources;
  std::optional<std::string> hca_regex;   // ibnetdiscover: the compute HCAs' device names
  std::vector<std::string> label_map;     // KEY=ROLE for Kubernetes labels
  // GPU model (empty: from gpu_info, else inferred per node from its topo -m, with a
  // warning; H100 for nodes nothing describes), NVLink speed, NIC speed, compute NICs.
  TopoMatrixOptions topo;
  DiscoveryOptions merge;
};

Result<DiscoveryResult> discover(const DiscoverRequest& request);

// The node name a per-node file stands for: its file name without the last extension.
std::string node_name_from_path(const std::string& path);

}  // namespace toposched
