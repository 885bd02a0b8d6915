// Which cluster format a file is, decided from its first bytes (a few kilobytes of it
// usually), without parsing the whole file: the CLI's --cluster SPEC reads every format
// below, and a 44 MB NodeList must not be parsed as a native spec before it is refused.
//
// The formats, each recognised by what its first statement or top-level keys say:
//   - Slurm topology.conf: the first statement starts with SwitchName=, BlockName= or
//     BlockSizes= (any case; comments and blank lines skipped).
//   - Slurm topology.yaml (Slurm 25.05+): a YAML sequence whose first item has `topology:`.
//   - Kubernetes nodes: `kind: Node` or `NodeList` at the top, or a list (`items:`, as
//     `kubectl get nodes -o json|yaml` writes a `List`) whose first item is `kind: Node`.
//   - Kubernetes ResourceSlices (DRA): `kind: ResourceSlice` / `ResourceSliceList` at the top,
//     or a list whose first item is `kind: ResourceSlice`.
//   - Topograph model: top-level `switches:`, `blocks:` or `capacity_blocks:` (and no
//     `node_types:`).
//   - toposched native spec: top-level `node_types:`, `nodes:`, `fabric:`, `name:`,
//     `version:` or `accelerator_domains:`.
// JSON is read the same way (keys at depth 1, the first item's at depth 3). Pure functions;
// thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace toposched {

enum class ClusterFormat {
  kUnknown,
  kNativeSpec,
  kSlurmTopologyConf,
  kSlurmTopologyYaml,
  kTopographModel,
  kK8sNodes,
  kResourceSlices,
};

// How many bytes of a file detect_cluster_format looks at, at most.
inline constexpr std::size_t kClusterFormatHeadBytes = 1 << 20;

// The format of a file that starts with `head` (its first kClusterFormatHeadBytes bytes, or
// all of it). kUnknown when nothing above matches.
ClusterFormat detect_cluster_format(std::string_view head);

// "Kubernetes NodeList", ...: for messages.
std::string_view cluster_format_name(ClusterFormat f);

// Every format tried, with what marks it, for the refusal of a file of none of them.
std::string cluster_formats_tried();

}  // namespace toposched
