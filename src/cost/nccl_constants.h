// Published constants of the cost model: NCCL's per-protocol latencies and bandwidth
// efficiencies (NVIDIA/nccl src/graph/tuning.cc, NCCL 2.2x), NCCL's usable NVLink
// bandwidth per link by GPU generation (src/graph/topo.h), and the InfiniBand/Ethernet line
// encoding. Every value is cited in docs/cost-model.md. Constant data; thread-safe.
#pragma once

#include <string_view>

namespace toposched::nccl {

// GPU generations NCCL distinguishes in its tables.
enum class Arch : int { kVolta = 0, kAmpere = 1, kHopper = 2, kBlackwell = 3 };

// From the canonical model name of hardware.h ("A100-SXM4", "H100-SXM5", "GB200", ...);
// unknown models count as Ampere (the middle of the tables).
Arch arch_of(std::string_view gpu_model);

// Indices: [algorithm][protocol], algorithm 0 = tree, 1 = ring, 2 = NVLS;
// protocol 0 = LL, 1 = LL128, 2 = Simple.
// Base latency of launching one collective, µs (tuning.cc baseLat).
inline constexpr double kBaseLatencyUs[3][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}};
// Per-step latency of each protocol by hardware: [hw][algorithm][protocol], hw 0 = NVLink,
// 1 = PCIe, 2 = network (tuning.cc hwLat).
inline constexpr double kHopLatencyUs[3][3][3] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25.0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}},
    {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}, {0, 0, 18.0}},
};
// tuning.cc: intra-node LL latency is 1.8x when the collective also crosses the network.
inline constexpr double kLLIntraLatencyFactorMultiNode = 1.8;
// Per-step latency the LL protocol pays on an NVSwitch baseboard beyond NCCL's hwLat and
// the NVLink hop (µs), by generation: a least-squares fit to published nccl-tests
// small-message allreduce times (docs/cost-model.md "Small messages"): on DGX A100, 8 B
// over 8 GPUs takes 33.7 µs and over 2 GPUs 10.0-10.1 µs (NVIDIA/nccl-tests issue 123,
// NVIDIA/nccl issue 583), 1.93 µs per ring step where NCCL's table and the hop give 1.4.
// No published figure was used for the other generations: 0 there.
double ll_nvswitch_step_extra_us(Arch arch);
// tuning.cc: a network proxy posts each step; Simple needs 3 posts (µs per post, x86).
inline constexpr double kNetOverheadUs = 1.0;

// Bandwidth efficiency of each protocol relative to Simple (tuning.cc): LL carries 4 data
// bytes per 8-byte line, LL128 120 of 128 bytes (NCCL models 0.92), Simple is the reference.
inline constexpr double kRingLLFactor = 0.5;
inline constexpr double kRingLL128Factor = 0.92;
// Tree allreduce (tuning.cc): 0.92 of the graph bandwidth, LL 1/3.8, LL128 7/9 inside one
// node and 120/128 across nodes; algbw = busbw/2 of the graph.
inline constexpr double kTreeFactor = 0.92;
inline constexpr double kTreeLLFactor = 1.0 / 3.8;
inline constexpr double kTreeLL128FactorSingleNode = 7.0 / 9.0;
inline constexpr double kTreeLL128FactorMultiNode = 120.0 / 128.0;
inline constexpr double kTreeAlgbwRatio = 0.5;
// NVLS allreduce: the share of NVLink bandwidth NVLink SHARP sustains (tuning.cc
// nvlsEfficiency: Hopper 0.85, Blackwell 0.74; 0 where there is no NVLS). With k GPUs on
// the switch, each GPU's link carries (k + 1)/k of the message each way (its whole buffer
// read by the switch's multimem reduction plus its reduced 1/k share written back, then the
// multicast of every share), so algbw = link bandwidth x efficiency x k / (k + 1).
double nvls_efficiency(Arch arch);
// Maximum LL bandwidth (GB/s) by [arch][node-count index] (1 node, 2 nodes, more);
// tuning.cc llMaxBws. Multi-node columns are those of Intel hosts (tuning.cc keys them by
// CPU vendor, which the topology does not record). NCCL has no Blackwell row in the
// version we read: Hopper's is used.
inline constexpr double kLLMaxBwGBps[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 39.0, 20.4}, {141.0, 39.0, 20.4}, {141.0, 39.0, 20.4}};

// Usable NVLink bandwidth per link and direction as NCCL's topology search counts it
// (topo.h SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1, Volta 20.0),
// as a fraction of the nominal per-link rate of hardware.h (25 GB/s; 50 for NVLink 5).
double nvlink_efficiency(Arch arch);

// InfiniBand HDR/NDR and 100G+ Ethernet use 64b/66b encoding: payload rate = line rate x
// 64/66 (IBTA specification vol. 2; IEEE 802.3 clause 82).
inline constexpr double kNetEncodingEfficiency = 64.0 / 66.0;

}  // namespace toposched::nccl
