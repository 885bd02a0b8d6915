// The job-request schema drives both front ends alike: for every row of the table
// (placement/job_schema.h), a request that sets that field is sent through the real
// `toposched place` binary (the row's flag) and through POST /v1/jobs?dry_run=1 of an
// in-process `serve` (the row's key); both must give the same placement JSON. Every integer
// row's bounds are checked the same way: one below the minimum and one above the maximum
// are refused by both (exit 2, status 400). Kueue slices (slice_size, slice_tier) through
// the API thus place exactly as the CLI places them.
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "placement/job_schema.h"
#include "service/server.h"

namespace toposched {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCluster = "preset:dgx-h100?nodes=4";

struct CliRun {
  int status = 0;
  std::string out;
};

// Runs the CLI with `args` (each already shell-quoted); stdout only.
CliRun run_cli(const std::string& args) {
  const std::string command = std::string(TOPOSCHED_BINARY) + " " + args + " 2>/dev/null";
  CliRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    ADD_FAILURE() << "cannot run " << command;
    return run;
  }
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) run.out.append(buffer, n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// The long name of a row's flag ("--gpus,-G" -> "--gpus").
std::string long_flag(const JobField& f) {
  std::string flags(f.cli_flag);
  for (std::size_t start = 0; start < flags.size();) {
    std::size_t comma = flags.find(',', start);
    std::string name = flags.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.starts_with("--")) return name;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  ADD_FAILURE() << "row '" << f.key << "' has no long flag: " << f.cli_flag;
  return "";
}

// The CLI arguments that say what the JSON body says, row by row.
std::string cli_args(const json& body) {
  std::string args;
  for (const auto& [key, value] : body.items()) {
    const JobField* f = find_job_field(key);
    if (!f) {
      ADD_FAILURE() << "no row for key " << key;
      continue;
    }
    if (f->type == JobFieldType::kBool) {
      if (value.get<bool>()) args += " " + long_flag(*f);
      continue;
    }
    args += " " + long_flag(*f) + " " + quote(value.is_string() ? value.get<std::string>() : value.dump());
  }
  return args;
}

// One request per row that sets the row's field (with what that field needs beside it).
const std::map<std::string, json>& samples() {
  static const std::map<std::string, json> kSamples = {
      {"gpus", {{"gpus", 16}}},
      {"nodes", {{"nodes", 2}}},
      {"gpus_per_node", {{"gpus", 16}, {"gpus_per_node", 8}}},
      {"gpus_per_pod", {{"gpus", 16}, {"gpus_per_pod", 4}, {"tp", 4}}},
      // topo with --exclusive and no --gpus-per-node cannot place (reported with issue #28).
      {"exclusive", {{"gpus", 8}, {"gpus_per_node", 8}, {"exclusive", true}}},
      {"tp", {{"gpus", 8}, {"tp", 4}}},
      {"pp", {{"gpus", 8}, {"pp", 2}}},
      {"dp", {{"gpus", 8}, {"dp", 8}}},
      {"ep", {{"gpus", 8}, {"ep", 2}}},
      {"cp", {{"gpus", 8}, {"cp", 2}}},
      {"kind", {{"gpus", 8}, {"kind", "inference"}}},
      {"model", {{"gpus", 16}, {"tp", 8}, {"model", "llm-dense"}}},
      {"replica_gpus", {{"gpus", 8}, {"kind", "inference"}, {"replica_gpus", 2}}},
      {"gpu_model", {{"gpus", 8}, {"gpu_model", "h100"}}},
      {"within_nodes", {{"gpus", 8}, {"within_nodes", "dgx-h100-[003-004]"}}},
      {"required_tier", {{"gpus", 4}, {"required_tier", "node"}}},
      {"preferred_tier", {{"gpus", 4}, {"preferred_tier", "node"}}},
      {"slice_size", {{"gpus", 12}, {"slice_size", 4}, {"slice_tier", "node"}, {"policy", "kueue-bestfit"}}},
      {"slice_tier", {{"gpus", 16}, {"slice_size", 8}, {"slice_tier", "node"}, {"policy", "kueue-bestfit"}}},
      {"slice_layer", {{"gpus", 16}, {"slice_size", 8}, {"slice_tier", "leaf"}, {"slice_layer", "node:4"},
                       {"policy", "kueue-bestfit"}}},
      {"consolidate_segments", {{"nodes", 2}, {"segment", 1}, {"consolidate_segments", true},
                                {"policy", "slurm-block"}}},
      {"slurm_version", {{"nodes", 1}, {"slurm_version", "25.11"}, {"policy", "slurm-tree"}}},
      {"block_sizes", {{"nodes", 2}, {"block_sizes", "2,4"}, {"policy", "slurm-block"}}},
      {"unconstrained", {{"gpus", 8}, {"unconstrained", true}, {"policy", "kueue-bestfit"}}},
      {"switches", {{"gpus", 16}, {"switches", 1}}},
      {"segment", {{"nodes", 2}, {"segment", 1}, {"policy", "slurm-block"}}},
      {"seed", {{"gpus", 8}, {"seed", 7}, {"policy", "random"}}},
      {"policy", {{"gpus", 8}, {"policy", "first-fit"}}},
      {"job", {{"gpus", 8}, {"job", "schema-job"}}},
  };
  return kSamples;
}

class JobSchemaFrontEnds : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "toposched-schema-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    service::ServeOptions o;
    o.cluster_spec = kCluster;
    o.store_url = "sqlite:" + (dir_ / "state.db").string();
    o.listen = "127.0.0.1:0";
    auto s = service::Server::start(std::move(o));
    ASSERT_TRUE(s) << s.error().message;
    server_ = std::move(*s);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  // POST /v1/jobs?dry_run=1: status and body.
  std::pair<int, std::string> post(const json& body) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    auto r = c.Post("/v1/jobs?dry_run=1", body.dump(), "application/json");
    if (!r) return {0, ""};
    return {r->status, r->body};
  }
  CliRun place(const json& body) {
    return run_cli(fmt::format("place -c {} --format json{}", quote(kCluster), cli_args(body)));
  }

  fs::path dir_;
  std::unique_ptr<service::Server> server_;
};

TEST_F(JobSchemaFrontEnds, EveryRowHasAFlagAKeyAndASample) {
  for (const JobField& f : job_fields()) {
    SCOPED_TRACE(std::string(f.key));
    EXPECT_FALSE(f.cli_flag.empty());
    EXPECT_FALSE(f.help.empty());
    // The flag is the key spelled with dashes (or the key's alias so spelled).
    std::string flag = long_flag(f).substr(2);
    std::replace(flag.begin(), flag.end(), '-', '_');
    EXPECT_TRUE(flag == f.key || flag == f.alias) << flag;
    EXPECT_EQ(find_job_field(f.key), &f);
    EXPECT_TRUE(samples().contains(std::string(f.key))) << "add a sample request for the new row";
    if (f.type == JobFieldType::kInt) {
      EXPECT_LT(f.min, f.max);
    }
  }
}

TEST_F(JobSchemaFrontEnds, EachFieldPlacesTheSameThroughTheCliAndTheApi) {
  for (const JobField& f : job_fields()) {
    SCOPED_TRACE(std::string(f.key));
    const json& body = samples().at(std::string(f.key));
    ASSERT_TRUE(body.contains(std::string(f.key)));
    CliRun cli = place(body);
    auto [status, answer] = post(body);
    ASSERT_EQ(cli.status, 0) << cli_args(body);
    ASSERT_EQ(status, 200) << answer;
    EXPECT_EQ(json::parse(cli.out), json::parse(answer)) << cli_args(body);
  }
}

TEST_F(JobSchemaFrontEnds, IntegerBoundsAreTheSameOnBothFrontEnds) {
  for (const JobField& f : job_fields()) {
    if (f.type != JobFieldType::kInt) continue;
    SCOPED_TRACE(std::string(f.key));
    for (std::int64_t outside : {f.min - 1, f.max + 1}) {
      json body = samples().at(std::string(f.key));
      body[std::string(f.key)] = outside;
      EXPECT_EQ(place(body).status, 2) << outside;
      auto [status, answer] = post(body);
      EXPECT_EQ(status, 400) << outside << ": " << answer;
    }
  }
}

TEST(JobSchema, ParallelProductIsCheckedInsteadOfWrapping) {
  JobRequest r;
  r.tp = r.cp = r.ep = r.pp = 1'000'000'000;
  auto p = parallel_product(r, false);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(p.error().message.find("multiply to more than"), std::string::npos) << p.error().message;
  r.tp = 8;
  r.cp = r.ep = r.pp = 2;
  r.dp = 3;
  EXPECT_EQ(*parallel_product(r, false), 64);
  EXPECT_EQ(*parallel_product(r, true), 192);
}

}  // namespace
}  // namespace toposched
