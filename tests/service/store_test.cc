// SqliteStore: durable commits in order, all-or-nothing batches, conflicts, the event log,
// refusal of another cluster's store, corrupt rows, and open_store's table of schemes.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "formats/native_spec.h"
#include "service/sqlite_store.h"
#include "service/store.h"
#include "service/store_backends.h"
#include "topology/presets.h"

namespace toposched::service {
namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "toposched-store-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

const Cluster& cluster(const std::string& name = "c") { return testing::store_cluster(name); }

Mutation place(std::string id, std::vector<std::string> gpus) {
  JobRecord j;
  j.id = std::move(id);
  j.gpus_by_rank = std::move(gpus);
  j.request_json = R"({"gpus":2})";
  j.placement_json = R"({"job":")" + j.id + R"("})";
  return testing::place_mutation(cluster(), j);
}

Mutation release(std::string id) { return testing::release_mutation(std::move(id)); }

std::unique_ptr<Store> open(const std::filesystem::path& file) {
  auto s = open_store("sqlite:" + file.string());
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

TEST(SqliteStore, KeepsJobsInCommitOrderAcrossReopen) {
  TempDir dir;
  auto file = dir.path / "s.db";
  {
    auto s = open(file);
    ASSERT_TRUE(s->bind_cluster(cluster()));
    std::vector<Mutation> batch = {place("b", {"n1:1", "n1:0"}), place("a", {"n2:0"})};
    ASSERT_TRUE(s->commit(batch));
    std::vector<Mutation> second = {release("b"), place("c", {"n1:0"})};
    ASSERT_TRUE(s->commit(second));
  }
  auto s = open(file);
  ASSERT_TRUE(s->bind_cluster(cluster()));
  auto jobs = s->load_jobs();
  ASSERT_TRUE(jobs);
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, "a");
  EXPECT_EQ((*jobs)[1].id, "c");
  EXPECT_EQ((*jobs)[1].gpus_by_rank, std::vector<std::string>{"n1:0"});
  EXPECT_EQ((*jobs)[0].placement_json, R"({"job":"a"})");
  auto events = s->events(0, 100);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[2].kind, "release");
  EXPECT_EQ((*events)[2].job_id, "b");
  EXPECT_LT((*events)[0].seq, (*events)[3].seq);
  auto tail = s->events((*events)[1].seq, 1);
  ASSERT_TRUE(tail);
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].seq, (*events)[2].seq);
}

TEST(SqliteStore, ABatchWithAConflictChangesNothing) {
  TempDir dir;
  auto s = open(dir.path / "s.db");
  ASSERT_TRUE(s->bind_cluster(cluster()));
  std::vector<Mutation> first = {place("a", {"n:0"})};
  ASSERT_TRUE(s->commit(first));
  std::vector<Mutation> dup = {place("b", {"n:1"}), place("a", {"n:2"})};
  auto r = s->commit(dup);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  std::vector<Mutation> missing = {release("a"), release("zzz")};
  r = s->commit(missing);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  auto jobs = s->load_jobs();
  ASSERT_TRUE(jobs);
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id, "a");
  EXPECT_EQ(s->events(0, 10)->size(), 1u);
}

TEST(SqliteStore, RefusesTheStoreOfAnotherCluster) {
  TempDir dir;
  auto file = dir.path / "s.db";
  ASSERT_TRUE(open(file)->bind_cluster(cluster("alpha")));
  auto r = open(file)->bind_cluster(cluster("beta"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kValidation);
  EXPECT_NE(r.error().message.find("belongs to cluster 'alpha'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("'beta'"), std::string::npos);
}

// The digest a store binds to leaves out host_memory_gb (it decides no placement, and the
// presets gained it after stores existed): the same cluster with or without it keeps its
// store; any other change of the spec does not.
TEST(ClusterDigest, IgnoresHostMemoryOnly) {
  auto with = build_preset("dgx-h100?nodes=2");
  ASSERT_TRUE(with);
  ASSERT_GT(with->node_type_at(NodeTypeId(0)).host_memory_gb, 0);
  std::string spec = write_native_yaml(*with);
  const std::size_t key = spec.find("host_memory_gb");
  ASSERT_NE(key, std::string::npos);
  const std::size_t line = spec.rfind('\n', key) + 1;
  std::string without_text = spec;
  without_text.erase(line, without_text.find('\n', key) - line + 1);
  auto without = read_native_spec(without_text, "without.yaml");
  ASSERT_TRUE(without) << without.error().to_string() << "\n" << without_text;
  EXPECT_EQ(without->node_type_at(NodeTypeId(0)).host_memory_gb, 0);
  EXPECT_NE(*write_native_json(*with), *write_native_json(*without));
  EXPECT_EQ(cluster_digest(*with), cluster_digest(*without));
  std::string other_text = without_text;
  other_text.replace(other_text.find("memory_gb: 80"), 13, "memory_gb: 94");
  auto other = read_native_spec(other_text, "other.yaml");
  ASSERT_TRUE(other) << other.error().to_string();
  EXPECT_NE(cluster_digest(*other), cluster_digest(*without));
}

TEST(SqliteStore, UsesWalAndFullSync) {
  TempDir dir;
  auto s = open(dir.path / "s.db");
  ASSERT_TRUE(s->bind_cluster(cluster()));
  EXPECT_TRUE(std::filesystem::exists(dir.path / "s.db-wal"));
}

TEST(SqliteStore, NotADatabaseIsAClearError) {
  TempDir dir;
  auto file = dir.path / "junk.db";
  { std::ofstream(file) << "this is not sqlite, just some text that fills more than a header would\n" << std::string(200, 'x'); }
  auto s = open_store("sqlite:" + file.string());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kIo);
  EXPECT_NE(s.error().message.find(file.string()), std::string::npos) << s.error().message;
}

// Sets the gpus column of job `id` in the SQLite file, as another program could.
void overwrite_gpus(const std::filesystem::path& file, const std::string& id, const std::string& gpus) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* update = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE jobs SET gpus = ? WHERE id = ?", -1, &update, nullptr), SQLITE_OK);
  sqlite3_bind_text(update, 1, gpus.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(update, 2, id.c_str(), -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(update), SQLITE_DONE);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_finalize(update);
  sqlite3_close(db);
}

// A row another program corrupted is a located error naming the file, the job and the
// column, never a job with made-up GPUs.
TEST(SqliteStore, CorruptRowsAreErrorsNamingTheirPlace) {
  TempDir dir;
  auto file = dir.path / "s.db";
  {
    auto s = open(file);
    ASSERT_TRUE(s->bind_cluster(cluster()));
    std::vector<Mutation> batch = {place("a", {"n1:0", "n1:1"})};
    ASSERT_TRUE(s->commit(batch));
  }
  const std::string place_of_a = file.string() + " (job 'a', column gpus)";
  struct Case {
    std::string gpus, error;
  };
  const Case cases[] = {
      {R"(["n1:0",)", place_of_a + ":1:9: the JSON ends early (truncated output?): expected more, found the end"},
      {"[\"n1:0\",\n \"n1:1\"] x", place_of_a + ":2:10: not valid JSON"},
      {R"({"n1:0": 1})", place_of_a + ": expected an array of strings, found an object of 1 key(s)"},
      {R"(["n1:0", 7])", place_of_a + ": expected an array of strings, found an array of 2 element(s)"},
      {"{\"a\": 1,\n \"a\": 2}", place_of_a + ":2:2: key 'a' repeated, first at line 1"},
  };
  for (const Case& c : cases) {
    overwrite_gpus(file, "a", c.gpus);
    auto s = open(file);
    ASSERT_TRUE(s->bind_cluster(cluster()));
    auto jobs = s->load_jobs();
    ASSERT_FALSE(jobs) << c.gpus;
    EXPECT_EQ(jobs.error().code, ErrorCode::kParse);
    EXPECT_EQ(jobs.error().to_string().rfind(c.error, 0), 0u) << jobs.error().to_string();
  }
}

TEST(OpenStore, UnknownSchemesListTheKnownOnes) {
  auto s = open_store("redis://x");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message.find("sqlite:PATH"), std::string::npos);
  EXPECT_FALSE(open_store("sqlite:"));
}

}  // namespace
}  // namespace toposched::service
