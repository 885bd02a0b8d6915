#include "cost/collective.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "cost/nccl_constants.h"
#include "topology/text.h"

namespace toposched {

namespace nccl {

Arch arch_of(std::string_view gpu_model) {
  // Upper-cased copy in a fixed buffer: no allocation (this runs per node on hot paths).
  char buf[64];
  const std::size_t n = std::min(gpu_model.size(), sizeof buf);
  for (std::size_t i = 0; i < n; ++i)
    buf[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(gpu_model[i])));
  const std::string_view key(buf, n);
  auto has = [&](std::string_view s) { return key.find(s) != std::string_view::npos; };
  if (has("B200") || has("B300") || has("GB2") || has("GB3")) return Arch::kBlackwell;
  if (has("H100") || has("H200") || has("H800") || has("H20") || has("GH200")) return Arch::kHopper;
  if (has("V100")) return Arch::kVolta;
  return Arch::kAmpere;
}

double ll_nvswitch_step_extra_us(Arch arch) { return arch == Arch::kAmpere ? 0.53 : 0.0; }

double nvls_efficiency(Arch arch) {
  switch (arch) {
    case Arch::kHopper:
      return 0.85;
    case Arch::kBlackwell:
      return 0.74;
    default:
      return 0;
  }
}

double nvlink_efficiency(Arch arch) {
  // NCCL's usable per-link figures (topo.h) over the nominal rate per link (hardware.h).
  switch (arch) {
    case Arch::kVolta:
      return 20.0 / 25.0;
    case Arch::kAmpere:
      return 20.0 / 25.0;
    case Arch::kHopper:
      return 20.6 / 25.0;
    case Arch::kBlackwell:
      return 40.1 / 50.0;
  }
  return 0.8;
}

}  // namespace nccl

namespace {

using nccl::Arch;
constexpr double kInf = std::numeric_limits<double>::infinity();
// NCCL's usable PCIe bandwidth (topo.h PCI_BW 24 GB/s for Gen4 x16, 12 for Gen3 x16) over
// the line rate after encoding (31.5 and 15.75 GB/s).
constexpr double kPcieEfficiency = 24.0 / 31.5;

constexpr int kTree = 0, kRingIdx = 1, kNvlsIdx = 2;
constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;

// One NVLink island of the collective: a node, or the part of an accelerator domain the
// ranks use. Built per call from the ranks; see estimate_collective.
struct Island {
  std::uint32_t first_rank = 0;
  int gpus = 0;
  int nodes = 0;
  NodeId node;                   // first node, for path queries to other islands
  double intra_bw = kInf;        // usable GB/s per GPU of the slowest hop inside
  double intra_lat = 0;          // µs, slowest hop inside
  bool nvlink = true;            // every hop inside is NVLink (or domain NVLink)
  bool nvswitch = true;          // every node has an NVSwitch baseboard
  Arch arch = Arch::kBlackwell;  // oldest GPU generation among its nodes
  double egress = 0;             // GB/s: usable NIC share of its GPUs, summed
};

struct Entry {
  std::uint64_t key;  // island key << gpu bits | gpu
  std::uint32_t rank;
  std::uint32_t node;  // the GPU's node (fills what would be padding)
};

// The graph-level quantities every algorithm's formula needs.
struct Graph {
  int ranks = 0;
  int islands = 0;
  int max_local = 0;
  bool equal_local = true;
  double intra_bw = kInf;  // slowest intra-island hop, GB/s per GPU
  double intra_lat = 0;    // its latency, µs
  bool intra_nvlink = true;
  bool nvswitch = true;
  double cross_bw = kInf;  // slowest island crossing, GB/s (all channels)
  double cross_lat = 0;
  Arch arch = Arch::kBlackwell;
};

struct Candidate {
  Algorithm algorithm;
  Protocol protocol;
  double latency_us;
  double algbw_GBps;  // bandwidth term: time = latency + bytes / algbw
  double time(double bytes) const { return latency_us + bytes / (algbw_GBps * 1e3); }
};

int log2i(int n) {
  int l = 0;
  while (n > 1) {
    n >>= 1;
    ++l;
  }
  return l;
}

double ll_max_bw(const Graph& g) {
  int col = g.islands <= 2 ? g.islands - 1 : 2;
  return nccl::kLLMaxBwGBps[static_cast<int>(g.arch)][col];
}

bool ll128_enabled(const Graph& g) { return g.intra_nvlink; }

double intra_hop_latency(const Graph& g, int algo, int proto) {
  int hw = g.intra_nvlink ? kHwNvlink : kHwPci;
  double lat = nccl::kHopLatencyUs[hw][algo][proto];
  if (proto == 0 && g.intra_nvlink && g.nvswitch) lat += nccl::ll_nvswitch_step_extra_us(g.arch);
  if (g.islands > 1 && proto == 0) lat *= nccl::kLLIntraLatencyFactorMultiNode;
  return lat + g.intra_lat;
}

double inter_hop_latency(const Graph& g, int algo, int proto) {
  return nccl::kHopLatencyUs[kHwNet][algo][proto] + g.cross_lat;
}

// The graph's per-rank bandwidth: what one rank can push through the slowest hop.
double graph_bw(const Graph& g) { return std::min(g.intra_bw, g.cross_bw); }

// Ring: NCCL's formula with this graph's bandwidth; returns false if the protocol is off.
bool ring_candidate(const Graph& g, Collective c, int proto, Candidate& out) {
  if (proto == 1 && !ll128_enabled(g)) return false;
  const int n = g.ranks;
  int nsteps, ninter;
  switch (c) {
    case Collective::kAllReduce:
      nsteps = 2 * (n - 1);
      ninter = 2 * (g.islands - 1);
      break;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      nsteps = n - 1;
      ninter = g.islands - 1;
      break;
    default:
      nsteps = n - 1;
      ninter = g.islands - 1;
      break;  // broadcast, reduce: a chain
  }
  double intra = intra_hop_latency(g, kRingIdx, proto);
  if (g.islands > 1) intra = std::max(intra, nccl::kNetOverheadUs * (proto == 2 ? 3 : 1));
  double lat = nccl::kBaseLatencyUs[kRingIdx][proto] + (nsteps - ninter) * intra +
               ninter * inter_hop_latency(g, kRingIdx, proto);
  double bus = graph_bw(g);
  if (proto == 0) bus = std::min(ll_max_bw(g), bus * nccl::kRingLLFactor);
  if (proto == 1) bus *= nccl::kRingLL128Factor;
  out = {Algorithm::kRing, static_cast<Protocol>(proto), lat, bus / bus_factor(c, n)};
  if (c == Collective::kBroadcast || c == Collective::kReduce) out.algbw_GBps = bus;
  return true;
}

bool tree_candidate(const Graph& g, int proto, Candidate& out) {
  if (proto == 1 && !ll128_enabled(g)) return false;
  double bus = graph_bw(g) * nccl::kTreeFactor;
  if (proto == 0) bus = std::min(bus * nccl::kTreeLLFactor, ll_max_bw(g));
  if (proto == 1) bus *= g.islands == 1 ? nccl::kTreeLL128FactorSingleNode : nccl::kTreeLL128FactorMultiNode;
  double lat = nccl::kBaseLatencyUs[kTree][proto] + 2 * ((g.max_local - 1) * intra_hop_latency(g, kTree, proto) +
                                                         log2i(g.islands) * inter_hop_latency(g, kTree, proto));
  out = {Algorithm::kTree, static_cast<Protocol>(proto), lat, bus * nccl::kTreeAlgbwRatio};
  return true;
}

bool nvls_supported(const Graph& g) {
  return g.nvswitch && g.intra_nvlink && g.arch >= Arch::kHopper && g.max_local >= 2;
}

// NVLS inside one island (allreduce, allgather, reduce-scatter); NVLS+Tree across islands
// (allreduce only), as NCCL 2.18+ does on NVSwitch systems.
bool nvls_candidate(const Graph& g, Collective c, Candidate& out) {
  if (!nvls_supported(g)) return false;
  // Two steps through the switch (multimem reduce, then multicast store), each paying the
  // NVLink hop latency on top of NCCL's NVLS latency.
  const double intra_lat = nccl::kHopLatencyUs[kHwNvlink][kNvlsIdx][2] + 2 * g.intra_lat;
  const double k = g.max_local;
  const double nvls_bw = g.intra_bw * nccl::nvls_efficiency(g.arch) * k / (k + 1);
  if (g.islands == 1) {
    if (c == Collective::kAllReduce) {
      out = {Algorithm::kNvls, Protocol::kSimple, intra_lat, nvls_bw};
    } else {
      out = {Algorithm::kNvls, Protocol::kSimple, intra_lat, g.intra_bw / bus_factor(c, g.ranks)};
    }
    return true;
  }
  if (c != Collective::kAllReduce) return false;
  double inter = g.islands <= 2 ? g.cross_bw : g.cross_bw / 2;
  double bw = std::min(nvls_bw, inter);
  double lat = intra_lat + 2 * log2i(g.islands) * (nccl::kHopLatencyUs[kHwNet][kNvlsIdx][2] + g.cross_lat);
  out = {Algorithm::kNvls, Protocol::kSimple, lat, bw};
  return true;
}

double best_time(const Graph& g, Collective c, double bytes, Algorithm a, Candidate* chosen) {
  double best = kInf;
  auto consider = [&](const Candidate& cand) {
    double t = cand.time(bytes);
    if (t < best) {
      best = t;
      if (chosen) *chosen = cand;
    }
  };
  Candidate cand;
  for (int p = 0; p < 3; ++p) {
    if (a == Algorithm::kRing && ring_candidate(g, c, p, cand)) consider(cand);
    if (a == Algorithm::kTree && tree_candidate(g, p, cand)) consider(cand);
  }
  if (a == Algorithm::kNvls && nvls_candidate(g, c, cand)) consider(cand);
  return best;
}

// All-to-all and send/recv: every rank talks to its peers directly. Volume leaving each
// rank over NVLink and over the network is divided by the bandwidth of that path.
Candidate direct_candidate(const Graph& g, Collective c, double local_fraction_min) {
  // Time per byte of `bytes` (what each rank sends).
  double lat = nccl::kBaseLatencyUs[kRingIdx][2] +
               (g.islands > 1 ? inter_hop_latency(g, kRingIdx, 2) : intra_hop_latency(g, kRingIdx, 2));
  double per_byte;  // µs per byte
  if (c == Collective::kSendRecv) {
    double bw = g.islands > 1 ? std::min(g.cross_bw / std::max(1, g.max_local), g.intra_bw) : g.intra_bw;
    per_byte = 1.0 / (bw * 1e3);
  } else {
    const int n = g.ranks;
    // Fraction of a rank's data to peers in its island, and outside it.
    double local = local_fraction_min;
    double remote = (n - 1.0) / n - local;
    double per_rank_net = g.islands > 1 ? g.cross_bw / std::max(1, g.max_local) : kInf;
    per_byte = std::max(local / (g.intra_bw * 1e3), remote > 0 ? remote / (per_rank_net * 1e3) : 0.0);
  }
  return {Algorithm::kDirect, Protocol::kSimple, lat, per_byte > 0 ? 1.0 / (per_byte * 1e3) : kInf};
}

// Hierarchical allreduce: reduce-scatter inside each island, allreduce across islands
// between the ranks of equal local index (max_local rings sharing the crossing), allgather
// inside. Three NCCL calls in sequence, each with its best protocol.
double hierarchical_time(const Graph& g, double bytes) {
  // Real implementations cut the message into chunks and overlap the phases, so the
  // bandwidth term is that of the busiest resource (NVLink carries both intra phases, the
  // network the inter phase) while every phase's latency is paid once.
  const int k = g.max_local;
  double latency = 0, nvlink_term = 0, network_term = 0;
  Candidate c;
  if (k > 1) {
    Graph in = g;
    in.ranks = k;
    in.islands = 1;
    in.cross_bw = kInf;
    in.cross_lat = 0;
    for (Collective phase : {Collective::kReduceScatter, Collective::kAllGather}) {
      best_time(in, phase, bytes, Algorithm::kRing, &c);
      latency += c.latency_us;
      nvlink_term += bytes / (c.algbw_GBps * 1e3);
    }
  }
  if (g.islands > 1) {
    Graph out = g;
    out.ranks = g.islands;
    out.max_local = 1;
    out.intra_bw = kInf;
    out.intra_lat = 0;
    out.cross_bw = g.cross_bw / k;  // k rings share each crossing
    best_time(out, Collective::kAllReduce, bytes / k, Algorithm::kRing, &c);
    latency += c.latency_us;
    network_term = bytes / k / (c.algbw_GBps * 1e3);
  }
  return latency + std::max(nvlink_term, network_term);
}

struct Scratch {
  std::vector<Entry> entries;
  std::vector<Entry> spare;  // radix sort buffer
  std::vector<Island> islands;
};

// LSD radix sort on the low `bits` bits of the keys, one byte per pass (stable). For the
// placement engine's many calls on thousands of ranks this beats std::sort by ~5x.
void radix_sort(std::vector<Entry>& v, std::vector<Entry>& tmp, int bits) {
  tmp.resize(v.size());
  for (int shift = 0; shift < bits; shift += 8) {
    std::array<std::size_t, 257> count{};
    for (const Entry& e : v) ++count[((e.key >> shift) & 0xff) + 1];
    for (std::size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
    for (const Entry& e : v) tmp[count[(e.key >> shift) & 0xff]++] = e;
    v.swap(tmp);
  }
}

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

const Registry<Collective>& collectives() {
  // In the enum's order: collective_name indexes the rows.
  static const Registry<Collective> kCollectives(
      "collective", {{"allreduce", "every rank ends with the sum of all ranks' buffers", Collective::kAllReduce,
                      {"all_reduce", "all-reduce"}},
                     {"allgather", "every rank ends with all ranks' buffers", Collective::kAllGather,
                      {"all_gather", "all-gather"}},
                     {"reduce-scatter", "every rank ends with its share of the sum", Collective::kReduceScatter,
                      {"reduce_scatter", "reducescatter"}},
                     {"broadcast", "one rank's buffer to every rank", Collective::kBroadcast, {"bcast"}},
                     {"reduce", "the sum of all ranks' buffers on one rank", Collective::kReduce},
                     {"all-to-all", "every rank sends a share of its buffer to every other", Collective::kAllToAll,
                      {"alltoall", "all_to_all", "a2a"}},
                     {"send-recv", "point-to-point, rank pairs", Collective::kSendRecv,
                      {"sendrecv", "send_recv", "p2p"}}});
  return kCollectives;
}

const Registry<Algorithm>& algorithms() {
  static const Registry<Algorithm> kAlgorithms(
      "algorithm", {{"auto", "the fastest that applies, as NCCL's tuner picks", Algorithm::kAuto},
                    {"ring", "NCCL's ring", Algorithm::kRing},
                    {"tree", "NCCL's double binary tree (allreduce)", Algorithm::kTree},
                    {"nvls", "NVLink SHARP on NVSwitch (Hopper and later)", Algorithm::kNvls},
                    {"hierarchical", "allreduce: reduce-scatter in each island, allreduce across, allgather in each", Algorithm::kHierarchical},
                    {"direct", "point-to-point sends (all-to-all, send-recv)", Algorithm::kDirect}});
  return kAlgorithms;
}

std::string_view collective_name(Collective c) { return collectives().rows()[static_cast<std::size_t>(c)].name; }

std::optional<Collective> parse_collective(std::string_view name) {
  if (const auto* row = collectives().row(ascii_lower(name))) return row->value;
  return std::nullopt;
}

std::string_view algorithm_name(Algorithm a) { return algorithms().rows()[static_cast<std::size_t>(a)].name; }

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  if (const auto* row = algorithms().row(ascii_lower(name))) return row->value;
  return std::nullopt;
}

std::string_view protocol_name(Protocol p) {
  switch (p) {
    case Protocol::kLL:
      return "LL";
    case Protocol::kLL128:
      return "LL128";
    case Protocol::kSimple:
      return "Simple";
  }
  return "unknown";
}

double bus_factor(Collective c, int ranks) {
  const double n = std::max(ranks, 1);
  switch (c) {
    case Collective::kAllReduce:
      return 2 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      return 1;
  }
  return 1;
}

namespace {

tl::unexpected<Error> unsupported(Algorithm algorithm, Collective collective, std::string_view why) {
  return make_error(ErrorCode::kUnsupported, fmt::format("algorithm '{}' does not apply to {}: {}",
                                                         algorithm_name(algorithm), collective_name(collective), why));
}

bool is_direct_collective(Collective c) { return c == Collective::kAllToAll || c == Collective::kSendRecv; }

// The arguments' ranges, and whether the algorithm applies to the collective at all; read
// before any rank is.
Result<void> check_request(std::span<const GpuId> ranks, Collective collective, double bytes, Algorithm algorithm,
                           const CostOptions& options) {
  if (ranks.empty()) return make_error(ErrorCode::kInvalidArgument, "a collective needs at least one GPU");
  if (ranks.size() > std::numeric_limits<std::uint32_t>::max() / 2)
    return make_error(ErrorCode::kInvalidArgument, "too many ranks");
  if (!std::isfinite(bytes) || bytes < 0)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("message size must be a finite, non-negative number of bytes, not {}", bytes));
  if (!(options.network_share > 0) || options.network_share > 1)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("network share must be in (0, 1], not {}", options.network_share));

  const bool is_direct = is_direct_collective(collective);
  if (is_direct && algorithm != Algorithm::kAuto && algorithm != Algorithm::kDirect)
    return unsupported(algorithm, collective, "it is point-to-point; use 'direct' or 'auto'");
  if (!is_direct && algorithm == Algorithm::kDirect)
    return unsupported(algorithm, collective, "use ring, tree, nvls or hierarchical");
  if ((algorithm == Algorithm::kTree || algorithm == Algorithm::kHierarchical) && collective != Collective::kAllReduce)
    return unsupported(algorithm, collective, "NCCL runs it for allreduce only");
  if (algorithm == Algorithm::kNvls && collective != Collective::kAllReduce && collective != Collective::kAllGather &&
      collective != Collective::kReduceScatter)
    return unsupported(algorithm, collective, "NVLS serves allreduce, allgather and reduce-scatter");
  return {};
}

// Fills s.entries with one key per rank and sorts them, so that the ranks of an island are
// adjacent. GPU ids of a node are contiguous and increase with the node id, so sorting by
// (island, gpu) groups nodes and keeps each node's GPUs in order. Returns the number of low
// key bits that hold the GPU id.
Result<int> sort_ranks_by_island(const Cluster& cluster, std::span<const GpuId> ranks, Scratch& s) {
  s.entries.resize(ranks.size());
  Entry* const out = s.entries.data();  // a plain pointer: the TLS vector is not re-read per rank
  const auto gpu_total = cluster.gpu_count();
  const auto domains = static_cast<std::uint64_t>(cluster.domain_count());
  // Key = island << gpu_bits | gpu, as narrow as the cluster allows (fewer sort passes).
  auto width = [](std::uint64_t v) {
    int b = 1;
    while (b < 63 && (v >> b) != 0) ++b;
    return b;
  };
  const int gpu_bits = width(gpu_total);
  const int key_bits = gpu_bits + width(domains + cluster.node_count());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    GpuId g = ranks[r];
    if (!g.valid() || g.index() >= gpu_total)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("rank {}: GPU id {} is not in cluster '{}'", r, g.value, cluster.name()));
    NodeId n = cluster.gpu_node(g);
    DomainId d = cluster.node_domain(n);
    std::uint64_t island = d.valid() ? d.index() : domains + n.index();
    out[r] = {island << gpu_bits | g.value, static_cast<std::uint32_t>(r), n.value};
  }
  auto by_key = [](const Entry& a, const Entry& b) { return a.key < b.key; };
  if (!std::is_sorted(s.entries.begin(), s.entries.end(), by_key)) {
    if (s.entries.size() < 256)
      std::sort(s.entries.begin(), s.entries.end(), by_key);
    else
      radix_sort(s.entries, s.spare, key_bits);
  }
  return gpu_bits;
}

// Walks the sorted entries into s.islands (in key order): each island's GPUs, nodes, slowest
// hop inside, oldest generation and NIC egress. A GPU given twice is an error.
Result<void> collect_islands(const Cluster& cluster, int gpu_bits, Scratch& s) {
  const std::uint64_t gpu_mask = (std::uint64_t{1} << gpu_bits) - 1;
  s.islands.clear();
  NodeTypeId cached_type;  // the generation and NVLink efficiency of the last node type seen
  Arch cached_arch = Arch::kAmpere;
  double cached_nvlink_eff = 0;
  const Entry* const sorted = s.entries.data();
  const std::size_t count = s.entries.size();
  Island isl;  // the island being accumulated; pushed when the next one starts
  for (std::size_t i = 0; i < count; ++i) {
    const Entry& e = sorted[i];
    GpuId g(static_cast<std::uint32_t>(e.key & gpu_mask));
    NodeId n(e.node);
    bool new_island = i == 0 || (sorted[i - 1].key >> gpu_bits) != (e.key >> gpu_bits);
    if (!new_island && sorted[i - 1].key == e.key)
      return make_error(
          ErrorCode::kInvalidArgument,
          fmt::format("GPU {}:{} is given twice (ranks {} and {})", cluster.node_name(n), cluster.gpu_local_index(g),
                      std::min(sorted[i - 1].rank, e.rank), std::max(sorted[i - 1].rank, e.rank)));
    bool new_node = new_island || sorted[i - 1].node != e.node;
    if (new_node) {
      if (cluster.node_type_id(n) != cached_type) {
        cached_type = cluster.node_type_id(n);
        cached_arch = nccl::arch_of(cluster.node_type_at(cached_type).gpu_model);
        cached_nvlink_eff = nccl::nvlink_efficiency(cached_arch);
      }
      if (new_island) {
        if (i > 0) s.islands.push_back(isl);
        isl = Island{};
        isl.first_rank = e.rank;
        isl.node = n;
      }
      ++isl.nodes;
      isl.nvswitch = isl.nvswitch && cluster.node_type_at(cached_type).nvswitch;
      isl.arch = std::min(isl.arch, cached_arch);
    }
    isl.first_rank = std::min(isl.first_rank, e.rank);
    ++isl.gpus;
    isl.egress += cluster.gpu_network_GBps(g) * nccl::kNetEncodingEfficiency;
    if (!new_island) {
      GpuId prev(static_cast<std::uint32_t>(sorted[i - 1].key & gpu_mask));
      Path p = cluster.path(prev, g);
      double eff;
      if (p.level == PathLevel::kNVLink || p.level == PathLevel::kAccelDomain) {
        eff = cached_nvlink_eff;
      } else {
        eff = kPcieEfficiency;
        isl.nvlink = false;
      }
      isl.intra_bw = std::min(isl.intra_bw, p.bandwidth_GBps * eff);
      isl.intra_lat = std::max(isl.intra_lat, p.latency_us);
    }
  }
  s.islands.push_back(isl);
  return {};
}

// The graph-level quantities of the islands' insides (the crossings come from cross_islands).
Graph summarise_islands(std::size_t ranks, const std::vector<Island>& islands) {
  Graph g;
  g.ranks = static_cast<int>(ranks);
  g.islands = static_cast<int>(islands.size());
  for (const Island& isl : islands) {
    g.max_local = std::max(g.max_local, isl.gpus);
    if (isl.gpus != islands.front().gpus) g.equal_local = false;
    if (isl.gpus > 1) {
      g.intra_bw = std::min(g.intra_bw, isl.intra_bw);
      g.intra_lat = std::max(g.intra_lat, isl.intra_lat);
      g.intra_nvlink = g.intra_nvlink && isl.nvlink;
    }
    g.nvswitch = g.nvswitch && isl.nvswitch;
    g.arch = std::min(g.arch, isl.arch);
  }
  if (g.max_local <= 1) g.intra_nvlink = true;  // no intra hop: the protocols are not limited by one
  return g;
}

// Usable GB/s between two islands over path p: their egress, capped by the tiers crossed
// and divided by the oversubscription the share does not already account for.
double crossing_bandwidth(const Cluster& cluster, const CostOptions& options, const Island& a, const Island& b,
                          const Path& p) {
  const auto& tiers = cluster.tiers();
  double bw = std::min(a.egress, b.egress);
  if (p.level == PathLevel::kTier) {
    double over = 1, cap = kInf;
    for (std::size_t k = 0; k <= p.tier && k < tiers.size(); ++k) {
      if (tiers[k].bandwidth_GBps_per_node > 0) cap = std::min(cap, tiers[k].bandwidth_GBps_per_node);
      if (k < p.tier && !options.share_accounts_for_oversubscription) over *= tiers[k].oversubscription;
    }
    bw = std::min({bw, cap * a.nodes, cap * b.nodes}) / over;
    if (p.tier < tiers.size()) bw *= tiers[p.tier].path_bandwidth_factor;  // 1 but under simulate --score-model
  } else if (p.level == PathLevel::kCrossRoot) {
    if (cluster.cross_root_bandwidth_GBps() > 0) {
      bw = std::min(bw, cluster.cross_root_bandwidth_GBps() * std::min(a.gpus, b.gpus));
    } else {
      double over = 1;
      if (!options.share_accounts_for_oversubscription)
        for (const Tier& t : tiers) over *= t.oversubscription;
      bw /= over;
    }
    if (!tiers.empty()) bw *= tiers.back().path_bandwidth_factor;
  }
  return bw * options.network_share;
}

// Sorts the islands in the order of their first rank and sets g's slowest crossing: each
// consecutive pair (and the last back to the first) is crossed once by every channel.
void cross_islands(const Cluster& cluster, const CostOptions& options, std::vector<Island>& islands, Graph& g) {
  if (g.islands <= 1) return;
  std::sort(islands.begin(), islands.end(), [](const Island& a, const Island& b) { return a.first_rank < b.first_rank; });
  for (std::size_t i = 0; i < islands.size(); ++i) {
    const Island& a = islands[i];
    const Island& b = islands[(i + 1) % islands.size()];
    if (islands.size() == 2 && i == 1) break;  // the same pair
    Path p = cluster.node_path(a.node, b.node);
    g.cross_bw = std::min(g.cross_bw, crossing_bandwidth(cluster, options, a, b, p));
    g.cross_lat = std::max(g.cross_lat, p.latency_us);
  }
}

struct Choice {
  Candidate candidate;
  double time_us;
};

// The algorithm and protocol that run the collective on g: the fastest of those that apply
// when the caller asked for auto, else the one asked for (or why it cannot run here).
Result<Choice> choose_algorithm(const Graph& g, int min_local, Collective collective, double bytes,
                                Algorithm algorithm) {
  Candidate chosen{Algorithm::kRing, Protocol::kSimple, 0, kInf};
  double best = kInf;
  auto consider_algo = [&](Algorithm a) {
    Candidate c;
    double t = best_time(g, collective, bytes, a, &c);
    if (t < best) best = t, chosen = c;
  };
  if (is_direct_collective(collective)) {
    // Fraction of a rank's all-to-all data that stays in its island (the smallest island
    // has the most remote traffic).
    double local = (min_local - 1.0) / g.ranks;
    chosen = direct_candidate(g, collective, local);
    best = chosen.time(bytes);
  } else if (algorithm == Algorithm::kHierarchical) {
    if (!g.equal_local)
      return unsupported(algorithm, collective, "it needs the same number of GPUs in every node (or NVLink domain)");
    best = hierarchical_time(g, bytes);
    chosen = {Algorithm::kHierarchical, Protocol::kSimple, 0, 0};
  } else if (algorithm == Algorithm::kAuto) {
    consider_algo(Algorithm::kRing);
    if (collective == Collective::kAllReduce) consider_algo(Algorithm::kTree);
    if (collective == Collective::kAllReduce || collective == Collective::kAllGather ||
        collective == Collective::kReduceScatter)
      consider_algo(Algorithm::kNvls);
  } else {
    if (algorithm == Algorithm::kNvls && !nvls_supported(g))
      return unsupported(algorithm, collective,
                         "NVLS needs NVSwitch nodes of the Hopper generation or later and at least two GPUs per node");
    if (algorithm == Algorithm::kNvls && g.islands > 1 && collective != Collective::kAllReduce)
      return unsupported(algorithm, collective, "across nodes NCCL runs NVLS (as NVLS+Tree) for allreduce only");
    consider_algo(algorithm);
  }
  if (!std::isfinite(best)) best = chosen.latency_us;  // only when bytes are 0 and bw is infinite
  return Choice{chosen, best};
}

// The graph of `ranks` (their islands left in s.islands): sort the ranks by island, collect
// the islands, summarise them and their crossings. Errors: a GPU outside the cluster or
// given twice.
Result<Graph> build_graph(const Cluster& cluster, std::span<const GpuId> ranks, const CostOptions& options,
                          Scratch& s) {
  TOPOSCHED_TRY(gpu_bits, sort_ranks_by_island(cluster, ranks, s));
  TOPOSCHED_CHECK(collect_islands(cluster, gpu_bits, s));
  Graph g = summarise_islands(ranks.size(), s.islands);
  cross_islands(cluster, options, s.islands, g);
  return g;
}

// The fewest GPUs any island holds (the direct collectives' local share).
int min_island_gpus(const Graph& g, const std::vector<Island>& islands) {
  int min_local = g.max_local;
  for (const Island& isl : islands) min_local = std::min(min_local, isl.gpus);
  return min_local;
}

}  // namespace

// Phases: check the request → sort the ranks by island → collect the islands → summarise
// them and their crossings into a Graph → choose the algorithm and protocol.
Result<CollectiveEstimate> estimate_collective(const Cluster& cluster, std::span<const GpuId> ranks,
                                               Collective collective, double bytes, Algorithm algorithm,
                                               const CostOptions& options) {
  TOPOSCHED_CHECK(check_request(ranks, collective, bytes, algorithm, options));
  Scratch& s = scratch();
  TOPOSCHED_TRY(g, build_graph(cluster, ranks, options, s));

  CollectiveEstimate est;
  est.collective = collective;
  est.ranks = g.ranks;
  est.islands = g.islands;
  if (g.ranks == 1) {
    est.algorithm = algorithm == Algorithm::kAuto
                        ? (is_direct_collective(collective) ? Algorithm::kDirect : Algorithm::kRing)
                        : algorithm;
    return est;  // nothing crosses a link
  }
  TOPOSCHED_TRY(choice, choose_algorithm(g, min_island_gpus(g, s.islands), collective, bytes, algorithm));
  est.algorithm = choice.candidate.algorithm;
  est.protocol = choice.candidate.protocol;
  est.time_us = choice.time_us;
  if (choice.time_us > 0 && bytes > 0) {
    est.algbw_GBps = bytes / (choice.time_us * 1e3);
    est.busbw_GBps = est.algbw_GBps * bus_factor(collective, g.ranks);
  }
  return est;
}

namespace {
// A graph and what the algorithm choice reads besides it.
struct GraphInfo {
  Graph g;
  int min_local = 0;
};

// Everything choose_algorithm (auto) reads, bit for bit: equal keys give equal times.
using ChoiceKey = std::array<std::uint64_t, 8>;
std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
ChoiceKey choice_key(const GraphInfo& info, Collective c, double bytes) {
  const Graph& g = info.g;
  auto u32 = [](int v) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)); };
  return {u32(g.ranks) | u32(g.islands) << 32,
          u32(g.max_local) | u32(info.min_local) << 32,
          std::uint64_t{g.equal_local} | std::uint64_t{g.intra_nvlink} << 1 | std::uint64_t{g.nvswitch} << 2 |
              static_cast<std::uint64_t>(g.arch) << 8 | static_cast<std::uint64_t>(c) << 16,
          bits_of(g.intra_bw),
          bits_of(g.intra_lat),
          bits_of(g.cross_bw),
          bits_of(g.cross_lat),
          bits_of(bytes)};
}
struct ChoiceKeyHash {
  std::size_t operator()(const ChoiceKey& k) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    for (std::uint64_t v : k) h = (h ^ v) * 0xff51afd7ed558ccdull, h ^= h >> 32;
    return static_cast<std::size_t>(h);
  }
};
}  // namespace

struct GroupCollectiveCosts::State {
  // Graphs of single-node groups by (node type, local GPU set). Few per job (a TP group
  // fills a node or a fixed part of one); past kMaxShapes further shapes are not kept.
  struct Shape {
    NodeTypeId type;
    std::uint64_t mask = 0;
    GraphInfo info;
    std::uint64_t id = 0;  // which graph, for `last`
  };
  static constexpr std::size_t kMaxShapes = 64;
  std::vector<Shape> shapes;
  std::unordered_map<ChoiceKey, double, ChoiceKeyHash> choices;
  // Per node type: its GPU generation (arch_of reads the model name), filled on first use.
  std::vector<std::optional<Arch>> type_arch;
  // The last spread group (one GPU on each of several nodes, no accelerator domain): its
  // nodes and NIC shares in rank order, and its graph. Groups of one kind come in order, and
  // the DP (or PP) groups of one stage use the same nodes, one local GPU index each: the
  // graph is the same when the nodes and the shares are.
  std::vector<NodeId> spread_nodes, next_nodes;
  std::vector<double> spread_egress, next_egress;
  Graph spread_graph;
  bool spread_valid = false;
  std::uint64_t spread_id = 0;  // changes whenever spread_graph does
  std::uint64_t next_id = 1;    // ids of kept graphs; 0 = a graph built for one call only
  // The last answer, for a kept graph: consecutive groups of one kind (the TP groups of whole
  // nodes, the DP groups of one stage) mostly have the same graph, collectives and bytes.
  struct Last {
    std::uint64_t id = 0;
    std::array<Collective, 2> collectives{};
    std::size_t count = 0;
    std::uint64_t bytes = 0;  // bits
    double total = 0;
  } last;

  Arch arch(const Cluster& c, NodeTypeId t) {
    if (type_arch.size() < c.node_type_count()) type_arch.resize(c.node_type_count());
    std::optional<Arch>& a = type_arch[t.index()];
    if (!a) a = nccl::arch_of(c.node_type_at(t).gpu_model);
    return *a;
  }

  const Graph* spread_graph_of(const Cluster& c, const CostOptions& options, std::span<const GpuId> ranks);
};

// The graph build_graph gives for `ranks` when every rank is on its own node and no node is
// in an accelerator domain, without sorting: each island is one rank's GPU, the islands in
// rank order (their first ranks), the crossings between consecutive ranks' nodes. The same
// operations on the same values as collect_islands, summarise_islands and cross_islands
// (an island of one GPU: egress 0 + its NIC share; no hop inside). nullptr when `ranks`
// are not such a group (a GPU invalid, two on one node, a node in a domain).
const Graph* GroupCollectiveCosts::State::spread_graph_of(const Cluster& c, const CostOptions& options,
                                                          std::span<const GpuId> ranks) {
  thread_local std::vector<std::uint32_t> seen;  // per node: the stamp of the last group that used it
  thread_local std::uint32_t stamp = 0;
  if (seen.size() < c.node_count()) seen.resize(c.node_count(), 0);
  if (++stamp == 0) {  // wrapped: no stale stamp may equal a new one
    std::fill(seen.begin(), seen.end(), 0);
    stamp = 1;
  }
  next_nodes.clear();
  next_egress.clear();
  for (GpuId g : ranks) {
    if (!g.valid() || g.index() >= c.gpu_count()) return nullptr;
    const NodeId n = c.gpu_node(g);
    if (seen[n.index()] == stamp || c.node_domain(n).valid()) return nullptr;
    seen[n.index()] = stamp;
    next_nodes.push_back(n);
    next_egress.push_back(c.gpu_network_GBps(g) * nccl::kNetEncodingEfficiency);
  }
  if (spread_valid && next_nodes == spread_nodes &&
      std::equal(next_egress.begin(), next_egress.end(), spread_egress.begin(), spread_egress.end(),
                 [](double a, double b) { return bits_of(a) == bits_of(b); }))
    return &spread_graph;
  std::swap(next_nodes, spread_nodes);
  std::swap(next_egress, spread_egress);
  spread_valid = true;
  spread_id = next_id++;
  Graph g;
  g.ranks = static_cast<int>(ranks.size());
  g.islands = g.ranks;
  g.max_local = 1;
  for (NodeId n : spread_nodes) {
    const NodeTypeId t = c.node_type_id(n);
    g.nvswitch = g.nvswitch && c.node_type_at(t).nvswitch;
    g.arch = std::min(g.arch, std::min(Arch::kBlackwell, arch(c, t)));
  }
  const std::size_t count = spread_nodes.size();
  auto island = [&](std::size_t i) {
    Island isl;
    isl.first_rank = static_cast<std::uint32_t>(i);
    isl.gpus = 1;
    isl.nodes = 1;
    isl.node = spread_nodes[i];
    isl.egress = 0.0 + spread_egress[i];
    return isl;
  };
  for (std::size_t i = 0; i < count; ++i) {
    if (count == 2 && i == 1) break;  // the same pair
    const Island a = island(i), b = island((i + 1) % count);
    const Path p = c.node_path(a.node, b.node);
    g.cross_bw = std::min(g.cross_bw, crossing_bandwidth(c, options, a, b, p));
    g.cross_lat = std::max(g.cross_lat, p.latency_us);
  }
  spread_graph = g;
  return &spread_graph;
}

GroupCollectiveCosts::GroupCollectiveCosts(const Cluster& cluster, const CostOptions& options)
    : cluster_(cluster), options_(options), state_(std::make_unique<State>()) {}
GroupCollectiveCosts::~GroupCollectiveCosts() = default;

Result<double> GroupCollectiveCosts::time_us(std::span<const GpuId> ranks, std::span<const Collective> collectives,
                                             double bytes) {
  for (Collective c : collectives) TOPOSCHED_CHECK(check_request(ranks, c, bytes, Algorithm::kAuto, options_));
  State& st = *state_;
  // One node, no GPU twice, at most 64 GPUs in the node: the graph is the shape's.
  const GraphInfo* info = nullptr;
  NodeTypeId type;
  std::uint64_t mask = 0;
  bool one_node = ranks.size() >= 2;
  NodeId node;
  for (std::size_t i = 0; one_node && i < ranks.size(); ++i) {
    const GpuId g = ranks[i];
    if (!g.valid() || g.index() >= cluster_.gpu_count()) {
      one_node = false;
      break;
    }
    const NodeId n = cluster_.gpu_node(g);
    if (i == 0) {
      node = n;
      type = cluster_.node_type_id(n);
      if (cluster_.node_type_at(type).gpu_count > 64) one_node = false;
    } else if (n != node) {
      one_node = false;
    }
    const std::uint64_t bit = std::uint64_t{1} << cluster_.gpu_local_index(g);
    if (mask & bit) one_node = false;  // given twice: the general path reports it
    mask |= bit;
  }
  std::uint64_t id = 0;  // the kept graph's id, 0 for one built for this call only
  if (one_node)
    for (const State::Shape& shape : st.shapes)
      if (shape.type == type && shape.mask == mask) {
        info = &shape.info;
        id = shape.id;
        break;
      }
  GraphInfo built;
  if (!info && !one_node && ranks.size() >= 2)
    if (const Graph* spread = st.spread_graph_of(cluster_, options_, ranks)) {
      built = {*spread, 1};
      info = &built;
      id = st.spread_id;
    }
  if (!info) {
    Scratch& s = scratch();
    TOPOSCHED_TRY(g, build_graph(cluster_, ranks, options_, s));
    built = {g, min_island_gpus(g, s.islands)};
    info = &built;
    if (one_node && st.shapes.size() < State::kMaxShapes) {
      id = st.next_id++;
      st.shapes.push_back({type, mask, built, id});
    }
  }
  if (info->g.ranks == 1) return 0.0;  // estimate_collective's time for one rank
  State::Last& last = st.last;
  const bool memo = id != 0 && collectives.size() <= last.collectives.size();
  if (memo && last.id == id && last.count == collectives.size() && last.bytes == bits_of(bytes) &&
      std::equal(collectives.begin(), collectives.end(), last.collectives.begin()))
    return last.total;
  double total = 0;
  for (Collective c : collectives) {
    const ChoiceKey key = choice_key(*info, c, bytes);
    auto it = st.choices.find(key);
    if (it == st.choices.end()) {
      TOPOSCHED_TRY(choice, choose_algorithm(info->g, info->min_local, c, bytes, Algorithm::kAuto));
      it = st.choices.emplace(key, choice.time_us).first;
    }
    total += it->second;
  }
  if (memo) {
    last.id = id;
    last.count = collectives.size();
    std::copy(collectives.begin(), collectives.end(), last.collectives.begin());
    last.bytes = bits_of(bytes);
    last.total = total;
  }
  return total;
}

nlohmann::ordered_json estimate_to_json(const CollectiveEstimate& e, double bytes) {
  nlohmann::ordered_json j;
  j["algorithm"] = algorithm_name(e.algorithm);
  j["time_us"] = e.time_us;
  j["algbw_GBps"] = e.algbw_GBps;
  j["busbw_GBps"] = e.busbw_GBps;
  j["protocol"] = protocol_name(e.protocol);
  j["collective"] = collective_name(e.collective);
  j["bytes"] = bytes;
  j["ranks"] = e.ranks;
  j["islands"] = e.islands;
  return j;
}

}  // namespace toposched
