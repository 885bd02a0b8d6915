// Node availability: whether a node may take new jobs, and who said it may not.
//
// A node is unavailable while at least one source has marked it: the Kubernetes lifecycle
// controller ("k8s": cordoned, NotReady, tainted, deleted), Slurm ("slurm": DRAIN, DOWN), an
// operator ("api"). Each source sets and clears only its own mark, so an operator's
// maintenance mark survives the node turning Ready again in Kubernetes, and two sources
// never undo each other. No placement with a policy uses an unavailable node (the engine
// narrows every request's node mask, placement/engine.h); GPUs already held there stay held:
// whether a job on a lost node ends is the lifecycle's decision, not the engine's.
//
// NodeAvailability holds the marks of every node of one cluster; the engine changes it only
// through Engine::apply (a Mutation of kind kMarkNode or kUnmarkNode), so the store logs, replays and
// undoes marks like jobs. Not thread-safe for writes (the engine guards it with its lock);
// concurrent const queries are fine. The free functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "placement/placement.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

// One source's reason to keep a node free of new jobs.
struct NodeMark {
  std::string source;  // "k8s", "slurm", "api", ...: the key of the mark on its node
  std::string reason;  // what the source saw: "cordoned", "NotReady", "DRAIN"
  std::int64_t since_unix_ms = 0;  // when this source first marked the node (kept while it re-marks)
};

// What a front end asks: `source` says `node` is unavailable for `reason`, or (available)
// that its own mark is lifted.
struct NodeAvailabilityChange {
  std::string node;
  std::string source = "api";
  bool available = true;
  std::string reason;  // required when unavailable, refused when available
};

// The source an operator's PUT /v1/nodes/{name}/availability uses when its body names none.
inline constexpr std::string_view kApiSource = "api";
// The source toposched-k8s-lifecycle marks nodes with (kube/lifecycle).
inline constexpr std::string_view kKubernetesSource = "k8s";
// Most bytes a reason may hold (a store row and a line of GET /v1/nodes, not a log).
inline constexpr std::size_t kMaxReasonBytes = 256;

// The body of PUT /v1/nodes/{name}/availability: {"available": bool, "reason": string,
// "source": string}; `available` is required, `reason` required when it is false.
// kInvalidArgument naming the key for unknown keys, wrong types and bad values (a source is
// 1-63 characters of [a-z0-9._-]; a reason 1-256 bytes of UTF-8 without control characters).
Result<NodeAvailabilityChange> node_availability_from_json(std::string node, const nlohmann::json& body);
// The node exists in `cluster` (kNotFound otherwise) and source and reason are well formed
// (the checks above, for changes that do not come from JSON: Slurm's sync).
Result<NodeId> check_node_availability_change(const Cluster& cluster, const NodeAvailabilityChange& change);

class NodeAvailability {
 public:
  explicit NodeAvailability(std::size_t node_count) : marks_(node_count) {}

  bool available(NodeId n) const { return marks_[n.index()].empty(); }
  // The node's marks, ordered by source.
  std::span<const NodeMark> marks(NodeId n) const { return marks_[n.index()]; }
  // The mark `source` holds on the node, or nullptr.
  const NodeMark* mark(NodeId n, std::string_view source) const;
  // Replaces the source's mark on the node with `mark` (its source is the key), or removes
  // the mark of `source` when `mark` is empty.
  void set(NodeId n, std::string_view source, const std::optional<NodeMark>& mark);
  std::size_t unavailable_count() const { return unavailable_; }
  // "k8s: cordoned; api: maintenance" (empty when available).
  std::string reasons(NodeId n) const;
  // `allowed` (empty: every node) less the unavailable nodes, not counting marks by
  // `ignored_source` (empty: none ignored). Empty again when that leaves every node allowed,
  // so an available cluster pays nothing for the check.
  NodeMask narrow(const NodeMask& allowed, std::string_view ignored_source) const;

 private:
  std::vector<std::vector<NodeMark>> marks_;  // per node, sorted by source
  std::size_t unavailable_ = 0;               // nodes with at least one mark
};

}  // namespace toposched
