#include "sim/power.h"

#include <string>

#include "topology/hardware.h"

namespace toposched::sim {

namespace {

// Communication-bound draw: idle plus a quarter of the dynamic range (TDP - idle). An
// estimate, not a measurement: docs/simulator.md gives the reasoning and its bounds.
constexpr GpuPower figures(double tdp_w, double idle_w) { return {tdp_w, idle_w + 0.25 * (tdp_w - idle_w), idle_w}; }


}  // namespace

// Order matters: more specific keys first ("GB200" before "B200", "H100PCIE" before "H100").
const std::vector<GpuPowerRow>& gpu_power_table() {
  static const std::vector<GpuPowerRow> rows = {
      {"GB200", "GB200", figures(1200, 144), "GB200 NVL72 data sheet: 1200 W per GPU; idle 12% of TDP (estimate)"},
      {"B200", "B200", figures(1000, 120), "HGX B200 data sheet: 1000 W; idle 12% of TDP (estimate)"},
      {"H200", "H200", figures(700, 80), "H200 SXM data sheet: 700 W; idle 80 W measured (nvidia-smi, docs/simulator.md)"},
      {"H100PCIE", "H100-PCIe", figures(350, 50), "H100 PCIe data sheet: 350 W; idle 50 W (estimate from the SXM part)"},
      {"H100NVL", "H100-NVL", figures(400, 55), "H100 NVL data sheet: 400 W; idle 55 W (estimate from the SXM part)"},
      {"H100", "H100-SXM5", figures(700, 70), "H100 SXM data sheet: 700 W; idle 70 W (estimate: 10% of TDP, as the measured H200)"},
      {"H800", "H800-SXM5", figures(700, 70), "as H100 SXM (same board)"},
      {"A100PCIE", "A100-PCIe", figures(300, 45), "A100 PCIe data sheet: 300 W; idle 45 W (estimate from the SXM part)"},
      {"A100", "A100-SXM4", figures(400, 55), "A100 SXM4 data sheet: 400 W; idle 55 W (estimate)"},
      {"A800", "A800-SXM4", figures(400, 55), "as A100 SXM4 (same board)"},
      {"L40S", "L40S", figures(350, 35), "L40S data sheet: 350 W; idle 35 W (estimate)"},
      {"L40", "L40", figures(300, 35), "L40 data sheet: 300 W; idle as L40S"},
      {"V100", "V100-SXM2", figures(300, 40), "V100 SXM2 data sheet: 300 W; idle 40 W (estimate)"},
  };
  return rows;
}

GpuPower default_gpu_power(std::string_view gpu_model) {
  const std::string key = gpu_model_key(gpu_model);
  for (const GpuPowerRow& r : gpu_power_table())
    if (key.find(r.key) != std::string::npos) return r.power;
  return figures(400, 55);  // the A100 SXM4
}

GpuPower gpu_power(const NodeType& type) {
  GpuPower p = default_gpu_power(type.gpu_model);
  if (type.power.busy_w > 0) p.busy_w = type.power.busy_w;
  if (type.power.comm_w > 0) p.comm_w = type.power.comm_w;
  if (type.power.idle_w > 0) p.idle_w = type.power.idle_w;
  return p;
}

}  // namespace toposched::sim
