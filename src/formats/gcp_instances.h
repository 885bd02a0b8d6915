// Reader for Google Compute Engine instances as `gcloud compute instances list --format=json`
// writes them (a JSON list of Instance resources), or as the API returns them:
// instances.list ({"items": [...]}), instances.aggregatedList ({"items": {"zones/Z":
// {"instances": [...]}}}) or one instance (`gcloud compute instances describe --format=json`).
//
// Nodes are named by the instance `name` (GCE's default host name, and the node name GKE and
// Slurm on Google Cloud use). Each instance's `resourceStatus.physicalHostTopology` (cluster,
// block, subblock; `host` is the VM's own server) is its chain of switches, farthest first:
// the sub-block is the leaf (tier 0), the block tier 1, the cluster tier 2; without it, the
// older `resourceStatus.physicalHost` ("/CLUSTER/BLOCK/HOST", the last part the host) is read
// the same way. For A4X and A4X Max (GB200, GB300) the sub-block is also the NVLink domain
// (18 VMs, 72 GPUs). GPUs come from `guestAccelerators` (type and count), else from the
// machine type (a3-megagpu-8g -> 8x H100); the GPU NICs' line rate from the machine type
// where Google documents one NIC per GPU. Instances not RUNNING and instances without GPUs
// are left out, each list in one warning. Errors name file:line:col. Pure function;
// thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

Result<DiscoveredTopology> read_gcp_instances(std::string_view text, const std::string& file);

}  // namespace toposched
