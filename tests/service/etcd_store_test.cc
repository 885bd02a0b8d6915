// The etcd client, leader election and the etcd store's HA guarantees (fencing, follower
// refusal, failover), against the real 3-member test cluster.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "service/etcd_client.h"
#include "service/etcd_store.h"
#include "service/store_backends.h"
#include "service/etcd_test_cluster.h"
#include "service/leader_election.h"

namespace toposched::service {
namespace {

using namespace std::chrono_literals;
using testing::shared_etcd;
using testing::unique_prefix;

std::vector<EtcdEndpoint> cluster_endpoints() { return *parse_etcd_endpoints(shared_etcd().endpoints); }

#define REQUIRE_ETCD()                                                      \
  do {                                                                      \
    if (shared_etcd().endpoints.empty()) GTEST_SKIP() << shared_etcd().why_not; \
  } while (0)

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 10s) {
  for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

Mutation place(std::string id, std::string gpu) {
  JobRecord j;
  j.id = std::move(id);
  j.gpus_by_rank = {std::move(gpu)};
  return testing::place_mutation(testing::store_cluster(), j);
}

// A replica bound to the test cluster (store_cluster), campaigning as `identity`.
std::unique_ptr<EtcdStore> replica(const std::string& prefix, std::string identity) {
  auto url = parse_etcd_store_url("etcd://" + shared_etcd().endpoints + prefix);
  auto store = std::make_unique<EtcdStore>(*url, EtcdClient::Options{});
  auto bound = store->bind_cluster(testing::store_cluster());
  EXPECT_TRUE(bound) << bound.error().message;
  store->start_election(std::move(identity), 2s);
  return store;
}

TEST(EtcdUrl, ParsesEndpointsAndPrefix) {
  auto u = parse_etcd_store_url("etcd://127.0.0.1:2379,10.0.0.2:2380/sched/a/");
  ASSERT_TRUE(u) << u.error().message;
  ASSERT_EQ(u->endpoints.size(), 2u);
  EXPECT_EQ(u->endpoints[1].host, "10.0.0.2");
  EXPECT_EQ(u->endpoints[1].port, 2380);
  EXPECT_EQ(u->prefix, "/sched/a");
  auto d = parse_etcd_store_url("etcd://localhost:2379");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->prefix, "/toposched");
}

TEST(EtcdUrl, RejectsMalformedUrlsWithWhatWasExpected) {
  for (const char* bad : {"etcd://", "etcd://host", "etcd://h:0", "etcd://h:99999", "etcd://h:1,/p", "sqlite:x.db",
                          "etcd://h:2379/"}) {
    auto u = parse_etcd_store_url(bad);
    ASSERT_FALSE(u) << bad;
    EXPECT_EQ(u.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(parse_etcd_store_url("etcd://host").error().message.find("HOST:PORT"), std::string::npos);
}

TEST(EtcdClient, PrefixEnd) {
  EXPECT_EQ(etcd_prefix_end("/a/"), "/a0");
  EXPECT_EQ(etcd_prefix_end(std::string("a\xff", 2)), "b");
}

TEST(EtcdClient, BinarySafeKeysAndValuesRoundTrip) {
  REQUIRE_ETCD();
  EtcdClient c(cluster_endpoints(), {});
  const std::string k = unique_prefix() + "/bin", v("\0\x01\xfe\xff=+/ \n", 9);
  auto rev = c.put(k, v);
  ASSERT_TRUE(rev) << rev.error().message;
  auto r = c.range(k);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, v);
  EXPECT_EQ(r->kvs[0].mod_revision, *rev);
}

TEST(EtcdClient, FailsOverPastADeadEndpoint) {
  REQUIRE_ETCD();
  // A port nobody listens on first: connection refused, then the real members.
  auto eps = cluster_endpoints();
  eps.insert(eps.begin(), EtcdEndpoint{"127.0.0.1", 1});
  EtcdClient c(eps, {});
  const std::string k = unique_prefix() + "/k";
  ASSERT_TRUE(c.put(k, "v"));
  auto t = c.txn({{k, EtcdCompare::Target::kValue, EtcdCompare::Op::kEqual, 0, "v"}}, {EtcdOp::put(k, "w")}, {});
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_TRUE(t->succeeded);
}

TEST(EtcdClient, NoMemberReachableIsUnavailableNamingTheEndpoints) {
  EtcdClient c({{"127.0.0.1", 1}, {"127.0.0.1", 2}}, {.connect_timeout = 200ms, .request_timeout = 1s});
  auto r = c.range("/x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("127.0.0.1:2"), std::string::npos) << r.error().message;
}

TEST(EtcdClient, LeaseKeepsKeyAliveAndRevokeDeletesIt) {
  REQUIRE_ETCD();
  EtcdClient c(cluster_endpoints(), {});
  auto lease = c.grant_lease(2);
  ASSERT_TRUE(lease) << lease.error().message;
  EXPECT_GE(lease->ttl_s, 2);
  const std::string k = unique_prefix() + "/leased";
  ASSERT_TRUE(c.put(k, "x", lease->id));
  auto ttl = c.keep_alive(lease->id);
  ASSERT_TRUE(ttl) << ttl.error().message;
  EXPECT_GT(*ttl, 0);
  ASSERT_TRUE(c.revoke_lease(lease->id));
  EXPECT_TRUE(c.range(k)->kvs.empty());
  auto gone = c.keep_alive(lease->id);
  ASSERT_TRUE(gone);
  EXPECT_EQ(*gone, 0);  // a revoked lease cannot be renewed
}

TEST(LeaderElection, ExactlyOneOfTwoLeadsAndTheOtherNamesIt) {
  REQUIRE_ETCD();
  const std::string key = unique_prefix() + "/leader";
  LeaderElection a(cluster_endpoints(), {}, {key, "http://a", 2s, 100ms});
  LeaderElection b(cluster_endpoints(), {}, {key, "http://b", 2s, 100ms});
  a.start();
  ASSERT_TRUE(eventually([&] { return a.term().has_value(); }));
  b.start();
  ASSERT_TRUE(eventually([&] { return b.leader() == "http://a"; }));
  EXPECT_FALSE(b.term());
  // A clean stop revokes the lease: b takes over well before the TTL would have run out.
  a.stop();
  ASSERT_TRUE(eventually([&] { return b.term().has_value(); }, 3s));
  EXPECT_EQ(b.leader(), "http://b");
}

TEST(EtcdStore, FollowerRefusesCommitsWithTheLeadersAddress) {
  REQUIRE_ETCD();
  const std::string prefix = unique_prefix();
  auto a = replica(prefix, "http://replica-a:7070");
  ASSERT_TRUE(eventually([&] { return a->election()->term().has_value(); }));
  auto b = replica(prefix, "http://replica-b:7070");
  ASSERT_TRUE(eventually([&] { return b->election()->leader() == "http://replica-a:7070"; }));
  ASSERT_TRUE(a->load_jobs());
  ASSERT_TRUE(b->load_jobs());
  std::vector<Mutation> m{place("j1", "n:0")};
  auto refused = b->commit(m);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().message.find("http://replica-a:7070"), std::string::npos) << refused.error().message;
  ASSERT_TRUE(a->commit(m));
  // The follower's copy catches up by polling the data revision.
  auto rev = b->data_revision();
  ASSERT_TRUE(rev);
  EXPECT_GT(*rev, 0);
  auto copy = b->load_jobs_local();
  ASSERT_TRUE(copy);
  ASSERT_EQ(copy->size(), 1u);
  EXPECT_EQ((*copy)[0].id, "j1");
}

TEST(EtcdStore, DeposedLeaderIsFencedByTheLeaderKeyRevision) {
  REQUIRE_ETCD();
  const std::string prefix = unique_prefix();
  auto a = replica(prefix, "http://a");
  ASSERT_TRUE(eventually([&] { return a->election()->term().has_value(); }));
  ASSERT_TRUE(a->load_jobs());
  // Someone else now holds the seat (as after a.'s lease expired and another replica won),
  // while `a` still believes it leads.
  EtcdClient c(cluster_endpoints(), {});
  auto lease = c.grant_lease(30);
  ASSERT_TRUE(lease);
  ASSERT_TRUE(c.txn({}, {EtcdOp::erase(prefix + "/leader")}, {}));
  ASSERT_TRUE(c.put(prefix + "/leader", "http://usurper", lease->id));
  // Whether `a` notices first (its poll) or its Txn is refused (the fence), nothing is written.
  std::vector<Mutation> m{place("late", "n:0")};
  auto r = a->commit(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("http://usurper"), std::string::npos) << r.error().message;
  EXPECT_TRUE(c.range(prefix + "/jobs/late")->kvs.empty()) << "a fenced commit must write nothing";
  EXPECT_FALSE(a->election()->term()) << "a fenced leader steps down";
  EXPECT_FALSE(a->commit(m));
  ASSERT_TRUE(c.revoke_lease(lease->id));
}

TEST(EtcdStore, WriteBehindTheLeadersBackIsDetectedByTheRevisionCompare) {
  REQUIRE_ETCD();
  const std::string prefix = unique_prefix();
  auto a = replica(prefix, "http://a");
  ASSERT_TRUE(eventually([&] { return a->election()->term().has_value(); }));
  ASSERT_TRUE(a->load_jobs());
  EtcdClient c(cluster_endpoints(), {});
  ASSERT_TRUE(c.put(prefix + "/seq", "41"));  // a write this replica did not make
  std::vector<Mutation> m{place("x", "n:0")};
  auto r = a->commit(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(c.range(prefix + "/jobs/x")->kvs.empty());
  // After re-election and a reload it decides again, on the state as it is.
  ASSERT_TRUE(eventually([&] { return a->election()->term().has_value(); }));
  ASSERT_TRUE(a->load_jobs());
  ASSERT_TRUE(a->commit(m));
  auto ev = a->events(41, 10);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ((*ev)[0].seq, 42);
}

TEST(EtcdStore, NewLeaderMustLoadBeforeItDecides) {
  REQUIRE_ETCD();
  const std::string prefix = unique_prefix();
  auto a = replica(prefix, "http://a");
  ASSERT_TRUE(eventually([&] { return a->election()->term().has_value(); }));
  ASSERT_TRUE(a->load_jobs());
  std::vector<Mutation> m1{place("one", "n:0")};
  ASSERT_TRUE(a->commit(m1));
  auto b = replica(prefix, "http://b");
  ASSERT_TRUE(b->load_jobs());  // as a follower
  a.reset();                    // the leader goes away (revokes its lease)
  ASSERT_TRUE(eventually([&] { return b->election()->term().has_value(); }, 5s));
  std::vector<Mutation> m2{place("two", "n:1")};
  auto early = b->commit(m2);
  ASSERT_FALSE(early);
  EXPECT_EQ(early.error().code, ErrorCode::kUnavailable);
  auto jobs = b->load_jobs();
  ASSERT_TRUE(jobs);
  ASSERT_EQ(jobs->size(), 1u);
  ASSERT_TRUE(b->commit(m2));
  EXPECT_EQ(b->load_jobs()->size(), 2u);
}

TEST(EtcdStore, OversizedBatchIsRefusedUpFront) {
  REQUIRE_ETCD();
  auto a = replica(unique_prefix(), "http://a");
  ASSERT_TRUE(eventually([&] { return a->election()->term().has_value(); }));
  ASSERT_TRUE(a->load_jobs());
  std::vector<Mutation> many;
  for (std::size_t i = 0; i <= EtcdStore::kMaxBatch; ++i) many.push_back(place("j" + std::to_string(i), "n:0"));
  auto r = a->commit(many);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  many.pop_back();
  ASSERT_TRUE(a->commit(many));
  EXPECT_EQ(a->load_jobs()->size(), EtcdStore::kMaxBatch);
}

// A record another writer corrupted is a located error naming its key, never a job or an
// event read with a made-up value.
TEST(EtcdStore, CorruptRecordsAreErrorsNamingTheirKey) {
  REQUIRE_ETCD();
  const std::string prefix = unique_prefix();
  auto a = replica(prefix, "http://a");
  ASSERT_TRUE(eventually([&] { return a->election()->term().has_value(); }));
  ASSERT_TRUE(a->load_jobs());
  std::vector<Mutation> m{place("x", "n:0")};
  ASSERT_TRUE(a->commit(m));
  EtcdClient c(cluster_endpoints(), {});

  ASSERT_TRUE(c.put(prefix + "/jobs/x", "{\"id\":\"x\",\"gpus\":[\"n:0\"],\n \"id\":\"y\"}"));
  auto repeated = a->load_jobs();
  ASSERT_FALSE(repeated);
  EXPECT_EQ(repeated.error().code, ErrorCode::kParse);
  EXPECT_EQ(repeated.error().to_string(), "etcd key " + prefix + "/jobs/x:2:2: key 'id' repeated, first at line 1");

  ASSERT_TRUE(c.put(prefix + "/jobs/x", R"({"id":"x","gpus":"n:0"})"));
  auto wrong_type = a->load_jobs();
  ASSERT_FALSE(wrong_type);
  EXPECT_EQ(wrong_type.error().to_string(),
            "etcd key " + prefix + "/jobs/x: 'gpus': expected an array of strings, found \"n:0\"");

  auto events = a->events(0, 10);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 1u);
  const std::string event_key = fmt::format("{}/events/{:020d}", prefix, 1);
  ASSERT_TRUE(c.put(event_key, R"({"seq":"1","kind":"place","job":"x","body":"","unix_ms":5})"));
  auto bad_event = a->events(0, 10);
  ASSERT_FALSE(bad_event);
  EXPECT_EQ(bad_event.error().to_string(), "etcd key " + event_key + ": 'seq': expected an integer (64-bit), found \"1\"");

  ASSERT_TRUE(c.put(prefix + "/jobs/x", R"({"id":"x","gpus":["n:0"]})"));
  ASSERT_TRUE(c.put(prefix + "/seq", "one"));
  auto bad_seq = a->load_jobs();
  ASSERT_FALSE(bad_seq);
  EXPECT_NE(bad_seq.error().to_string().find("etcd key " + prefix + "/seq: expected a sequence number"), std::string::npos)
      << bad_seq.error().to_string();
}

}  // namespace
}  // namespace toposched::service
