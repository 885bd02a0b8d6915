// The simulator places through the same transaction as `toposched place`: one request
// sequence (with releases between) run through the real binary, one `place` or `release`
// process per step on a shared state file, and through the simulator's placer
// (sim::make_placer) must give every job the same GPUs in the same rank order, under every
// policy.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/cluster_source.h"
#include "placement/engine.h"
#include "sim/backend.h"

namespace toposched {
namespace {

namespace fs = std::filesystem;

struct Step {
  bool release = false;
  std::uint32_t job = 0;  // index into the job list
};

// Runs the CLI; returns its stdout, or fails the test with its exit status.
std::string run_cli(const std::string& args) {
  const std::string command = std::string(TOPOSCHED_BINARY) + " " + args + " 2>&1";
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    ADD_FAILURE() << "cannot run " << command;
    return out;
  }
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << command << "\n" << out;
  return out;
}

// `toposched place` flags for a trace job, built the way the simulator's placer builds its
// request (sim::job_shape: workload class, tp, pp, ep; inference replicas of tp x pp).
std::string place_flags(const sim::SimJob& job, std::uint32_t index, std::uint64_t seed, const std::string& policy) {
  sim::JobShape shape = sim::job_shape(job, 8);
  std::string flags = fmt::format("--gpus {} --tp {} --pp {} --ep {} --model {} --job {} --seed {}", job.gpus, shape.plan.tp,
                                  shape.plan.pp, shape.plan.ep, shape.workload_class, index, seed + index);
  if (shape.workload_class == "inference")
    flags += fmt::format(" --workload inference --replica-gpus {}", shape.plan.tp * shape.plan.pp);
  // As the simulator submits to slurm-block (sim/placement_backend.cc): a job larger than a
  // node as whole nodes, since Slurm's --gpus=K takes all K GPUs from one base block.
  if (policy == "slurm-block" && job.gpus > 8 && job.gpus % 8 == 0) flags += " --gpus-per-node 8";
  return flags;
}

std::vector<sim::SimJob> jobs() {
  auto job = [](int gpus, int tp, int pp, std::string kind) {
    sim::SimJob j;
    j.gpus = gpus;
    j.tp = tp;
    j.pp = pp;
    j.kind = std::move(kind);
    return j;
  };
  sim::SimJob moe = job(32, 4, 2, "llm-moe");
  moe.ep = 2;
  return {job(3, 0, 0, "dp-vision"), job(16, 8, 2, "llm-dense"), job(2, 2, 1, "inference"),
          job(8, 8, 1, "llm-dense"), moe,                       job(5, 0, 0, "dp-vision"),
          job(4, 4, 1, "inference"), job(24, 8, 1, "llm-dense"), job(1, 0, 0, "dp-vision")};
}

TEST(PlaceSimAgreement, SameGpusAsTheCliForEveryPolicy) {
  const std::string spec = "preset:dgx-h100?nodes=12&su_size=4";
  auto cluster = load_cluster(spec);
  ASSERT_TRUE(cluster) << cluster.error().message;
  const std::vector<sim::SimJob> list = jobs();
  const std::vector<Step> steps = {{false, 0}, {false, 1}, {false, 2}, {false, 3}, {true, 1}, {false, 4},
                                   {false, 5}, {true, 2},  {false, 6}, {false, 7}, {true, 0}, {false, 8}};
  const fs::path dir = fs::temp_directory_path() / fmt::format("toposched-agree-{}", ::getpid());
  fs::create_directories(dir);
  const std::uint64_t seed = 7;
  for (const std::string& policy : sim::placer_names()) {
    SCOPED_TRACE(policy);
    const std::string state = (dir / (policy + ".json")).string();
    fs::remove(state);
    auto placer = sim::make_placer(*cluster, policy, seed);
    ASSERT_TRUE(placer) << placer.error().message;
    std::size_t compared = 0;
    for (const Step& step : steps) {
      const std::string state_flags =
          fmt::format("{}--save-state {}", fs::exists(state) ? "--state " + state + " " : "", state);
      if (step.release) {
        (*placer)->release(step.job);
        run_cli(fmt::format("release --cluster '{}' --job {} {}", spec, step.job, state_flags));
        continue;
      }
      auto sim_gpus = (*placer)->place(list[step.job], step.job);
      const std::string out = run_cli(fmt::format("place --cluster '{}' --policy {} {} --format json {}", spec, policy,
                                                  place_flags(list[step.job], step.job, seed, policy), state_flags));
      ASSERT_TRUE(sim_gpus) << "job " << step.job << ": " << sim_gpus.error().message;
      auto answer = nlohmann::json::parse(out, nullptr, false);
      ASSERT_TRUE(answer.is_object()) << out;
      std::vector<std::string> cli, sim;
      for (const auto& g : answer["gpus"]) cli.push_back(fmt::format("{}:{}", g["node"].get<std::string>(), g["gpu"].get<int>()));
      for (GpuId g : *sim_gpus) sim.push_back(gpu_name(*cluster, g));
      EXPECT_EQ(cli, sim) << "job " << step.job;
      ++compared;
    }
    EXPECT_EQ(compared, 9u);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace toposched
