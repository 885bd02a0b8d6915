// Published hardware constants the model uses when an input does not say otherwise:
// NVLink per-link speed by GPU generation, PCIe lane rates, default latencies per path
// class, and the bandwidth factor of each PCIe path class. Sources: docs/cluster-spec.md.
// Constant data and pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace toposched {

// What the model knows about a GPU product, found by a case-insensitive match of the
// product name as nvidia-smi or GPU Feature Discovery report it ("NVIDIA H100 80GB HBM3").
struct GpuProduct {
  std::string_view canonical;      // e.g. "H100-SXM5"
  double memory_gb;                // HBM capacity
  double nvlink_GBps_per_link;     // per direction; 0 = no NVLink
  int nvlinks_per_gpu;             // links on the SXM part; 0 = none
  int pcie_gen;                    // host interface generation
};

// nullopt when the name matches no known product.
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
