// Readers for what Oracle Cloud Infrastructure says of its GPU hosts' places in the RDMA
// network (the two sources NVIDIA Topograph's OCI providers use):
//
// - read_oci_rdma_topology: each host's instance metadata, `curl -H 'Authorization: Bearer
//   Oracle' http://169.254.169.254/opc/v2/host/rdmaTopologyData` ({"customerHPCIslandId",
//   "customerNetworkBlock", "customerLocalBlock", "customerGpuMemoryFabric"?}): either one
//   host's JSON (the node named by the caller, from the file name), or pdsh's output of that
//   curl over many hosts, one "NODE: JSON" line each. Nodes keep their host names.
// - read_oci_compute_hosts: `oci compute compute-host list --all` ({"data": {"items": [...]}}
//   or {"data": [...]}, kebab-case keys) or the API's ListComputeHosts ({"items": [...]},
//   camelCase). Nodes are named by the instance OCID on the host; hosts that run no
//   instance are left out, in one warning. The shape gives GPU hints (BM.GPU.H100.8 ->
//   8x H100, BM.GPU4.8 -> 8x A100 40GB).
//
// Both: the local block is the leaf (tier 0), the network block tier 1, the HPC island tier
// 2; the GPU memory fabric, where given, is the node's NVLink domain (GB200/GB300 racks).
// Errors name file:line:col. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

// Collects rdmaTopologyData from many files (one per host, or pdsh's lines) into one
// source, so that a thousand hosts' files make one switch tree. Not thread-safe.
class OciRdmaTopology {
 public:
  // Reads one file: one host's JSON (that host is `node`) or pdsh's "NODE: JSON" lines. A
  // host seen before is an error; a pdsh line whose output is no JSON object (curl failed
  // there) leaves its host out, with a warning from finish().
  Result<void> add(std::string_view text, const std::string& file, const std::string& node);
  // The hosts read so far, under their local blocks, network blocks and HPC islands.
  DiscoveredTopology finish(std::string source) const;

 private:
  struct Host {
    std::string name;
    std::vector<std::string> chain;  // HPC island, network block, local block
    std::string fabric;              // GPU memory fabric; empty = none
  };
  std::vector<Host> hosts_;
  std::unordered_set<std::string> seen_;
  std::vector<std::string> unanswered_;  // "FILE:LINE: HOST" of pdsh lines without JSON
};

// One file through OciRdmaTopology.
Result<DiscoveredTopology> read_oci_rdma_topology(std::string_view text, const std::string& file,
                                                  const std::string& node);

Result<DiscoveredTopology> read_oci_compute_hosts(std::string_view text, const std::string& file);

}  // namespace toposched
