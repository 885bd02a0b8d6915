#include "sim/generator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>
#include <type_traits>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "topology/file_io.h"
#include "topology/yaml_document.h"
#include "topology/yaml_input.h"

namespace toposched::sim {

Rng::Rng(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (auto& s : s_) {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    s = z ^ (z >> 31);
  }
}

std::uint64_t Rng::next() {
  std::uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
  std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = std::rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
double Rng::exponential(double mean) { return -mean * std::log1p(-uniform()); }
double Rng::normal() {
  double u1 = uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

namespace {

// Reads map[key] into `out` when present: a number in lo..hi, whole for integer fields.
template <class T>
Result<void> read_number(const YamlInput& in, const YAML::Node& map, const char* key, T& out, double lo, double hi) {
  const YAML::Node n = map[key];
  if (!n) return {};
  if constexpr (std::is_integral_v<T>) {
    TOPOSCHED_TRY(v, in.whole_number(n, key, static_cast<long>(lo), static_cast<long>(hi)));
    out = static_cast<T>(v);
  } else {
    TOPOSCHED_TRY(v, in.number(n, key, lo, hi));
    out = v;
  }
  return {};
}

// The top-level scalars: seed, size, arrival rate and the per-class limits.
Result<void> read_scalars(const YamlInput& in, const YAML::Node& root, GeneratorParams& p) {
  TOPOSCHED_CHECK(read_number(in, root, "seed", p.seed, 0, 9007199254740992.0));
  TOPOSCHED_CHECK(read_number(in, root, "jobs", p.jobs, 1, 10'000'000));
  TOPOSCHED_CHECK(read_number(in, root, "arrival_rate_per_hour", p.arrival_rate_per_hour, 1e-6, 1e9));
  TOPOSCHED_CHECK(read_number(in, root, "max_gpus", p.max_gpus, 1, 1 << 20));
  TOPOSCHED_CHECK(read_number(in, root, "size_alpha", p.size_alpha, 0, 10));
  TOPOSCHED_CHECK(read_number(in, root, "inference_max_gpus", p.inference_max_gpus, 1, 1 << 20));
  TOPOSCHED_CHECK(read_number(in, root, "vision_max_gpus", p.vision_max_gpus, 1, 1 << 20));
  TOPOSCHED_CHECK(read_number(in, root, "estimate_max_factor", p.estimate_max_factor, 1, 1000));
  return {};
}

// `duration`: the log-normal's median and sigma, and its clip.
Result<void> read_duration(const YamlInput& in, const YAML::Node& d, GeneratorParams& p) {
  TOPOSCHED_CHECK(in.expect_map(d, "'duration'", {"median_s", "sigma", "min_s", "max_s"}));
  TOPOSCHED_CHECK(read_number(in, d, "median_s", p.duration_median_s, 1e-3, 1e9));
  TOPOSCHED_CHECK(read_number(in, d, "sigma", p.duration_sigma, 0, 10));
  TOPOSCHED_CHECK(read_number(in, d, "min_s", p.duration_min_s, 1e-3, 1e9));
  TOPOSCHED_CHECK(read_number(in, d, "max_s", p.duration_max_s, 1e-3, 1e10));
  if (p.duration_min_s > p.duration_max_s)
    return make_error(ErrorCode::kValidation, "'duration.min_s' is larger than 'duration.max_s'", in.where(d));
  return {};
}

// `mix`: the job classes' relative weights, not all 0.
Result<void> read_mix(const YamlInput& in, const YAML::Node& m, GeneratorParams& p) {
  TOPOSCHED_CHECK(in.expect_map(m, "'mix' (job class: weight)", {"llm-dense", "llm-moe", "inference", "dp-vision"}));
  p.mix.clear();
  double total = 0;
  for (auto it = m.begin(); it != m.end(); ++it) {
    const std::string job_class = it->first.Scalar();
    double weight = 0;
    TOPOSCHED_CHECK(read_number(in, m, job_class.c_str(), weight, 0, 1e9));
    p.mix[job_class] = weight;
    total += weight;
  }
  if (!(total > 0)) return make_error(ErrorCode::kValidation, "'mix' weights must not all be 0", in.where(m));
  return {};
}

}  // namespace

Result<GeneratorParams> parse_generator_yaml(std::string_view text, const std::string& file) {
  YamlInput in(file);
  TOPOSCHED_TRY(root, in.parse(text));
  GeneratorParams p;
  if (!root || root.IsNull()) return p;
  TOPOSCHED_CHECK(in.expect_map(root, "the generator parameters",
                                {"seed", "jobs", "arrival_rate_per_hour", "max_gpus", "size_alpha", "duration",
                                 "inference_max_gpus", "vision_max_gpus", "estimate_max_factor", "mix"}));
  try {
    TOPOSCHED_CHECK(read_scalars(in, root, p));
    if (const YAML::Node d = root["duration"]) TOPOSCHED_CHECK(read_duration(in, d, p));
    if (const YAML::Node m = root["mix"]) TOPOSCHED_CHECK(read_mix(in, m, p));
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, e.msg, location_of(e.mark, file));
  }
  return p;
}

Result<GeneratorParams> load_generator_yaml(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return tl::unexpected(text.error());
  return parse_generator_yaml(*text, path);
}

namespace {

int draw_size(Rng& rng, int max_gpus, double alpha) {
  int kmax = std::bit_width(static_cast<unsigned>(max_gpus)) - 1;
  double total = 0;
  for (int k = 0; k <= kmax; ++k) total += std::pow(2.0, -alpha * k);
  double u = rng.uniform() * total;
  for (int k = 0; k <= kmax; ++k) {
    u -= std::pow(2.0, -alpha * k);
    if (u < 0) return 1 << k;
  }
  return 1 << kmax;
}

double draw_duration(Rng& rng, const GeneratorParams& p) {
  double d = p.duration_median_s * std::exp(p.duration_sigma * rng.normal());
  return std::clamp(d, p.duration_min_s, p.duration_max_s);
}

}  // namespace

JobGenerator::JobGenerator(const GeneratorParams& params)
    : p_(params), rng_(params.seed), width_(static_cast<int>(std::to_string(params.jobs).size())) {
  for (const auto& [k, w] : p_.mix) total_weight_ += w;
}

SimJob JobGenerator::next() {
  const GeneratorParams& p = p_;
  Rng& rng = rng_;
  const int i = made_++;
  now_ += rng.exponential(3600.0 / p.arrival_rate_per_hour);
  SimJob j;
  j.id = fmt::format("job-{:0{}d}", i + 1, width_);
  j.submit_s = std::round(now_ * 1000) / 1000;
  double u = rng.uniform() * total_weight_;
  std::string kind = p.mix.rbegin()->first;
  for (const auto& [k, w] : p.mix) {
    if (u < w) {
      kind = k;
      break;
    }
    u -= w;
  }
  j.kind = kind;
  int size = draw_size(rng, p.max_gpus, p.size_alpha);
  if (kind == "inference") size = std::min(size, p.inference_max_gpus);
  if (kind == "dp-vision") size = std::min(size, p.vision_max_gpus);
  j.gpus = size;
  if (kind == "dp-vision") {
    j.tp = 1, j.pp = 1, j.dp = size;
  } else if (kind == "inference") {
    j.tp = std::min(8, size);
    j.pp = 1;
    j.dp = size / j.tp;
    j.priority = 2;
  } else {
    j.tp = std::min(8, size);
    int rest = size / j.tp;
    int pp = 1;
    // Larger models use deeper pipelines: PP 2 from 64 GPUs, 4 from 256, 8 from 1024.
    if (size >= 1024) pp = 8;
    else if (size >= 256) pp = 4;
    else if (size >= 64) pp = 2;
    j.pp = std::min(pp, rest);
    j.dp = rest / j.pp;
    if (kind == "llm-moe") j.ep = std::min(8, j.dp);
    j.priority = size >= 256 ? 1 : 0;
  }
  j.duration_s = std::round(draw_duration(rng, p) * 1000) / 1000;
  j.estimate_s = std::round(j.duration_s * (1 + (p.estimate_max_factor - 1) * rng.uniform()) * 1000) / 1000;
  return j;
}

Trace generate_trace(const GeneratorParams& p, std::size_t max_jobs) {
  Trace t;
  t.source = "generator";
  t.format = "generator";
  JobGenerator gen(p);
  std::size_t count = static_cast<std::size_t>(p.jobs);
  if (max_jobs > 0) count = std::min(count, max_jobs);
  t.jobs.reserve(count);
  while (t.jobs.size() < count) t.jobs.push_back(gen.next());
  (void)finalize_trace(t);
  return t;
}

void assign_synthetic_times(Trace& trace, std::size_t cluster_gpus, std::uint64_t seed, double target_load) {
  Rng rng(seed);
  const double median = 3600, sigma = 1.0;
  double mean_duration = median * std::exp(sigma * sigma / 2);
  double mean_gpus = 0;
  for (const SimJob& j : trace.jobs) mean_gpus += j.gpus;
  if (!trace.jobs.empty()) mean_gpus /= static_cast<double>(trace.jobs.size());
  // Offered load = rate * mean_gpus * mean_duration / cluster_gpus.
  double rate = target_load * static_cast<double>(std::max<std::size_t>(cluster_gpus, 1)) / std::max(mean_gpus * mean_duration, 1e-9);
  double now = 0;
  for (SimJob& j : trace.jobs) {
    now += rng.exponential(1.0 / rate);
    j.submit_s = std::round(now * 1000) / 1000;
    j.duration_s = std::max(1.0, std::round(median * std::exp(sigma * rng.normal()) * 1000) / 1000);
  }
  trace.has_times = true;
}

}  // namespace toposched::sim
