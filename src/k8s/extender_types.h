// The wire types of kube-scheduler's extender protocol, k8s.io/kube-scheduler/extender/v1
// (types.go), and the subset of core/v1 Pod and Node that toposched reads.
//
// JSON mapping, as Go's encoding/json does it for these types (they have no json tags):
//  - keys are the Go field names ("NodeNames", "FailedNodes", "NumPDBViolations"); decoding
//    matches keys case-insensitively (go_key_matches), ignores unknown keys, and lets a later
//    duplicate key win (maps merge);
//  - a nil pointer, slice or map encodes as `null`; `null` decodes to nil (std::nullopt /
//    empty) and leaves a string or integer unchanged;
//  - map keys are written sorted (std::map order = Go's byte order).
// Pods and Nodes keep the exact JSON they arrived in (`raw_json`) and are written back
// unchanged; one built in code is written as Go writes that object with only the modelled
// fields set. Equality compares the modelled fields only, never `raw_json`.
//
// Decoding uses simdjson On Demand: values toposched does not model are skipped without
// being materialised, so a 5,000-node NodeList costs little more than its bytes.
// Decoders are pure functions (thread-safe); errors are kParse with the body's line:col.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/error.h"

namespace toposched::k8s {

// core/v1 ResourceList: resource name -> quantity text ("8", "500m").
using ResourceList = std::map<std::string, std::string>;
using StringMap = std::map<std::string, std::string>;

struct Container {
  std::string name;
  ResourceList limits;
  ResourceList requests;
  bool operator==(const Container&) const = default;
};

// core/v1 Pod: metadata and the parts of spec that decide GPUs and priority.
struct Pod {
  std::string name;
  std::string namespace_name;
  std::string uid;
  StringMap labels;
  StringMap annotations;
  std::vector<Container> containers;  // empty = Go nil (`"containers":null`)
  std::vector<Container> init_containers;
  std::string node_name;
  std::optional<std::int32_t> priority;
  std::string nominated_node_name;  // status.nominatedNodeName: where a preemption made room for it
  std::string raw_json;  // as received; empty when built in code

  bool operator==(const Pod& o) const {
    return name == o.name && namespace_name == o.namespace_name && uid == o.uid && labels == o.labels &&
           annotations == o.annotations && containers == o.containers && init_containers == o.init_containers &&
           node_name == o.node_name && priority == o.priority && nominated_node_name == o.nominated_node_name;
  }
};

// core/v1 Node: only the name is needed (the topology comes from the cluster spec).
struct Node {
  std::string name;
  std::string raw_json;  // as received; empty when built in code
  bool operator==(const Node& o) const { return name == o.name; }
};

struct NodeList {
  std::vector<Node> items;  // empty = Go nil (`"items":null`)
  bool operator==(const NodeList&) const = default;
};

struct MetaPod {
  std::string uid;
  bool operator==(const MetaPod&) const = default;
};

struct MetaVictims {
  std::vector<MetaPod> pods;  // empty = nil
  std::int64_t num_pdb_violations = 0;
  bool operator==(const MetaVictims&) const = default;
};

struct Victims {
  std::vector<Pod> pods;
  std::int64_t num_pdb_violations = 0;
  bool operator==(const Victims&) const = default;
};

using FailedNodesMap = std::map<std::string, std::string>;

struct ExtenderArgs {
  std::optional<Pod> pod;
  std::optional<NodeList> nodes;                      // nodeCacheCapable: false
  std::optional<std::vector<std::string>> node_names;  // nodeCacheCapable: true
  bool operator==(const ExtenderArgs&) const = default;
};

struct ExtenderFilterResult {
  std::optional<NodeList> nodes;
  std::optional<std::vector<std::string>> node_names;
  std::optional<FailedNodesMap> failed_nodes;
  std::optional<FailedNodesMap> failed_and_unresolvable_nodes;
  std::string error;
  bool operator==(const ExtenderFilterResult&) const = default;
};

struct ExtenderBindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
  bool operator==(const ExtenderBindingArgs&) const = default;
};

struct ExtenderBindingResult {
  std::string error;
  bool operator==(const ExtenderBindingResult&) const = default;
};

struct HostPriority {
  std::string host;
  std::int64_t score = 0;
  bool operator==(const HostPriority&) const = default;
};
// HostPriorityList; std::nullopt = Go nil.
using HostPriorityList = std::optional<std::vector<HostPriority>>;

struct ExtenderPreemptionArgs {
  std::optional<Pod> pod;
  std::optional<std::map<std::string, Victims>> node_name_to_victims;
  std::optional<std::map<std::string, MetaVictims>> node_name_to_meta_victims;
  bool operator==(const ExtenderPreemptionArgs&) const = default;
};

struct ExtenderPreemptionResult {
  std::optional<std::map<std::string, MetaVictims>> node_name_to_meta_victims;
  bool operator==(const ExtenderPreemptionResult&) const = default;
};

// Decoders: `body` is one JSON value (Go's json.Unmarshal: trailing data is an error).
Result<ExtenderArgs> decode_extender_args(std::string_view body);
Result<ExtenderFilterResult> decode_filter_result(std::string_view body);
Result<ExtenderBindingArgs> decode_binding_args(std::string_view body);
Result<ExtenderBindingResult> decode_binding_result(std::string_view body);
Result<HostPriority> decode_host_priority(std::string_view body);
Result<HostPriorityList> decode_host_priority_list(std::string_view body);
Result<ExtenderPreemptionArgs> decode_preemption_args(std::string_view body);
Result<ExtenderPreemptionResult> decode_preemption_result(std::string_view body);
Result<Pod> decode_pod(std::string_view body);

// Encoders: json.Marshal's bytes.
std::string encode(const ExtenderArgs& v);
std::string encode(const ExtenderFilterResult& v);
std::string encode(const ExtenderBindingArgs& v);
std::string encode(const ExtenderBindingResult& v);
std::string encode(const HostPriority& v);
std::string encode(const HostPriorityList& v);
std::string encode(const ExtenderPreemptionArgs& v);
std::string encode(const ExtenderPreemptionResult& v);
std::string encode(const Pod& v);
std::string encode(const Node& v);

}  // namespace toposched::k8s
