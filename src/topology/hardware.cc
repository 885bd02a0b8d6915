#include "topology/hardware.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace toposched {
namespace {

struct Pattern {
  std::string_view needle;  // matched against the upper-cased, space-stripped name
  GpuProduct product;
};

// Order matters: more specific names first ("H100 NVL" before "H100", "GB200" before "B200").
// NVLink figures: NVIDIA product briefs (NVLink 2/3/4: 25 GB/s per link per direction;
// NVLink 5: 50 GB/s). Link counts are those of the SXM modules.
constexpr std::array<Pattern, 16> kProducts = {{
    {"GB300", {"GB300", 288, 50, 18, 6}},
    {"GB200", {"GB200", 186, 50, 18, 6}},
    {"B300", {"B300", 288, 50, 18, 6}},
    {"B200", {"B200", 180, 50, 18, 6}},
    {"H200", {"H200", 141, 25, 18, 5}},
    {"H100NVL", {"H100-NVL", 94, 25, 6, 5}},
    {"H100PCIE", {"H100-PCIe", 80, 25, 0, 5}},
    {"H100", {"H100-SXM5", 80, 25, 18, 5}},
    {"H800", {"H800-SXM5", 80, 25, 8, 5}},
    {"H20", {"H20", 96, 25, 18, 5}},
    {"A100-PCIE", {"A100-PCIe", 80, 25, 0, 4}},
    {"A100", {"A100-SXM4", 80, 25, 12, 4}},
    {"A800", {"A800-SXM4", 80, 25, 8, 4}},
    {"V100", {"V100-SXM2", 32, 25, 6, 3}},
    {"L40S", {"L40S", 48, 0, 0, 4}},
    {"L40", {"L40", 48, 0, 0, 4}},
}};

}  // namespace

std::optional<GpuProduct> find_gpu_product(std::string_view name) {
  std::string key;
  for (char c : name)
    if (!std::isspace(static_cast<unsigned char>(c)))
      key += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& p : kProducts)
    if (key.find(p.needle) != std::string::npos) return p.product;
  return std::nullopt;
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
