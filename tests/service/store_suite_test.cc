// One behavioural suite for every Store implementation (store_backends.h): what the service
// relies on, whichever store it runs on.
#include <gtest/gtest.h>

#include "service/store.h"
#include "service/store_backends.h"

namespace toposched::service {
namespace {

using testing::StoreBackend;
using testing::store_backends;

JobRecord job(std::string id, std::vector<std::string> gpus) {
  JobRecord j;
  j.id = std::move(id);
  j.gpus_by_rank = std::move(gpus);
  j.request_json = R"({"job":")" + j.id + R"(","gpus":)" + std::to_string(j.gpus_by_rank.size()) + "}";
  j.placement_json = R"({"job":")" + j.id + R"(","policy":"topo","gpus":[]})";
  j.created_unix_ms = 1764547200000;
  return j;
}

// The engine's mutations (placement/mutation.h) on the suite's cluster (store_cluster).
Mutation place(const JobRecord& j) { return testing::place_mutation(testing::store_cluster(), j); }
Mutation release(std::string id) { return testing::release_mutation(std::move(id)); }
Mutation mark(const std::string& node, std::string source, std::string reason) {
  return testing::mark_mutation(testing::store_cluster(), node, std::move(source), std::move(reason), 1764547200000);
}
Mutation unmark(const std::string& node, std::string source) {
  return testing::unmark_mutation(testing::store_cluster(), node, std::move(source));
}

std::vector<std::string> ids(const std::vector<JobRecord>& jobs) {
  std::vector<std::string> out;
  for (const auto& j : jobs) out.push_back(j.id);
  return out;
}

class StoreSuite : public ::testing::TestWithParam<StoreBackend> {
 protected:
  void SetUp() override {
    std::string skip;
    store_ = GetParam().open_fresh(skip);
    if (!store_ && !skip.empty()) GTEST_SKIP() << skip;
    ASSERT_TRUE(store_) << "cannot open a " << GetParam().name << " store";
    ready(*store_);
  }
  // What the server does before it decides: bind to its cluster, load the jobs.
  static void ready(Store& s) {
    auto bound = s.bind_cluster(testing::store_cluster("suite"));
    ASSERT_TRUE(bound) << bound.error().message;
    auto loaded = s.load_jobs();
    ASSERT_TRUE(loaded) << loaded.error().message;
  }
  void restart() {
    store_.reset();
    store_ = GetParam().reopen();
    ASSERT_TRUE(store_);
    ready(*store_);
  }
  std::vector<JobRecord> jobs() {
    auto loaded = store_->load_jobs();
    EXPECT_TRUE(loaded) << loaded.error().message;
    return loaded ? *loaded : std::vector<JobRecord>{};
  }
  std::unique_ptr<Store> store_;
};

TEST_P(StoreSuite, FreshStoreHoldsNoJobsAndNoEvents) {
  EXPECT_TRUE(jobs().empty());
  auto ev = store_->events(0, 100);
  ASSERT_TRUE(ev);
  EXPECT_TRUE(ev->empty());
  EXPECT_EQ(store_->kind(), GetParam().name);
}

TEST_P(StoreSuite, RefusesAnotherClustersDigestAndNamesBoth) {
  EXPECT_TRUE(store_->bind_cluster(testing::store_cluster("suite")));  // same cluster again: fine
  auto other = store_->bind_cluster(testing::store_cluster("other"));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kValidation);
  EXPECT_NE(other.error().message.find("suite"), std::string::npos) << other.error().message;
  EXPECT_NE(other.error().message.find("other"), std::string::npos) << other.error().message;
}

TEST_P(StoreSuite, RestartRestoresJobsInCommitOrderByteForByte) {
  JobRecord a = job("zeta", {"n1:3", "n1:0", "n2:7"}), b = job("alpha", {"n3:1"});
  a.request_json = "{\"job\":\"zeta\",\"note\":\"ünïcode \\\\ \\\" and \\n\"}";
  std::vector<Mutation> first{place(a)}, second{place(b)};
  ASSERT_TRUE(store_->commit(first));
  ASSERT_TRUE(store_->commit(second));
  restart();
  auto loaded = jobs();
  ASSERT_EQ(ids(loaded), (std::vector<std::string>{"zeta", "alpha"}));  // commit order, not name order
  EXPECT_EQ(loaded[0].gpus_by_rank, a.gpus_by_rank);                    // rank order kept
  EXPECT_EQ(loaded[0].request_json, a.request_json);
  EXPECT_EQ(loaded[0].placement_json, a.placement_json);
  EXPECT_EQ(loaded[0].created_unix_ms, a.created_unix_ms);
}

TEST_P(StoreSuite, ReleaseRemovesTheJob) {
  std::vector<Mutation> p{place(job("a", {"n:0"})), place(job("b", {"n:1"}))};
  ASSERT_TRUE(store_->commit(p));
  std::vector<Mutation> r{release("a")};
  ASSERT_TRUE(store_->commit(r));
  EXPECT_EQ(ids(jobs()), std::vector<std::string>{"b"});
  restart();
  EXPECT_EQ(ids(jobs()), std::vector<std::string>{"b"});
}

TEST_P(StoreSuite, ConflictingBatchChangesNothing) {
  std::vector<Mutation> p{place(job("a", {"n:0"}))};
  ASSERT_TRUE(store_->commit(p));
  // A good mutation followed by a duplicate id: the whole batch is refused.
  std::vector<Mutation> dup{place(job("b", {"n:1"})), place(job("a", {"n:2"}))};
  auto r = store_->commit(dup);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  std::vector<Mutation> unknown{release("b"), release("nope")};
  auto u = store_->commit(unknown);
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().code, ErrorCode::kConflict);
  auto loaded = jobs();
  ASSERT_EQ(ids(loaded), std::vector<std::string>{"a"});
  EXPECT_EQ(loaded[0].gpus_by_rank, std::vector<std::string>{"n:0"});
  // The store still accepts commits after refusing some.
  std::vector<Mutation> ok{place(job("c", {"n:3"}))};
  ASSERT_TRUE(store_->commit(ok)) << "a refused batch must not wedge the store";
  EXPECT_EQ(ids(jobs()), (std::vector<std::string>{"a", "c"}));
}

TEST_P(StoreSuite, PlaceAndReleaseOfOneIdInOneBatch) {
  std::vector<Mutation> batch{place(job("t", {"n:0"})), release("t"), place(job("t", {"n:5"}))};
  ASSERT_TRUE(store_->commit(batch));
  auto loaded = jobs();
  ASSERT_EQ(ids(loaded), std::vector<std::string>{"t"});
  EXPECT_EQ(loaded[0].gpus_by_rank, std::vector<std::string>{"n:5"});
  std::vector<Mutation> twice{release("t"), release("t")};
  auto r = store_->commit(twice);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_EQ(ids(jobs()), std::vector<std::string>{"t"});
}

// "node/source: reason" of every mark the store holds, in its order.
std::vector<std::string> marks_of(Store& s) {
  auto loaded = s.load_node_marks();
  EXPECT_TRUE(loaded) << loaded.error().message;
  std::vector<std::string> out;
  for (const auto& m : loaded ? *loaded : std::vector<NodeMarkRecord>{})
    out.push_back(m.node + "/" + m.source + ": " + m.reason + " @" + std::to_string(m.since_unix_ms));
  return out;
}

TEST_P(StoreSuite, NodeMarksAreKeptPerSourceReplacedLiftedAndLogged) {
  std::vector<Mutation> batch{mark("n2", "k8s", "cordoned"), mark("n1", "slurm", "DRAIN"),
                              mark("n2", "api", "maintenance"), mark("n2", "k8s", "cordoned, NotReady"),
                              place(job("a", {"n:0"}))};
  ASSERT_TRUE(store_->commit(batch));
  const std::vector<std::string> want = {"n1/slurm: DRAIN @1764547200000", "n2/api: maintenance @1764547200000",
                                         "n2/k8s: cordoned, NotReady @1764547200000"};
  EXPECT_EQ(marks_of(*store_), want);
  restart();
  EXPECT_EQ(marks_of(*store_), want);
  EXPECT_EQ(ids(jobs()), std::vector<std::string>{"a"});
  // Lifting a mark removes only that source's; lifting one that is not there changes nothing.
  std::vector<Mutation> lift{unmark("n2", "k8s"), unmark("n3", "k8s")};
  ASSERT_TRUE(store_->commit(lift));
  EXPECT_EQ(marks_of(*store_), (std::vector<std::string>{"n1/slurm: DRAIN @1764547200000",
                                                         "n2/api: maintenance @1764547200000"}));
  auto ev = store_->events(0, 100);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 7u);
  EXPECT_EQ((*ev)[0].kind, "mark-node");
  EXPECT_EQ((*ev)[0].job_id, "n2");
  EXPECT_EQ((*ev)[4].kind, "place");
  EXPECT_EQ((*ev)[5].kind, "unmark-node");
  EXPECT_EQ((*ev)[6].job_id, "n3");
}

TEST_P(StoreSuite, EventLogIsOrderedAndPaged) {
  std::vector<Mutation> p{place(job("a", {"n:0"})), place(job("b", {"n:1"}))};
  ASSERT_TRUE(store_->commit(p));
  std::vector<Mutation> r{release("a")};
  ASSERT_TRUE(store_->commit(r));
  auto all = store_->events(0, 100);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].kind, "place");
  EXPECT_EQ((*all)[0].job_id, "a");
  EXPECT_EQ((*all)[2].kind, "release");
  EXPECT_EQ((*all)[2].job_id, "a");
  EXPECT_LT((*all)[0].seq, (*all)[1].seq);
  EXPECT_LT((*all)[1].seq, (*all)[2].seq);
  auto tail = store_->events((*all)[0].seq, 1);
  ASSERT_TRUE(tail);
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].job_id, "b");
  restart();
  auto after = store_->events(0, 100);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->size(), 3u);
  std::vector<Mutation> more{place(job("c", {"n:2"}))};
  ASSERT_TRUE(store_->commit(more));
  auto last = store_->events((*all)[2].seq, 10);
  ASSERT_TRUE(last);
  ASSERT_EQ(last->size(), 1u);  // seq continues after a restart, no reuse
  EXPECT_EQ((*last)[0].job_id, "c");
}

// A long-running service keeps a bounded log: the commit that pushes events out of the
// window deletes them, in batches and single commits alike, and the jobs are untouched.
TEST_P(StoreSuite, EventLogKeepsTheNewestEventsWhenLimited) {
  store_->set_event_log_limit(3);
  int gpu = 0;
  for (std::string id : {"a", "b", "c", "d"}) {
    std::vector<Mutation> one{place(job(id, {"n:" + std::to_string(gpu++)}))};
    ASSERT_TRUE(store_->commit(one));
  }
  auto four = store_->events(0, 100);
  ASSERT_TRUE(four);
  ASSERT_EQ(four->size(), 3u);
  EXPECT_EQ((*four)[0].job_id, "b");
  EXPECT_EQ((*four)[2].job_id, "d");
  std::vector<Mutation> batch{release("a"), release("b"), place(job("e", {"n:4"})), place(job("f", {"n:5"}))};
  ASSERT_TRUE(store_->commit(batch));
  auto last = store_->events(0, 100);
  ASSERT_TRUE(last);
  ASSERT_EQ(last->size(), 3u);
  EXPECT_EQ((*last)[0].kind, "release");
  EXPECT_EQ((*last)[0].job_id, "b");
  EXPECT_EQ((*last)[1].job_id, "e");
  EXPECT_EQ((*last)[2].job_id, "f");
  EXPECT_EQ((*last)[2].seq, (*four)[2].seq + 4);  // seq keeps counting; nothing is reused
  EXPECT_EQ(ids(jobs()), (std::vector<std::string>{"c", "d", "e", "f"}));
  store_->set_event_log_limit(0);  // every event again: nothing more is deleted
  std::vector<Mutation> g{place(job("g", {"n:6"}))};
  ASSERT_TRUE(store_->commit(g));
  auto all = store_->events(0, 100);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreSuite, ::testing::ValuesIn(store_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace toposched::service
