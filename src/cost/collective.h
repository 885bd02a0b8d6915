// Collective cost model: the time NCCL would take for one collective on a given set of GPUs,
// reasoned the way NCCL's own tuner does it (src/graph/tuning.cc): for every algorithm and
// protocol a latency (base + per-step hop latency) and a bandwidth (the slowest hop of the
// graph NCCL would build, times the protocol's efficiency), time = latency + bytes / algbw,
// and `auto` takes the fastest candidate. See docs/cost-model.md for the model, constants
// and sources.
//
// Graphs are built as NCCL builds them, independent of the order of `ranks`: GPUs of one
// NVLink island (a node, or an accelerator domain such as an NVL72 rack) are contiguous, the
// islands are visited in the order of their first rank, and each pair of consecutive islands
// is crossed once per channel; the crossing bandwidth counts the NIC share of every GPU the
// collective has in the island (GPUs sharing a NIC share it), the tier caps, and the
// oversubscription of every tier below the joining switch.
//
// Reporting follows nccl-tests (doc/PERFORMANCE.md): `bytes` is the size nccl-tests prints
// (the whole buffer: the output of allgather, the input of reduce-scatter, what each rank
// sends in all-to-all and send/recv), algbw = bytes / time and busbw = algbw x factor with
// factor 2(n-1)/n for allreduce, (n-1)/n for allgather, reduce-scatter and all-to-all, 1 for
// broadcast, reduce and send/recv.
//
// Invariants: time_us >= 0, finite; busbw = algbw x bus_factor; time grows with bytes for a
// fixed algorithm and protocol, and so does the auto choice (a minimum of increasing
// functions). Pure functions of their inputs; thread-safe. estimate_collective allocates
// only a thread-local scratch buffer that it reuses.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "topology/cluster.h"
#include "topology/error.h"
#include "topology/registry.h"

namespace toposched {

enum class Collective : std::uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kSendRecv,
};

// kDirect is the point-to-point pattern of all-to-all and send/recv (no ring or tree).
enum class Algorithm : std::uint8_t { kAuto, kRing, kTree, kNvls, kHierarchical, kDirect };

// NCCL's protocols: LL (8-byte flag+data lines), LL128 (128-byte lines), Simple.
enum class Protocol : std::uint8_t { kLL, kLL128, kSimple };

// The collectives and algorithms by name, in their enums' order; find's error lists them.
const Registry<Collective>& collectives();
const Registry<Algorithm>& algorithms();
// "allreduce", "allgather", "reduce-scatter", "broadcast", "reduce", "all-to-all", "send-recv".
std::string_view collective_name(Collective c);
// Accepts the names above and common spellings ("all_reduce", "reducescatter", "alltoall",
// "sendrecv", ...), case-insensitively.
std::optional<Collective> parse_collective(std::string_view name);
std::string_view algorithm_name(Algorithm a);  // "auto", "ring", "tree", "nvls", "hierarchical", "direct"
std::optional<Algorithm> parse_algorithm(std::string_view name);
std::string_view protocol_name(Protocol p);  // "LL", "LL128", "Simple"

// nccl-tests' bus bandwidth factor for n ranks.
double bus_factor(Collective c, int ranks);

struct CollectiveEstimate {
  Collective collective = Collective::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;  // never kAuto: the algorithm chosen
  Protocol protocol = Protocol::kSimple;
  double time_us = 0;
  double algbw_GBps = 0;  // 0 when time is 0 (one rank)
  double busbw_GBps = 0;
  int ranks = 0;
  int islands = 0;  // NVLink islands (nodes, or accelerator domains) the ranks span
};

struct CostOptions {
  // Fraction (0, 1] of its inter-node bandwidth the job gets, e.g. from
  // network_shares() in contention.h when other jobs share its uplinks.
  double network_share = 1.0;
  // By default a path above an oversubscribed tier gets its bandwidth divided by the
  // oversubscription (the topology's convention: every node under the switch sending at
  // once). When network_share comes from network_shares(), which computes who actually
  // shares each uplink, set this: the static division is skipped and the share alone
  // applies, so a job alone on an oversubscribed fabric gets the whole uplink.
  bool share_accounts_for_oversubscription = false;
};

// One collective of `bytes` on `ranks` (ranks[r] is the GPU of rank r). Errors: empty
// ranks, an invalid or repeated GPU, bytes negative or not finite, an algorithm that does
// not apply to the collective or to these GPUs (e.g. NVLS without NVSwitch), bad options.
Result<CollectiveEstimate> estimate_collective(const Cluster& cluster, std::span<const GpuId> ranks,
                                               Collective collective, double bytes,
                                               Algorithm algorithm = Algorithm::kAuto, const CostOptions& options = {});

// The per-call times of the collectives of many groups of ranks on one cluster with one set
// of options: a job's parallel groups (estimate_job_comm walks thousands of them for a job of
// thousands of GPUs). time_us(ranks, {c1, c2}, bytes) is
// estimate_collective(cluster, ranks, c1, bytes, kAuto, options)->time_us plus the same for
// c2, bit for bit, and fails with the same error where either would. Cheaper because:
//  - a group's graph (islands, crossings) is built once for all its collectives;
//  - a group whose GPUs are all on one node (a TP group) is looked up by the node's type and
//    the set of local GPU indices, which are all its graph depends on (the paths inside a
//    node and the GPUs' NIC shares come from the node type; one island needs no crossing),
//    so its ranks are not sorted and no path is looked up again;
//  - a spread group (one GPU on each of its nodes, no accelerator domain: a job's DP and PP
//    groups) gets its graph in rank order without a sort, and reuses the previous spread
//    group's graph when the nodes and the GPUs' NIC shares are the same (the DP groups of
//    one stage);
//  - the algorithm choice is kept per distinct (graph, collective, bytes), the graph's
//    fields compared bit for bit, and the last answer is kept for the next group of the
//    same graph: groups of one kind on equivalent GPUs (most of a job's groups) share one.
// Memory grows with the distinct shapes and graphs seen; use one per job estimate.
// Not thread-safe: one object per thread (it also uses per-thread scratch). The cluster
// must outlive it.
class GroupCollectiveCosts {
 public:
  GroupCollectiveCosts(const Cluster& cluster, const CostOptions& options);
  ~GroupCollectiveCosts();
  GroupCollectiveCosts(const GroupCollectiveCosts&) = delete;
  GroupCollectiveCosts& operator=(const GroupCollectiveCosts&) = delete;

  // The sum, in the order given, of each collective's time on `ranks` (auto algorithm).
  Result<double> time_us(std::span<const GpuId> ranks, std::span<const Collective> collectives, double bytes);

  struct State;  // the caches (collective.cc)

 private:
  const Cluster& cluster_;
  CostOptions options_;
  std::unique_ptr<State> state_;
};

// The `cost` JSON of one estimate: {"algorithm","time_us","algbw_GBps","busbw_GBps",
// "protocol","collective","bytes","ranks","islands"} (the CLI and POST /v1/cost).
nlohmann::ordered_json estimate_to_json(const CollectiveEstimate& estimate, double bytes);

}  // namespace toposched
