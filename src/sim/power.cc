#include "sim/power.h"

#include <string>

#include "topology/hardware.h"

namespace toposched::sim {

namespace {

// Communication-bound draw: idle plus a quarter of the dynamic range (TDP - idle). An
// estimate, not a measurement: docs/simulator.md gives the reasoning and its bounds.
constexpr GpuPower figures(double tdp_w, double idle_w) { return {tdp_w, idle_w + 0.25 * (tdp_w - idle_w), idle_w}; }


}  // namespace

// One row per row of the hardware table (topology/hardware.h's gpu_datasheet_table: the board's
// TDP and idle draw, with their sources), in its order.
const std::vector<GpuPowerRow>& gpu_power_table() {
  static const std::vector<GpuPowerRow> rows = [] {
    std::vector<GpuPowerRow> out;
    for (const GpuDatasheet& g : gpu_datasheet_table()) out.push_back({g.key, g.product, figures(g.tdp_w, g.idle_w), g.source});
    return out;
  }();
  return rows;
}

GpuPower default_gpu_power(std::string_view gpu_model) {
  const GpuDatasheet& g = gpu_datasheet_or_default(gpu_model);  // an unknown model: the A100 SXM4's
  return figures(g.tdp_w, g.idle_w);
}

GpuPower gpu_power(const NodeType& type) {
  GpuPower p = default_gpu_power(type.gpu_model);
  if (type.power.busy_w > 0) p.busy_w = type.power.busy_w;
  if (type.power.comm_w > 0) p.comm_w = type.power.comm_w;
  if (type.power.idle_w > 0) p.idle_w = type.power.idle_w;
  return p;
}

}  // namespace toposched::sim
