// Reader for the JSON of AWS EC2 `describe-instance-topology` (DescribeInstanceTopology):
//   {"Instances": [{"InstanceId", "InstanceType", "NetworkNodes": [farthest, ..., closest],
//                   "CapacityBlockId", "AvailabilityZone", ...}], "NextToken"?}
// Nodes are named by InstanceId. NetworkNodes become switches: the last one is the node's
// leaf (tier 0), each earlier one the parent of the next. The instance type gives GPU hints
// (p5 -> 8x H100, p5e/p5en -> 8x H200, p4d/p4de -> 8x A100, p6-b200 -> 8x B200,
// p6e-gb200 -> 4x GB200); for GB200 UltraServer types the CapacityBlockId is the accelerator
// (NVLink) domain. Errors name file:line:col. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

Result<DiscoveredTopology> read_aws_topology(std::string_view text, const std::string& file);

bool looks_like_aws_topology(std::string_view text);

}  // namespace toposched
