// `toposched place/release --state` and `serve` run the same engine: one request sequence
// (place, place, release, a place whose commit fails, a restart, place) driven through the
// real binary on a state file and through the durable scheduler on SQLite gives the same
// answers and the same job list, byte for byte and in the same order (the state file
// against `state export` of the SQLite store). The failed commit of the CLI path is injected
// in process, on the code path cmd_place.cc runs (StateFileStore + Engine), since a process
// cannot be made to fail its rename on demand.
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/cluster_source.h"
#include "placement/state_file.h"
#include "service/scheduler.h"
#include "service/state_transfer.h"
#include "topology/file_io.h"
#include "topology/presets.h"

namespace toposched {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPreset = "dgx-h100?nodes=4";

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
  EXPECT_EQ(pclose(pipe), 0) << command << "\n" << out;
  return out;
}

class FailingStore : public service::Store {
 public:
  explicit FailingStore(std::unique_ptr<service::Store> inner) : inner_(std::move(inner)) {}
  bool fail = false;
  std::string_view kind() const override { return inner_->kind(); }
  Result<void> bind_cluster(const Cluster& c) override { return inner_->bind_cluster(c); }
  Result<std::vector<service::JobRecord>> load_jobs() override { return inner_->load_jobs(); }
  Result<std::vector<service::NodeMarkRecord>> load_node_marks() override { return inner_->load_node_marks(); }
  Result<void> commit(std::span<const Mutation> batch) override {
    if (fail) return make_error(ErrorCode::kIo, "injected: disk full");
    return inner_->commit(batch);
  }
  Result<std::vector<service::StoreEvent>> events(std::int64_t after, std::size_t limit) override {
    return inner_->events(after, limit);
  }

 private:
  std::unique_ptr<service::Store> inner_;
};

struct Served {
  const Cluster& cluster;
  std::string url;
  service::Metrics metrics;
  FailingStore* store = nullptr;
  std::unique_ptr<service::Scheduler> scheduler;
  Served(const Cluster& c, std::string u) : cluster(c), url(std::move(u)) { open(); }
  void open() {
    scheduler.reset();
    auto inner = service::open_store(url);
    ASSERT_TRUE(inner) << inner.error().message;
    auto failing = std::make_unique<FailingStore>(std::move(*inner));
    store = failing.get();
    auto s = service::Scheduler::open(cluster, std::move(failing), metrics);
    ASSERT_TRUE(s) << s.error().message;
    scheduler = std::move(*s);
  }
  // What POST /v1/jobs does with the body.
  Result<Decision> place(const json& body) {
    auto request = place_request_from_json(body);
    if (!request) return tl::unexpected(request.error());
    Command c;
    c.place = std::move(*request);
    return scheduler->submit(std::move(c));
  }
  Result<Decision> release(const std::string& id) {
    Command c;
    c.kind = Command::Kind::kRelease;
    c.job_id = id;
    return scheduler->submit(std::move(c));
  }
};

TEST(StateParity, CliStateFileAndServeGiveTheSameJobsInTheSameOrder) {
  std::string tmpl = (fs::temp_directory_path() / "toposched-parity-XXXXXX").string();
  const fs::path dir = mkdtemp(tmpl.data());
  const std::string file = (dir / "state.json").string();
  auto cluster = build_preset(kPreset);
  ASSERT_TRUE(cluster);
  // The CLI's sequence starts from an empty state file (as `place --save-state` writes one).
  ASSERT_TRUE(write_file_atomically(file, *state_to_json(AllocationState(*cluster))));
  Served served(*cluster, "sqlite:" + (dir / "state.db").string());
  const std::string cli = fmt::format("-c 'preset:{}' --state {} --save-state {} --format json", kPreset, file, file);

  auto both_place = [&](const std::string& flags, const json& body) {
    json from_cli = json::parse(run_cli("place " + cli + " " + flags));
    auto from_serve = served.place(body);
    ASSERT_TRUE(from_serve) << from_serve.error().message;
    EXPECT_EQ(from_cli, json::parse(from_serve->answer_json)) << flags;
  };
  both_place("--job j1 --gpus 8", {{"job", "j1"}, {"gpus", 8}});
  both_place("--job j2 --gpus 16 --tp 8", {{"job", "j2"}, {"gpus", 16}, {"tp", 8}});
  both_place("--job j3 --gpus 4 --policy first-fit", {{"job", "j3"}, {"gpus", 4}, {"policy", "first-fit"}});
  {
    json from_cli = json::parse(run_cli(fmt::format("release -c 'preset:{}' --state {} --job j1 --format json",
                                                    kPreset, file)));
    auto from_serve = served.release("j1");
    ASSERT_TRUE(from_serve);
    from_cli.erase("state");
    EXPECT_EQ(from_cli, json::parse(from_serve->answer_json));
  }

  // A failed commit: release j2 and place j4 in one batch, the commit fails on both paths.
  const std::string file_before = *read_text_file(file);
  const std::string jobs_before = served.scheduler->engine().jobs_json();
  {
    auto store = StateFileStore::open(*cluster, file, file);
    ASSERT_TRUE(store);
    Engine engine(*cluster, store->state());
    Command release;
    release.kind = Command::Kind::kRelease;
    release.job_id = "j2";
    Command place;
    place.place = *place_request_from_json(json{{"job", "j4"}, {"gpus", 8}});
    std::vector<Command> batch = {release, place};
    auto results = engine.decide(batch, [&](std::span<const Mutation>) -> Result<void> {
      return make_error(ErrorCode::kIo, "injected: disk full");
    });
    for (const auto& r : results) EXPECT_FALSE(r);
    EXPECT_EQ(engine.jobs_json(), Engine(*cluster, store->state()).jobs_json());
  }
  EXPECT_EQ(*read_text_file(file), file_before);
  served.store->fail = true;
  EXPECT_FALSE(served.release("j2"));
  EXPECT_FALSE(served.place({{"job", "j4"}, {"gpus", 8}}));
  served.store->fail = false;
  EXPECT_EQ(served.scheduler->engine().jobs_json(), jobs_before);

  // Restart (every CLI call is a fresh process; the server reopens its store), then go on.
  served.open();
  both_place("--job j5 --gpus 8", {{"job", "j5"}, {"gpus", 8}});
  both_place("--gpus 2", {{"gpus", 2}});  // the first free job-N on both

  auto exported = service::export_state(*cluster, served.scheduler->store());
  ASSERT_TRUE(exported) << exported.error().message;
  EXPECT_EQ(*read_text_file(file), *exported);
  auto ids = served.scheduler->engine().read([](const AllocationState& s) { return s.job_ids(); });
  EXPECT_EQ(ids, (std::vector<std::string>{"j2", "j3", "j5", "job-1"}));
  served.scheduler.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace toposched
