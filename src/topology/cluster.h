// Cluster: the immutable, validated model of how a GPU cluster is connected.
//
// Inside a node: GPUs, the GPU x GPU link matrix (NVLink link counts or the PCIe path class
// as `nvidia-smi topo -m` names it), NICs with their per-GPU path class and speed, NUMA and
// CPU affinity. Across nodes: a forest of switches in named tiers (tier 0 is closest to the
// nodes; a switch's parent is in a strictly higher tier, so the fabric has no cycle), and
// accelerator domains (multi-node NVLink, e.g. one GB200 NVL72 rack) with optional
// sub-domains. Every entity has a dense strong id; names are only used at the edges.
//
// Invariants (checked by ClusterBuilder::build): unique non-empty names per entity kind;
// every node has exactly one type; each node hangs under at most one switch and is in at
// most one domain; each switch has at most one parent, in a higher tier; link matrices are
// square, symmetric, kSelf exactly on the diagonal; GPU ids of a node are contiguous.
//
// path() answers "how are these two GPUs joined" in O(tree depth) without allocating.
// Bandwidths are per GPU and per direction, in GB/s, as seen when every GPU of the node
// uses that level at once (NIC sharing and tier oversubscription included).
//
// Thread-safety: a built Cluster is never mutated; any number of threads may query it.
// ClusterBuilder is single-threaded.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "topology/error.h"
#include "topology/ids.h"

namespace toposched {

// Path class between two GPUs of one node, or between a GPU and a NIC.
// The order is closest-first; kNVLink only appears between GPUs.
enum class LinkClass : std::uint8_t { kSelf, kNVLink, kPix, kPxb, kPhb, kNode, kSys };

// "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS".
std::string_view link_class_token(LinkClass c);
// Parses X / PIX / PXB / PHB / NODE / SYS (not NV#; see parse_link_cell).
std::optional<LinkClass> parse_pcie_class(std::string_view token);

struct GpuLink {
  LinkClass cls = LinkClass::kSys;  // kNVLink when nvlinks > 0
  std::uint8_t nvlinks = 0;
  friend bool operator==(const GpuLink&, const GpuLink&) = default;
};

// One `topo -m` cell between two GPUs: "X", "NV12", "PIX", ... ; nullopt if malformed.
std::optional<GpuLink> parse_link_cell(std::string_view token);
std::string link_cell_token(GpuLink link);

struct Nic {
  std::string name;                     // device name, e.g. "mlx5_0"
  double gbit = 0;                      // line rate in Gbit/s
  std::vector<LinkClass> gpu_affinity;  // per GPU of the node: path class GPU <-> NIC
  int numa_node = -1;                   // -1 = unknown
  bool compute = true;                  // false for storage / front-end NICs
  friend bool operator==(const Nic&, const Nic&) = default;
};

// What one GPU of a node type draws (W) in the simulator's three states: computing,
// waiting on communication, idle. 0 = the GPU product's default (sim/power.h, from the
// hardware table in topology/hardware.h); set from
// the spec's `gpu.power` to describe a site's own measurements or power caps.
struct GpuPowerSpec {
  double busy_w = 0;
  double comm_w = 0;
  double idle_w = 0;
  friend bool operator==(const GpuPowerSpec&, const GpuPowerSpec&) = default;
};

struct NodeType {
  std::string name;
  std::string gpu_model;
  double gpu_memory_gb = 0;
  int gpu_count = 0;
  std::vector<GpuLink> gpu_links;    // gpu_count * gpu_count, row-major
  double nvlink_GBps_per_link = 0;   // per direction
  bool nvswitch = false;             // all GPUs meet in NVSwitches (NVLS-capable)
  double pcie_GBps = 0;              // each GPU's host link, per direction
  double host_memory_gb = 0;         // the node's system memory (GB); 0 = not known
  std::vector<int> gpu_numa;         // per GPU; empty or -1 = unknown
  std::vector<std::string> gpu_cpu_affinity;  // per GPU, e.g. "0-55,112-167"; may be empty
  std::vector<Nic> nics;
  GpuPowerSpec power;                // per GPU; zeros = product defaults

  const GpuLink& link(int a, int b) const {
    return gpu_links[static_cast<std::size_t>(a * gpu_count + b)];
  }
  // Every GPU pair joined by `links` NVLinks (an NVSwitch baseboard when nvswitch is set).
  static std::vector<GpuLink> full_nvlink_mesh(int gpus, int links);
  friend bool operator==(const NodeType&, const NodeType&) = default;
};

struct Tier {
  std::string name;
  // Uplink bandwidth a node gets at this tier, GB/s per node per direction; 0 = limited only
  // by the node's NICs.
  double bandwidth_GBps_per_node = 0;
  double hop_latency_us = 0.5;     // one traversal of a switch of this tier
  double oversubscription = 1.0;   // down:up capacity of this tier's switches (>= 1)
  // What-if factors (> 0) on the paths this tier joins: a path whose joining switch is in
  // this tier (or, for the top tier, a cross-root path) gets its bandwidth and latency
  // multiplied by them. 1 from every spec reader and preset; set only by the simulator's
  // --score-model (sim/score_model.h), to give placement policies a deliberately wrong model.
  double path_bandwidth_factor = 1.0;
  double path_latency_factor = 1.0;
  friend bool operator==(const Tier&, const Tier&) = default;
};

struct DomainSpec {
  std::string name;
  double bandwidth_GBps = 0;  // per GPU per direction; 0 = from the node type's NVLinks
  double latency_us = 0;      // 0 = default
};

enum class PathLevel : std::uint8_t {
  kSameGpu,
  kNVLink,
  kPciePix,
  kPciePxb,
  kPciePhb,
  kPcieNode,
  kPcieSys,
  kAccelDomain,
  kTier,
  kCrossRoot,
};

struct Path {
  PathLevel level = PathLevel::kCrossRoot;
  std::uint8_t tier = 0;  // with kTier: the index of the joining tier
  double bandwidth_GBps = 0;
  double latency_us = 0;
  // Total order of closeness: larger is farther.
  int distance() const {
    return level == PathLevel::kTier       ? static_cast<int>(PathLevel::kTier) + tier
           : level == PathLevel::kCrossRoot ? 1 << 10
                                            : static_cast<int>(level);
  }
};

class ClusterBuilder;

class Cluster {
 public:
  const std::string& name() const { return name_; }

  std::size_t node_count() const { return node_names_.size(); }
  std::size_t gpu_count() const { return gpu_node_.size(); }
  std::size_t switch_count() const { return switch_names_.size(); }
  std::size_t domain_count() const { return domains_.size(); }
  std::size_t node_type_count() const { return node_types_.size(); }

  // Nodes.
  const std::string& node_name(NodeId n) const { return node_names_[n.index()]; }
  NodeTypeId node_type_id(NodeId n) const { return node_type_[n.index()]; }
  const NodeType& node_type(NodeId n) const { return node_types_[node_type_[n.index()].index()]; }
  int node_gpu_count(NodeId n) const { return node_type(n).gpu_count; }
  GpuId node_gpu(NodeId n, int local) const {
    return GpuId(node_first_gpu_[n.index()] + static_cast<std::uint32_t>(local));
  }
  SwitchId node_switch(NodeId n) const { return node_switch_[n.index()]; }  // invalid: none
  DomainId node_domain(NodeId n) const { return node_domain_[n.index()]; }  // invalid: none
  // Empty when the node is in no sub-domain.
  const std::string& node_sub_domain(NodeId n) const;
  std::optional<NodeId> find_node(std::string_view name) const;

  // GPUs.
  NodeId gpu_node(GpuId g) const { return gpu_node_[g.index()]; }
  int gpu_local_index(GpuId g) const { return gpu_local_[g.index()]; }

  // Node types.
  const NodeType& node_type_at(NodeTypeId t) const { return node_types_[t.index()]; }
  // Per-GPU network bandwidth (GB/s): its share of the compute NICs it is closest to.
  double gpu_network_GBps(GpuId g) const;

  // Fabric.
  const std::vector<Tier>& tiers() const { return tiers_; }
  const std::string& switch_name(SwitchId s) const { return switch_names_[s.index()]; }
  int switch_tier(SwitchId s) const { return switch_tier_[s.index()]; }
  SwitchId switch_parent(SwitchId s) const { return switch_parent_[s.index()]; }
  const std::vector<SwitchId>& switch_children(SwitchId s) const {
    return switch_children_[s.index()];
  }
  // Nodes attached directly to this switch, in node order.
  const std::vector<NodeId>& switch_nodes(SwitchId s) const { return switch_nodes_[s.index()]; }
  // All nodes in the switch's subtree, in node order.
  const std::vector<NodeId>& switch_subtree_nodes(SwitchId s) const {
    return switch_subtree_nodes_[s.index()];
  }
  std::optional<SwitchId> find_switch(std::string_view name) const;
  // Switches without a parent, in id order.
  std::vector<SwitchId> root_switches() const;
  double cross_root_bandwidth_GBps() const { return cross_root_bandwidth_GBps_; }
  double cross_root_latency_us() const { return cross_root_latency_us_; }

  // Accelerator domains.
  const DomainSpec& domain(DomainId d) const { return domains_[d.index()]; }
  const std::vector<NodeId>& domain_nodes(DomainId d) const { return domain_nodes_[d.index()]; }
  std::optional<DomainId> find_domain(std::string_view name) const;

  // How two GPUs are joined. O(tree depth), no allocation.
  Path path(GpuId a, GpuId b) const;
  // How two distinct nodes are joined (never an intra-node level). Bandwidth is that of
  // their first GPUs.
  Path node_path(NodeId a, NodeId b) const;
  // "same-gpu", "nvlink", "pcie-pix", ..., "accel-domain", "tier:<name>", "cross-root".
  std::string level_name(const Path& p) const;

  // All node names, in node order, as a compressed Slurm hostlist.
  std::string hostlist() const;

 private:
  friend class ClusterBuilder;
  Cluster() = default;

  // Joining switch of two nodes' switches, or invalid when they share no root.
  SwitchId common_switch(SwitchId a, SwitchId b) const;
  Path network_path(GpuId a, GpuId b, NodeId na, NodeId nb) const;

  struct PairInfo {
    PathLevel level;
    float bandwidth_GBps;
    float latency_us;
  };

  std::string name_;
  std::vector<NodeType> node_types_;
  std::vector<std::vector<PairInfo>> type_pairs_;      // per type: gpu_count^2
  std::vector<std::vector<double>> type_gpu_net_;      // per type: per GPU network GB/s
  std::vector<double> type_nvlink_GBps_;               // per type: one GPU's NVLink total

  std::vector<std::string> node_names_;
  std::vector<NodeTypeId> node_type_;
  std::vector<std::uint32_t> node_first_gpu_;
  std::vector<SwitchId> node_switch_;
  std::vector<DomainId> node_domain_;
  std::vector<std::uint32_t> node_sub_domain_;  // index into sub_domain_names_; 0 = none
  std::vector<std::string> sub_domain_names_;
  std::unordered_map<std::string, NodeId> node_index_;

  std::vector<NodeId> gpu_node_;
  std::vector<std::uint16_t> gpu_local_;

  std::vector<Tier> tiers_;
  std::vector<double> tier_bandwidth_cap_;   // min per-node cap over tiers <= k (inf if none)
  std::vector<double> tier_oversub_below_;   // product of oversubscription of tiers < k
  std::vector<double> tier_latency_;         // switch latency of a path joined at tier k
  std::vector<std::string> switch_names_;
  std::vector<int> switch_tier_;
  std::vector<SwitchId> switch_parent_;
  std::vector<std::vector<SwitchId>> switch_children_;
  std::vector<std::vector<NodeId>> switch_nodes_;
  std::vector<std::vector<NodeId>> switch_subtree_nodes_;
  std::unordered_map<std::string, SwitchId> switch_index_;
  double cross_root_bandwidth_GBps_ = 0;  // 0 = derived per pair
  double cross_root_latency_us_ = 0;

  std::vector<DomainSpec> domains_;
  std::vector<std::vector<NodeId>> domain_nodes_;
  std::unordered_map<std::string, DomainId> domain_index_;
};

// Assembles and validates a Cluster. Names are checked when build() runs, so callers can
// add entities in any order; errors name the entity involved (Error::message) and readers
// map them back to input positions through error_subject().
class ClusterBuilder {
 public:
  explicit ClusterBuilder(std::string name);

  NodeTypeId add_node_type(NodeType type);
  NodeId add_node(std::string name, NodeTypeId type);
  // Room for `nodes` nodes in all, for a caller that knows the count before adding them (a
  // reader of millions of nodes: no regrowth of the per-node tables and name index).
  void reserve_nodes(std::size_t nodes);
  int add_tier(Tier tier);  // returns its index; call closest tier first
  SwitchId add_switch(std::string name, int tier);
  void connect(SwitchId child, SwitchId parent);
  void attach(NodeId node, SwitchId sw);
  DomainId add_domain(DomainSpec domain);
  void add_to_domain(NodeId node, DomainId domain, std::string sub_domain = {});
  // Per-GPU bandwidth and latency between nodes that share no switch (0 = derived).
  void set_cross_root(double bandwidth_GBps, double latency_us);

  std::optional<NodeId> find_node(std::string_view name) const;
  std::optional<SwitchId> find_switch(std::string_view name) const;
  std::optional<NodeTypeId> find_node_type(std::string_view name) const;
  std::optional<DomainId> find_domain(std::string_view name) const;
  const NodeType& node_type(NodeTypeId t) const { return cluster_.node_types_[t.index()]; }
  std::size_t node_count() const { return cluster_.node_names_.size(); }
  std::size_t tier_count() const { return cluster_.tiers_.size(); }
  int switch_tier(SwitchId s) const { return cluster_.switch_tier_[s.index()]; }

  // Consumes the builder. On failure, error_subject() names the entity the error concerns.
  Result<Cluster> build() &&;

  // Name of the entity the last build() error concerns (node, switch, type, domain).
  const std::string& error_subject() const { return error_subject_; }

 private:
  Result<void> validate_node_type(const NodeType& t);
  tl::unexpected<Error> fail(std::string subject, std::string message);
  // build()'s phases, in order (cluster.cc says what each checks and fills).
  Result<void> check_names();
  Result<void> check_tiers();
  Result<void> check_node_types();
  Result<void> link_switches();
  Result<void> place_nodes();
  void build_node_type_tables();
  Result<void> finish_domains();
  void build_tier_tables();

  Cluster cluster_;
  // Per node, the first two distinct switches it was attached to (domains it was added to),
  // kNoneYet where fewer: build() needs no more (a second one is an error naming the first
  // two). Fixed-size, so a node costs no allocation here (clusters of millions of nodes).
  static constexpr std::uint32_t kNoneYet = 0xffffffffu;
  using FirstTwo = std::array<std::uint32_t, 2>;
  std::vector<FirstTwo> node_attach_;
  std::vector<FirstTwo> node_domains_;
  std::unordered_map<std::uint32_t, std::string> node_sub_domain_;  // only the nodes given one
  std::vector<std::vector<SwitchId>> switch_parents_;    // every parent given
  std::unordered_map<std::string, NodeTypeId> type_index_;
  std::string error_subject_;
};

}  // namespace toposched
