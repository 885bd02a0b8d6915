// The LLM-era workload generator: determinism, the shape of what it draws, and its YAML.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "sim/generator.h"
#include "sim/traces/native_csv.h"

namespace toposched::sim {
namespace {

TEST(Generator, SameSeedSameTraceDifferentSeedDifferentTrace) {
  GeneratorParams p;
  p.jobs = 300;
  std::string a = write_native_csv(generate_trace(p));
  std::string b = write_native_csv(generate_trace(p));
  EXPECT_EQ(a, b);
  p.seed = 2;
  EXPECT_NE(write_native_csv(generate_trace(p)), a);
}

TEST(Generator, SizesPlansAndClasses) {
  GeneratorParams p;
  p.jobs = 4000;
  p.max_gpus = 2048;
  Trace t = generate_trace(p);
  ASSERT_EQ(t.jobs.size(), 4000u);
  std::map<std::string, int> kinds;
  int large = 0, one = 0;
  for (const SimJob& j : t.jobs) {
    EXPECT_TRUE(std::has_single_bit(static_cast<unsigned>(j.gpus))) << j.gpus;
    EXPECT_LE(j.gpus, 2048);
    EXPECT_EQ(j.tp * j.pp * j.dp, j.gpus) << j.id;
    EXPECT_GE(j.duration_s, p.duration_min_s);
    EXPECT_LE(j.duration_s, p.duration_max_s);
    EXPECT_GE(j.estimate_s, j.duration_s);
    EXPECT_LE(j.estimate_s, j.duration_s * p.estimate_max_factor + 1e-3);
    ++kinds[j.kind];
    if (j.kind == "llm-dense" && j.gpus >= 8) {
      EXPECT_EQ(j.tp, 8);
    }
    if (j.kind == "llm-moe") {
      EXPECT_GE(j.ep, 1);
    }
    if (j.kind == "inference") {
      EXPECT_LE(j.gpus, p.inference_max_gpus);
    }
    if (j.kind == "dp-vision") {
      EXPECT_EQ(j.dp, j.gpus);
    }
    large += j.gpus >= 1024;
    one += j.gpus == 1;
  }
  EXPECT_EQ(kinds.size(), 4u);
  EXPECT_GT(large, 0);     // the tail reaches thousands of GPUs
  EXPECT_GT(one, large);   // ... but most jobs are small
  // Class shares near the weights (0.45 / 0.15 / 0.25 / 0.15), 4000 draws.
  EXPECT_NEAR(kinds["llm-dense"] / 4000.0, 0.45, 0.04);
  EXPECT_NEAR(kinds["inference"] / 4000.0, 0.25, 0.04);
}

TEST(Generator, PoissonArrivalsAndLogNormalDurations) {
  GeneratorParams p;
  p.jobs = 20000;
  p.arrival_rate_per_hour = 60;
  p.duration_min_s = 1;
  p.duration_max_s = 1e9;
  Trace t = generate_trace(p);
  double span_h = t.jobs.back().submit_s / 3600;
  EXPECT_NEAR(p.jobs / span_h, 60, 2.5);
  std::vector<double> logs;
  for (const auto& j : t.jobs) logs.push_back(std::log(j.duration_s));
  std::sort(logs.begin(), logs.end());
  EXPECT_NEAR(std::exp(logs[logs.size() / 2]), p.duration_median_s, 0.05 * p.duration_median_s);
  double mean = 0, var = 0;
  for (double l : logs) mean += l;
  mean /= static_cast<double>(logs.size());
  for (double l : logs) var += (l - mean) * (l - mean);
  EXPECT_NEAR(std::sqrt(var / static_cast<double>(logs.size())), p.duration_sigma, 0.03);
}

TEST(Generator, YamlParametersAndErrors) {
  auto p = parse_generator_yaml("seed: 9\njobs: 12\nmix:\n  inference: 1\nduration:\n  median_s: 60\n", "g.yaml");
  ASSERT_TRUE(p) << p.error().to_string();
  EXPECT_EQ(p->seed, 9u);
  EXPECT_EQ(p->jobs, 12);
  Trace t = generate_trace(*p);
  for (const auto& j : t.jobs) {
    EXPECT_EQ(j.kind, "inference");
  }

  auto unknown = parse_generator_yaml("seed: 1\njbos: 3\n", "g.yaml");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().where.line, 2);
  EXPECT_NE(unknown.error().message.find("jbos"), std::string::npos);
  auto range = parse_generator_yaml("jobs: -5\n", "g.yaml");
  ASSERT_FALSE(range);
  EXPECT_EQ(range.error().where.line, 1);
  auto type = parse_generator_yaml("max_gpus: lots\n", "g.yaml");
  ASSERT_FALSE(type);
  auto syntax = parse_generator_yaml("mix: [1, 2\n", "g.yaml");
  ASSERT_FALSE(syntax);
  auto klass = parse_generator_yaml("mix:\n  training: 1\n", "g.yaml");
  ASSERT_FALSE(klass);
  EXPECT_EQ(klass.error().where.line, 2);
  auto example = load_generator_yaml(std::string(TOPOSCHED_SOURCE_DIR) + "/examples/llm-mix.yaml");
  ASSERT_TRUE(example) << example.error().to_string();
}

TEST(Generator, SyntheticTimesOfferTheTargetLoad) {
  Trace t;
  for (int i = 0; i < 5000; ++i) {
    SimJob j;
    j.id = std::to_string(i);
    j.gpus = 1 + i % 4;
    t.jobs.push_back(j);
  }
  t.has_times = false;
  assign_synthetic_times(t, 1000, 3, 0.8);
  EXPECT_TRUE(t.has_times);
  double gpu_s = 0;
  for (const auto& j : t.jobs) gpu_s += j.gpus * j.duration_s;
  double offered = gpu_s / (t.jobs.back().submit_s * 1000);
  EXPECT_NEAR(offered, 0.8, 0.12);
  Trace u = t;
  assign_synthetic_times(u, 1000, 3, 0.8);
  EXPECT_EQ(u.jobs[100].submit_s, t.jobs[100].submit_s);
}

}  // namespace
}  // namespace toposched::sim
