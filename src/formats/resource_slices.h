// Reader for Kubernetes Dynamic Resource Allocation ResourceSlices (`kubectl get
// resourceslices -o json|yaml`: a List or ResourceSliceList with `items`, or one
// ResourceSlice), resource.k8s.io v1, v1beta1 and v1beta2:
//   spec.nodeName            the node the pool's devices are on (slices without one, e.g.
//                            network-attached pools, are skipped with a warning)
//   spec.driver              a GPU driver: gpu.nvidia.com, or any driver whose devices say
//                            `type: gpu`
//   spec.devices[]           each GPU device (`attributes.type` gpu, or no type at all) counts
//                            one GPU of its node; MIG partitions (`type: mig`) and other
//                            device types are not GPUs. v1beta1 keeps attributes under `basic`.
//   attributes.productName   the GPU product (NVIDIA's DRA driver), the node's model hint
//   attributes.uuid          the GPU's UUID; one listed twice in the input is an error
//   attributes["resource.kubernetes.io/pciBusID"]  DOMAIN:BUS:DEVICE.FUNCTION; orders the
//                            node's GPUs (toposched's GPU i is the i-th in PCI bus order);
//                            twice on one node, or malformed, is an error
//   attributes["resource.kubernetes.io/pcieRoot"]  pciDOMAIN:BUS, the GPU's root complex
//   attributes["resource.kubernetes.io/numaNode"]  int, the GPU's NUMA node
// The last four (NVIDIA's driver v25.8+ publishes all but numaNode everywhere, numaNode where
// the kernel knows it) make the node's GpuPcieLayout, when every GPU of the node has a
// pciBusID (else a warning names the node). Other attributes (brand, architecture, versions,
// the `index` and `minor` older drivers published) are not read.
// Several slices of one node add up. ResourceSlices carry no switch fabric: the cluster has
// the nodes and their GPUs only (flat), which `discover` can merge with a fabric source.
// Errors name file:line:col. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

Result<DiscoveredTopology> read_resource_slices(std::string_view text, const std::string& file);

}  // namespace toposched
