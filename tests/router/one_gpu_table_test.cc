// Issue 29, acceptance 4: one GPU table. The same GPU model name, however a tool spells it,
// gives the same dense FLOP/s, HBM bandwidth, memory and board power in the cost model
// (gpu_compute), the router's inference model (find_gpu_spec), the simulator's power model
// (default_gpu_power) and the cluster formats (find_gpu_product). Two datasheets once
// disagreed (GB200 dense BF16: 2.25 PF in the cost model, 2.5 PF in the router); a second
// table anywhere breaks this test.
#include <gtest/gtest.h>

#include <string>

#include "cost/compute.h"
#include "router/model.h"
#include "sim/power.h"
#include "topology/hardware.h"

namespace toposched {
namespace {

// The spellings nvidia-smi, GPU Feature Discovery and our specs use for the products the
// router serves.
constexpr const char* kServedSpellings[] = {
    "H100-SXM5", "NVIDIA H100 80GB HBM3", "h100_sxm5", "NVIDIA H200", "H200",
    "NVIDIA B200",  "B200",                  "NVIDIA GB200", "GB200",
};

TEST(OneGpuTable, EveryModelAgreesOnTheServedProducts) {
  for (const char* name : kServedSpellings) {
    SCOPED_TRACE(name);
    auto spec = router::find_gpu_spec(name);
    ASSERT_TRUE(spec) << spec.error().to_string();
    const GpuCompute compute = gpu_compute(name);
    const sim::GpuPower power = sim::default_gpu_power(name);
    auto product = find_gpu_product(name);
    ASSERT_TRUE(product);
    EXPECT_DOUBLE_EQ(spec->bf16_dense_tflops * 1e12, compute.peak_flops);
    EXPECT_DOUBLE_EQ(spec->hbm_TBps * 1e12, compute.hbm_Bps);
    EXPECT_DOUBLE_EQ(spec->memory_gb, product->memory_gb);
    EXPECT_DOUBLE_EQ(spec->board_power_w, power.busy_w);
    EXPECT_EQ(spec->name, product->canonical);
  }
}

TEST(OneGpuTable, CostPowerAndFormatsReadEveryRowTheSame) {
  for (const GpuDatasheet& row : gpu_datasheet_table()) {
    // The row's own product name, plus its variant where it has one ("A100-SXM4 40GB").
    const std::string name = std::string(row.product) + (row.variant.empty() ? "" : " " + std::string(row.variant));
    SCOPED_TRACE(name);
    ASSERT_EQ(find_gpu_datasheet(name), &row) << "the row's own name finds another row first";
    const GpuCompute compute = gpu_compute(name);
    EXPECT_DOUBLE_EQ(compute.peak_flops, row.bf16_dense_flops);
    EXPECT_DOUBLE_EQ(compute.hbm_Bps, row.hbm_Bps);
    const sim::GpuPower power = sim::default_gpu_power(name);
    EXPECT_DOUBLE_EQ(power.busy_w, row.tdp_w);
    EXPECT_DOUBLE_EQ(power.idle_w, row.idle_w);
    auto product = find_gpu_product(name);
    ASSERT_TRUE(product);
    EXPECT_DOUBLE_EQ(product->memory_gb, row.memory_gb);
    EXPECT_EQ(product->nvlinks_per_gpu, row.nvlinks_per_gpu);
  }
}

TEST(OneGpuTable, AnUnknownGpuFallsBackToOneRowInCostAndPowerAndIsRefusedByTheRouter) {
  const GpuDatasheet& fallback = gpu_datasheet_or_default("Quantum Accelerator 9000");
  EXPECT_DOUBLE_EQ(gpu_compute("Quantum Accelerator 9000").peak_flops, fallback.bf16_dense_flops);
  EXPECT_DOUBLE_EQ(sim::default_gpu_power("Quantum Accelerator 9000").busy_w, fallback.tdp_w);
  auto spec = router::find_gpu_spec("Quantum Accelerator 9000");
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.error().message.find("H100-SXM5"), std::string::npos) << spec.error().message;
}

}  // namespace
}  // namespace toposched
