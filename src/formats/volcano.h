// Writer for Volcano's network topology: `HyperNode` objects (topology.volcano.sh/v1alpha1,
// cluster-scoped), one per switch and, when every accelerator domain sits under a single
// leaf switch, one per domain below them. spec.tier counts from 1 at the finest HyperNode;
// spec.tierName is the model's tier name ("accelerator-domain" for domains); spec.members
// lists child HyperNodes (type HyperNode, selector.exactMatch.name) and nodes (type Node),
// either one exactMatch per node (MemberStyle::kExact) or one selector.regexMatch.pattern
// derived from the nodes' hostlist (MemberStyle::kRegex). Object names are made valid
// DNS-1123 names. Multi-document YAML. Pure functions; thread-safe.
//
// volcano_tiers() is the one statement of that numbering: the writer numbers its HyperNodes
// with it, and the Kubernetes extender reads a pod's volcano.sh/network-topology-highest-tier
// (a spec.tier number) back into a toposched tier with it (k8s/pod_request.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/export_common.h"

namespace toposched {

// The tierName of the HyperNodes that stand for accelerator (multi-node NVLink) domains.
inline constexpr std::string_view kVolcanoDomainTierName = "accelerator-domain";

// One level of the HyperNode tree write_volcano writes. Volcano's scheduler resolves a job's
// networkTopology.highestTierName to a spec.tier through the HyperNodes' tierNames (one map
// from name to tier: framework/session.go adjustNetworkTopologySpec), so every level has its
// own name and every HyperNode of a level carries it.
struct VolcanoTier {
  int tier = 0;                    // spec.tier: 1 is the finest level
  std::string tier_name;           // spec.tierName
  std::optional<int> fabric_tier;  // the model's fabric tier; nullopt for the accelerator-domain level
};

// Every level, finest first, numbered whether or not a HyperNode of it is written (a tier
// whose switches hold no node keeps its number). Accelerator domains are a level (tier 1)
// only when each sits under one leaf switch (a HyperNode tree must nest).
std::vector<VolcanoTier> volcano_tiers(const Cluster& cluster);

Result<ExportOutput> write_volcano(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
