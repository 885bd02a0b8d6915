#include "cost/compute.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace toposched {

namespace {
struct ComputeRow {
  std::string_view needle;  // lower-case substring of the model name; first match wins
  GpuCompute compute;
};
// Datasheets: NVIDIA B200 / H200 / H100 SXM / A100 / L40 / V100 / T4 / P100 (dense tensor
// FP16/BF16, HBM or GDDR bandwidth).
constexpr std::array<ComputeRow, 10> kRows = {{
    {"gb200", {2250e12, 8.0e12}},
    {"b200", {2250e12, 8.0e12}},
    {"h200", {989e12, 4.8e12}},
    {"h100", {989e12, 3.35e12}},
    {"h800", {989e12, 3.35e12}},
    {"a100", {312e12, 2.0e12}},
    {"a800", {312e12, 2.0e12}},
    {"l40", {362e12, 0.86e12}},
    {"v100", {125e12, 0.9e12}},
    {"t4", {65e12, 0.32e12}},
}};
constexpr GpuCompute kP100 = {21e12, 0.73e12};
constexpr GpuCompute kDefault = {312e12, 2.0e12};
}  // namespace

GpuCompute gpu_compute(std::string_view gpu_model) {
  std::string m(gpu_model);
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const ComputeRow& row : kRows)
    if (m.find(row.needle) != std::string::npos) return row.compute;
  if (m.find("p100") != std::string::npos) return kP100;
  return kDefault;
}

double compute_us_per_step(const WorkloadModel& m, std::string_view workload_class, int tp, int pp,
                           std::string_view gpu_model) {
  const GpuCompute speed = gpu_compute(gpu_model);
  const double achieved = kTrainingMfu * speed.peak_flops;
  const double mp = static_cast<double>(std::max(tp, 1) * std::max(pp, 1));
  if (workload_class == "dp-vision") return 3.0 * 4.1e9 * 256 / achieved * 1e6;
  if (!m.training) return m.parameters * m.bytes_per_element / mp / speed.hbm_Bps * 1e6;
  double active = m.parameters;
  if (m.experts > 0)
    active = m.parameters * (1 - m.expert_parameter_fraction) +
             m.parameters * m.expert_parameter_fraction * m.top_k / m.experts;
  const double tokens = static_cast<double>(m.sequence) * m.micro_batch * m.micro_batches;
  return 6.0 * active * tokens / mp / achieved * 1e6;
}

}  // namespace toposched
