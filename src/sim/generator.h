// A seeded generator of an LLM-era job mix, and synthetic arrival/run times for traces
// that publish none. Same parameters and seed give the same trace on every platform
// (the random transforms are written here, not taken from <random>'s distributions).
//
// The mix: job sizes are powers of two from 1 to `max_gpus` with P(2^k) proportional to
// 2^(-size_alpha*k) (a heavy tail: few jobs, most GPU-hours, are large); each job is one of
// four classes with the weights of `mix`:
//  - llm-dense: TP = min(8, size) within a node, PP in {1,2,4,8} growing with size, DP the rest;
//  - llm-moe: as dense, plus EP = min(8, DP);
//  - inference: a replica set, replicas of TP = min(8, size), DP = replicas, size capped at
//    `inference_max_gpus`;
//  - dp-vision: pure data parallel, size capped at `vision_max_gpus`.
// Arrivals are Poisson (`arrival_rate_per_hour`), durations log-normal (median, sigma,
// clipped to [min_s, max_s]); runtime estimates are the duration times a factor uniform in
// [1, estimate_max_factor]. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "sim/trace.h"

namespace toposched::sim {

struct GeneratorParams {
  std::uint64_t seed = 1;
  int jobs = 500;
  double arrival_rate_per_hour = 30;
  int max_gpus = 512;
  double size_alpha = 0.6;
  double duration_median_s = 3600;
  double duration_sigma = 1.0;
  double duration_min_s = 60;
  double duration_max_s = 7 * 86400;
  int inference_max_gpus = 64;
  int vision_max_gpus = 256;
  double estimate_max_factor = 2.0;
  // Class weights: llm-dense, llm-moe, inference, dp-vision (need not sum to 1).
  std::map<std::string, double> mix = {{"llm-dense", 0.45}, {"llm-moe", 0.15}, {"inference", 0.25}, {"dp-vision", 0.15}};
};

// Reads the parameters from YAML (examples/llm-mix.yaml shows every key); unknown keys and
// out-of-range values are errors with file:line:col.
Result<GeneratorParams> parse_generator_yaml(std::string_view text, const std::string& file);
Result<GeneratorParams> load_generator_yaml(const std::string& path);

// The jobs of `params`, in submit order; with max_jobs > 0 only the first max_jobs of them
// (the same ones, drawn without making the rest).
Trace generate_trace(const GeneratorParams& params, std::size_t max_jobs = 0);

// For traces without times (Trace::has_times false): Poisson arrivals at a rate that offers
// `target_load` of `cluster_gpus` on average, log-normal durations (median 1 h, sigma 1).
// Sets has_times. Deterministic for the seed.
void assign_synthetic_times(Trace& trace, std::size_t cluster_gpus, std::uint64_t seed, double target_load = 0.9);

// The deterministic random source the generator uses (splitmix64-seeded xoshiro256**).
class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  double uniform();  // [0, 1)
  double exponential(double mean);
  double normal();
 private:
  std::uint64_t s_[4];
};

// The generator as a stream: next() draws one job at a time in submit order, holding
// nothing but the random state, so drawing any number of jobs costs constant memory; what
// a consumer keeps is its own business (generate_trace collects them, up to max_jobs).
// Not thread-safe (one per thread).
class JobGenerator {
 public:
  explicit JobGenerator(const GeneratorParams& params);
  bool done() const { return made_ >= p_.jobs; }
  int made() const { return made_; }
  SimJob next();  // the next job; call only while !done()

 private:
  GeneratorParams p_;
  Rng rng_;
  double total_weight_ = 0;
  double now_ = 0;
  int made_ = 0;
  int width_;
};

}  // namespace toposched::sim
