// Log-then-apply through the durable scheduler: when a store commit fails, the engine applies
// the inverse of the batch, so its job list (order included) is the store's, byte for byte
// after a restart too.
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "service/scheduler.h"
#include "service/store.h"
#include "topology/file_io.h"
#include "topology/presets.h"

namespace toposched::service {
namespace {

namespace fs = std::filesystem;

// A store whose next commit fails while `fail` is set (a disk that filled up, a lost leader).
class FailingStore : public Store {
 public:
  explicit FailingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}
  bool fail = false;
  std::string_view kind() const override { return inner_->kind(); }
  Result<void> bind_cluster(const Cluster& cluster) override { return inner_->bind_cluster(cluster); }
  Result<std::vector<JobRecord>> load_jobs() override { return inner_->load_jobs(); }
  Result<std::vector<NodeMarkRecord>> load_node_marks() override { return inner_->load_node_marks(); }
  Result<void> commit(std::span<const Mutation> batch) override {
    if (fail) return make_error(ErrorCode::kIo, "injected: disk full");
    return inner_->commit(batch);
  }
  Result<std::vector<StoreEvent>> events(std::int64_t after, std::size_t limit) override {
    return inner_->events(after, limit);
  }

 private:
  std::unique_ptr<Store> inner_;
};

struct Fixture {
  fs::path dir;
  Cluster cluster;
  Metrics metrics;
  FailingStore* store = nullptr;
  std::unique_ptr<Scheduler> scheduler;

  Fixture() : cluster(*build_preset("dgx-h100?nodes=4")) {
    std::string tmpl = (fs::temp_directory_path() / "toposched-order-XXXXXX").string();
    dir = mkdtemp(tmpl.data());
    open();
  }
  ~Fixture() {
    scheduler.reset();
    fs::remove_all(dir);
  }
  void open() {
    scheduler.reset();
    auto inner = open_store("sqlite:" + (dir / "state.db").string());
    ASSERT_TRUE(inner) << inner.error().message;
    auto failing = std::make_unique<FailingStore>(std::move(*inner));
    store = failing.get();
    auto s = Scheduler::open(cluster, std::move(failing), metrics);
    ASSERT_TRUE(s) << s.error().message;
    scheduler = std::move(*s);
  }
  Result<Decision> place(const std::string& id, int gpus) {
    Command c;
    c.place.job.job_id = id;
    c.place.job.gpus = gpus;
    return scheduler->submit(std::move(c));
  }
  Result<Decision> release(const std::string& id) {
    Command c;
    c.kind = Command::Kind::kRelease;
    c.job_id = id;
    return scheduler->submit(std::move(c));
  }
  std::vector<std::string> engine_ids() const {
    return scheduler->engine().read([](const AllocationState& s) { return s.job_ids(); });
  }
  std::vector<std::string> store_ids() const {
    auto jobs = scheduler->store().load_jobs();
    EXPECT_TRUE(jobs);
    std::vector<std::string> ids;
    if (jobs)
      for (const JobRecord& j : *jobs) ids.push_back(j.id);
    return ids;
  }
};

TEST(SchedulerOrder, AfterAFailedCommitTheJobOrderIsTheStores) {
  Fixture f;
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(f.place(id, 4));
  const std::string before = f.scheduler->engine().jobs_json();
  f.store->fail = true;
  auto r = f.release("a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_FALSE(f.place("d", 4));
  f.store->fail = false;
  EXPECT_EQ(f.engine_ids(), f.store_ids());
  EXPECT_EQ(f.engine_ids(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(f.scheduler->engine().jobs_json(), before);
  // A restart restores the store's jobs: the same list, byte for byte.
  ASSERT_TRUE(f.release("b"));
  ASSERT_TRUE(f.place("e", 8));
  const std::string live = f.scheduler->engine().jobs_json();
  f.open();
  EXPECT_EQ(f.scheduler->engine().jobs_json(), live);
  EXPECT_EQ(f.engine_ids(), (std::vector<std::string>{"a", "c", "e"}));
}

// A store written before the store and the engine shared one record type (Mutation, at
// c457e97: `toposched serve` placed train-a, infer-b and gone, released gone, and marked
// dgx-h100-004 unavailable) loads into the same jobs and marks, byte for byte, and takes
// new commits in the same format.
TEST(SchedulerOrder, AStoreWrittenBeforeTheSharedMutationLoads) {
  const fs::path data = fs::path(TOPOSCHED_TEST_DATA) / "stores";
  Fixture f;
  f.scheduler.reset();
  fs::copy_file(data / "sqlite-c457e97.db", f.dir / "state.db", fs::copy_options::overwrite_existing);
  f.open();
  auto want = read_text_file((data / "sqlite-c457e97.jobs.json").string());
  ASSERT_TRUE(want);
  if (!want->empty() && want->back() == '\n') want->pop_back();  // GET /v1/jobs's body ends its line
  EXPECT_EQ(f.scheduler->engine().jobs_json(), *want);
  EXPECT_EQ(f.engine_ids(), (std::vector<std::string>{"train-a", "infer-b"}));
  auto node = nlohmann::json::parse(*f.scheduler->engine().node_json("dgx-h100-004"));
  EXPECT_EQ(node["unavailable"], nlohmann::json::parse(
                                     R"([{"source":"api","reason":"maintenance","since_unix_ms":1796609745472}])"));
  // 12 GPUs are free, 8 of them on the marked node: 8 GPUs do not fit, 4 do (on dgx-h100-003).
  auto big = f.place("big", 8);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kInfeasible);
  ASSERT_TRUE(f.place("new", 4));
  ASSERT_TRUE(f.release("train-a"));
  const std::string live = f.scheduler->engine().jobs_json();
  f.open();
  EXPECT_EQ(f.scheduler->engine().jobs_json(), live);
  EXPECT_EQ(f.store_ids(), (std::vector<std::string>{"infer-b", "new"}));
  auto rows = f.scheduler->store().load_jobs();
  ASSERT_TRUE(rows);
  EXPECT_EQ((*rows)[1].gpus_by_rank,
            (std::vector<std::string>{"dgx-h100-003:4", "dgx-h100-003:5", "dgx-h100-003:6", "dgx-h100-003:7"}));
  EXPECT_GT((*rows)[1].created_unix_ms, 0) << "a new row is stamped with its commit time";
  auto events = f.scheduler->store().events(0, 100);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 7u);  // the five old ones, then place new, release train-a
  EXPECT_EQ((*events)[5].kind, "place");
  EXPECT_EQ((*events)[6].job_id, "train-a");
}

}  // namespace
}  // namespace toposched::service
