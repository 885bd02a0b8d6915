#include "topology/hardware.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "topology/cluster.h"

namespace toposched {
namespace {

// Datasheet figures (dense, no sparsity) per product; the MAMF fractions are measured
// maximum achievable matmul FLOP/s (S. Bekman, "Machine Learning Engineering",
// compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table": A100
// SXM 271.2 of 312 TFLOP/s = 0.869, A100 PCIe 0.811, H100 SXM 794.5 of 989 = 0.803, GH200
// 828.6 of 989 = 0.838 (used for H200, same die and HBM3e), B200 1745 of 2250 = 0.776, B300
// 1769 = 0.786, GB200 1822 of 2500 = 0.729); a product without a measurement takes its
// generation's. FP8 GEMMs reach a lower share there (H100 1402.6 of 1979 = 0.709, H200
// 0.734, B200 0.763, GB200 0.723): cost/compute.h scales by kFp8GemmShare. NVLink: NVIDIA product briefs
// (NVLink 2/3/4: 25 GB/s per link per direction; NVLink 5: 50 GB/s); link counts are the
// SXM modules'. Power: the board limit (TDP) from the data sheet; idle as measured
// (nvidia-smi, docs/simulator.md) or estimated at 10-14% of TDP.
// Order matters: more specific rows first ("H100NVL" before "H100", "GB200" before "B200",
// "A100" 40GB before "A100").
constexpr std::array<GpuDatasheet, 19> kDatasheets = {{
    {"GB300", "", "GB300", 2500e12, 5000e12, 0.729, 160, 288, 8.0e12, 18, 50, 6, 1400, 168,
     "NVIDIA GB300 NVL72 data sheet (per GPU: 2.5 PF dense BF16, 5 PF dense FP8, 288 GB, 8 TB/s); MAMF as GB200"},
    {"GB200", "", "GB200", 2500e12, 5000e12, 0.729, 148, 186, 8.0e12, 18, 50, 6, 1200, 144,
     "NVIDIA GB200 NVL72 data sheet (per GPU: 2.5 PF dense BF16, 5 PF dense FP8, 186 GB, 8 TB/s, 1200 W); MAMF 1822 TF"},
    {"B300", "", "B300", 2250e12, 4500e12, 0.786, 160, 288, 8.0e12, 18, 50, 6, 1100, 132,
     "NVIDIA HGX B300 data sheet (per GPU: 2.25 PF dense BF16, 4.5 PF dense FP8, 288 GB, 8 TB/s); MAMF 1769 TF"},
    {"B200", "", "B200", 2250e12, 4500e12, 0.776, 148, 180, 8.0e12, 18, 50, 6, 1000, 120,
     "NVIDIA HGX B200 data sheet (per GPU: 2.25 PF dense BF16, 4.5 PF dense FP8, 180 GB, 8 TB/s, 1000 W); MAMF 1745 TF"},
    {"H200", "", "H200", 989e12, 1979e12, 0.838, 132, 141, 4.8e12, 18, 25, 5, 700, 80,
     "NVIDIA H200 SXM data sheet (989 TF dense BF16, 1979 TF dense FP8, 141 GB, 4.8 TB/s, 700 W); idle 80 W measured"},
    {"H100NVL", "", "H100-NVL", 835e12, 1671e12, 0.803, 132, 94, 3.9e12, 6, 25, 5, 400, 55,
     "NVIDIA H100 NVL data sheet (835 TF dense BF16, 1671 TF dense FP8, 94 GB, 3.9 TB/s, 400 W)"},
    {"H100PCIE", "", "H100-PCIe", 756e12, 1513e12, 0.803, 114, 80, 2.0e12, 0, 25, 5, 350, 50,
     "NVIDIA H100 PCIe data sheet (756 TF dense BF16, 1513 TF dense FP8, 80 GB, 2.0 TB/s, 350 W)"},
    {"H100", "", "H100-SXM5", 989e12, 1979e12, 0.803, 132, 80, 3.35e12, 18, 25, 5, 700, 70,
     "NVIDIA H100 SXM data sheet (989 TF dense BF16, 1979 TF dense FP8, 80 GB, 3.35 TB/s, 700 W); MAMF 794.5 TF"},
    {"H800", "", "H800-SXM5", 989e12, 1979e12, 0.803, 132, 80, 3.35e12, 8, 25, 5, 700, 70,
     "as H100 SXM (same board), 8 NVLinks"},
    {"H20", "", "H20", 148e12, 296e12, 0.803, 78, 96, 4.0e12, 18, 25, 5, 400, 50,
     "NVIDIA H20 (148 TF dense BF16, 296 TF dense FP8, 96 GB, 4.0 TB/s, 400 W)"},
    {"A100PCIE", "", "A100-PCIe", 312e12, 0, 0.811, 108, 80, 1.935e12, 0, 25, 4, 300, 45,
     "NVIDIA A100 PCIe data sheet (312 TF dense BF16, 80 GB, 1.94 TB/s, 300 W); MAMF 0.811"},
    {"A100", "40GB", "A100-SXM4", 312e12, 0, 0.869, 108, 40, 1.555e12, 12, 25, 4, 400, 55,
     "NVIDIA A100 data sheet (312 TF dense BF16, 40 GB HBM2, 1.555 TB/s, 400 W); MAMF 271.2 TF"},
    {"A100", "", "A100-SXM4", 312e12, 0, 0.869, 108, 80, 2.039e12, 12, 25, 4, 400, 55,
     "NVIDIA A100 80GB data sheet (312 TF dense BF16, 80 GB HBM2e, 2.039 TB/s, 400 W); MAMF 271.2 TF"},
    {"A800", "", "A800-SXM4", 312e12, 0, 0.869, 108, 80, 2.039e12, 8, 25, 4, 400, 55,
     "as A100 SXM4 80GB (same board), 8 NVLinks"},
    {"V100", "", "V100-SXM2", 125e12, 0, 0.80, 80, 32, 0.9e12, 6, 25, 3, 300, 40,
     "NVIDIA V100 SXM2 data sheet (125 TF FP16 tensor, 32 GB, 900 GB/s, 300 W)"},
    {"L40S", "", "L40S", 362e12, 733e12, 0.80, 142, 48, 0.864e12, 0, 0, 4, 350, 35,
     "NVIDIA L40S data sheet (362 TF dense BF16, 733 TF dense FP8, 48 GB, 864 GB/s, 350 W)"},
    {"L40", "", "L40", 181e12, 362e12, 0.80, 142, 48, 0.864e12, 0, 0, 4, 300, 35,
     "NVIDIA L40 data sheet (181 TF dense BF16, 362 TF dense FP8, 48 GB, 864 GB/s, 300 W)"},
    {"T4", "", "T4", 65e12, 0, 0.80, 40, 16, 0.32e12, 0, 0, 3, 70, 10,
     "NVIDIA T4 data sheet (65 TF FP16 tensor, 16 GB, 320 GB/s, 70 W)"},
    {"P100", "", "P100", 21e12, 0, 0.80, 56, 16, 0.732e12, 0, 0, 3, 250, 30,
     "NVIDIA P100 data sheet (21 TF FP16, no tensor cores, 16 GB, 732 GB/s; PCIe part: no NVLink, 250 W)"},
}};

}  // namespace

std::span<const GpuDatasheet> gpu_datasheet_table() { return kDatasheets; }

const GpuDatasheet* find_gpu_datasheet(std::string_view name, double memory_gb) {
  const std::string key = gpu_model_key(name);
  for (const GpuDatasheet& s : kDatasheets) {
    if (key.find(s.key) == std::string::npos) continue;
    if (s.variant.empty() || key.find(s.variant) != std::string::npos || (memory_gb > 0 && memory_gb == s.memory_gb)) return &s;
  }
  return nullptr;
}

const GpuDatasheet& gpu_datasheet_or_default(std::string_view name, double memory_gb) {
  if (const GpuDatasheet* s = find_gpu_datasheet(name, memory_gb)) return *s;
  return *find_gpu_datasheet("A100-SXM4");
}

const GpuDatasheet& gpu_datasheet_of(const NodeType& type) {
  return gpu_datasheet_or_default(type.gpu_model, type.gpu_memory_gb);
}

std::optional<GpuProduct> find_gpu_product(std::string_view name) {
  const GpuDatasheet* s = find_gpu_datasheet(name);
  if (!s) return std::nullopt;
  return GpuProduct{s->product, s->memory_gb, s->nvlink_GBps_per_link, s->nvlinks_per_gpu, s->pcie_gen};
}

std::string gpu_model_key(std::string_view name) {
  std::string key;
  for (char c : name)
    if (c != ' ' && c != '-' && c != '_') key += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return key;
}

double pcie_GBps(int generation, int lanes) {
  // GT/s per lane and encoding efficiency by generation (PCI-SIG specifications).
  double per_lane = 0;
  switch (generation) {
    case 1: per_lane = 2.5 * 0.8 / 8; break;
    case 2: per_lane = 5.0 * 0.8 / 8; break;
    case 3: per_lane = 8.0 * 128 / 130 / 8; break;
    case 4: per_lane = 16.0 * 128 / 130 / 8; break;
    case 5: per_lane = 32.0 * 128 / 130 / 8; break;
    case 6: per_lane = 64.0 * 242 / 256 / 8; break;
    default: return 0;
  }
  return per_lane * std::max(lanes, 0);
}

}  // namespace toposched
