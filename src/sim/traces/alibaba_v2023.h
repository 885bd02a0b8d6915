// Readers for Alibaba's cluster-trace-gpu-v2023 (the OpenB traces of "Beware of
// Fragmentation", ATC'23; alibaba/clusterdata, CC BY 4.0):
//  - pod lists `openb_pod_list_*.csv`, header
//    name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
//    deletion_time,scheduled_time] (times in seconds). A pod is a job of num_gpu GPUs
//    (a fractional GPU, gpu_milli < 1000, counts as one whole GPU); it arrives at
//    creation_time and runs from scheduled_time (or creation_time) to deletion_time. Pods
//    with 0 GPUs, never scheduled, or that ran 0 s are counted in ignored_rows. Lists
//    without the time columns give a trace with has_times = false.
//  - the node list `openb_node_list_gpu_node.csv` (sn,cpu_milli,memory_mib,gpu,model),
//    turned into a Cluster: one node per row, a node type per (model, GPU count).
//    The trace publishes no network, so the fabric is an assumption, documented in
//    docs/traces.md: 8-GPU V100 / G2 / G3 nodes have NVLink, the others PCIe; nodes hang
//    off top-of-rack switches of `nodes_per_tor` in file order, under one spine with
//    `tor_oversubscription`:1 (down:up); one 100 Gbit/s NIC per node.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "sim/trace.h"
#include "topology/cluster.h"

namespace toposched::sim {

Result<Trace> read_alibaba_v2023_pods(std::string_view text, const std::string& file, const TraceReadOptions& options = {});

struct AlibabaClusterOptions {
  int nodes_per_tor = 32;
  double tor_oversubscription = 2.0;  // down:up of each top-of-rack switch
  double nic_gbit = 100;
};
Result<Cluster> read_alibaba_v2023_nodes(std::string_view text, const std::string& file, const AlibabaClusterOptions& options = {});

}  // namespace toposched::sim
