// Every published NCCL measurement in tests/data/nccl_busbw.csv must be reproduced within
// the row's tolerance by the general model (no per-row table). Also prints the predicted vs
// published table that docs/cost-model.md shows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "cost/anchor_rows.h"

namespace toposched {
namespace {

using testing::predict_anchor;
using testing::read_anchor_rows;

TEST(Anchors, FileHasRows) {
  auto rows = read_anchor_rows(TOPOSCHED_TEST_DATA "/nccl_busbw.csv");
  ASSERT_GE(rows.size(), 6u);
}

TEST(Anchors, EveryRowWithinTolerance) {
  auto rows = read_anchor_rows(TOPOSCHED_TEST_DATA "/nccl_busbw.csv");
  ASSERT_FALSE(rows.empty());
  std::printf("| id | published | predicted | error | algorithm/protocol |\n|---|---|---|---|---|\n");
  for (const auto& r : rows) {
    auto p = predict_anchor(r);
    ASSERT_TRUE(p.has_value()) << r.id << ": " << p.error().message;
    double err = (p->predicted - r.value) / r.value;
    std::printf("| %s | %.1f %s | %.1f %s | %+.1f%% | %s/%s |\n", r.id.c_str(), r.value, r.unit.c_str(), p->predicted,
                r.unit.c_str(), 100 * err, std::string(algorithm_name(p->estimate.algorithm)).c_str(),
                std::string(protocol_name(p->estimate.protocol)).c_str());
    EXPECT_LE(std::abs(err), r.tolerance) << r.id << ": predicted " << p->predicted << " " << r.unit << ", published "
                                          << r.value << " (" << r.source << ")";
  }
}

// The rows together: no systematic bias hides inside the per-row tolerance.
TEST(Anchors, MedianAbsoluteErrorAtMostFivePercent) {
  auto rows = read_anchor_rows(TOPOSCHED_TEST_DATA "/nccl_busbw.csv");
  ASSERT_FALSE(rows.empty());
  std::vector<double> errors;
  for (const auto& r : rows) {
    auto p = predict_anchor(r);
    ASSERT_TRUE(p.has_value()) << r.id << ": " << p.error().message;
    errors.push_back(std::abs(p->predicted - r.value) / r.value);
  }
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  const double median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  EXPECT_LE(median, 0.05) << "median absolute error over " << n << " rows";
}

}  // namespace
}  // namespace toposched
