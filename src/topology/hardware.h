// Published hardware constants the model uses when an input does not say otherwise:
// NVLink per-link speed by GPU generation, PCIe lane rates, default latencies per path
// class, and the bandwidth factor of each PCIe path class. Sources: docs/cluster-spec.md.
// Constant data and pure functions; thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace toposched {

// What the model knows about a GPU product: ONE table (gpu_datasheet_table) that the cost model
// (compute speed), the router (inference roofline), the simulator's power model and the
// cluster formats (memory, NVLink, PCIe) all read, so one model name gives the same FLOP/s,
// memory and power everywhere. Found by a case-insensitive match of the product name as
// nvidia-smi or GPU Feature Discovery report it ("NVIDIA H100 80GB HBM3"); each figure's
// source is in the row (and docs/cost-model.md "Compute").
struct GpuDatasheet {
  std::string_view key;        // matched against gpu_model_key(name): a substring of it
  std::string_view variant;    // and, when not empty, this too ("40GB")
  std::string_view product;    // canonical name, e.g. "H100-SXM5"
  double bf16_dense_flops;     // dense (no sparsity) BF16/FP16 tensor FLOP/s
  double fp8_dense_flops;      // dense FP8 tensor FLOP/s; 0 = no FP8 (runs at the BF16 rate)
  // Maximum achievable matmul FLOP/s over the datasheet peak (the best GEMM shape, measured):
  // what a large GEMM can reach, before the shape's own losses (cost/compute.h).
  double gemm_efficiency;
  int sm_count;                // streaming multiprocessors (wave quantization of GEMM tiles)
  double memory_gb;            // HBM capacity
  double hbm_Bps;              // HBM bandwidth, bytes/s
  int nvlinks_per_gpu;         // links on the SXM part; 0 = none
  double nvlink_GBps_per_link; // per direction; 0 = no NVLink
  int pcie_gen;                // host interface generation
  double tdp_w;                // board power limit
  double idle_w;               // driver loaded, no work
  std::string_view source;     // where the figures come from
};

// Order matters: more specific rows first (the first match wins).
std::span<const GpuDatasheet> gpu_datasheet_table();
// nullptr when the name matches no row. A row with a variant ("40GB") matches when the name
// says it, or when `memory_gb` (> 0, a node type's) is the row's: discovery names both A100
// SXM4 boards "A100-SXM4" and tells them apart by memory.
const GpuDatasheet* find_gpu_datasheet(std::string_view name, double memory_gb = 0);
// The row for `name`, or the A100 SXM4 80GB row (the models' fallback for an unknown GPU).
const GpuDatasheet& gpu_datasheet_or_default(std::string_view name, double memory_gb = 0);
// The row of a node type's GPUs (its model name and memory).
struct NodeType;
const GpuDatasheet& gpu_datasheet_of(const NodeType& type);

// The cluster formats' view of a GpuDatasheet row.
struct GpuProduct {
  std::string_view canonical;      // e.g. "H100-SXM5"
  double memory_gb;                // HBM capacity
  double nvlink_GBps_per_link;     // per direction; 0 = no NVLink
  int nvlinks_per_gpu;             // links on the SXM part; 0 = none
  int pcie_gen;                    // host interface generation
};

// nullopt when the name matches no known product (from find_gpu_datasheet).
std::optional<GpuProduct> find_gpu_product(std::string_view name);

// A GPU model name as a lookup key: upper case, without spaces, '-' and '_' ("h100-sxm5"
// and "H100 SXM5" both give "H100SXM5"), for the tables keyed by product.
std::string gpu_model_key(std::string_view name);

// Per-direction bandwidth of a PCIe link in GB/s (line rate after encoding).
double pcie_GBps(int generation, int lanes);

// Latency (µs) of one GPU-to-GPU message over each intra-node path class, and the fraction
// of the GPU's PCIe bandwidth each PCIe class sustains for peer-to-peer traffic.
inline constexpr double kNvlinkLatencyUs = 0.8;
inline constexpr double kPcieLatencyUs[5] = {1.0, 1.2, 1.6, 2.0, 2.6};  // PIX PXB PHB NODE SYS
inline constexpr double kPcieBandwidthFactor[5] = {1.0, 1.0, 0.9, 0.8, 0.6};
// Latency added by the two NICs (and their PCIe hops) on any inter-node path.
inline constexpr double kNicLatencyUs = 2.0;
// Defaults for a fabric tier and an accelerator (multi-node NVLink) domain.
inline constexpr double kDefaultHopLatencyUs = 0.5;
inline constexpr double kDefaultDomainLatencyUs = 1.5;

}  // namespace toposched
