// Writer for Kueue's Topology-Aware Scheduling objects: a `Topology`
// (kueue.x-k8s.io/v1alpha1; spec.levels[].nodeLabel, coarsest first, at most 16 levels,
// `kubernetes.io/hostname` last) built from label_levels(), and one `ResourceFlavor`
// (kueue.x-k8s.io/v1beta1) per node type whose spec.topologyName references it and whose
// spec.nodeLabels selects the type's nodes by `toposched.io/node-type` (Kueue requires at
// least one node label with a topology). Multi-document YAML. Pure; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

Result<ExportOutput> write_kueue(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
