// The router's JSON API (what POST /v1/route and POST /v1/kv-events answer).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "formats/cluster_source.h"
#include "router/api.h"

namespace toposched::router {
namespace {

using Json = nlohmann::json;

TEST(RouterApi, EventsThenRouteToTheCachedWorker) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=2");
  ASSERT_TRUE(cluster);
  auto service = RouterService::create(*cluster, {"llama3-8b", 4, 1, "kv"});
  ASSERT_TRUE(service) << service.error().to_string();
  auto seq = sequence_hashes(std::vector<std::uint64_t>{11, 12, 13});
  Json events = Json::parse(fmt::format(
      R"({{"worker_id": 2, "events": [
           {{"event_id": 1, "data": {{"stored": {{"parent_hash": null, "blocks": [{{"block_hash": {}, "tokens_hash": {}}}]}}}}}},
           {{"event_id": 2, "data": {{"stored": {{"parent_hash": {}, "blocks": [{{"block_hash": {}}}, {{"block_hash": {}}}]}}}}}}]}})",
      seq[0], local_block_hash(11), seq[0], seq[1], seq[2]));
  auto applied = (*service)->kv_events(events);
  ASSERT_TRUE(applied) << applied.error().to_string();
  EXPECT_EQ((*applied)["applied"], 2);
  auto r = (*service)->route(Json{{"input_length", 1536}, {"hash_ids", {11, 12, 13}}});
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ((*r)["worker"], 2);
  EXPECT_EQ((*r)["overlap_blocks"], 3);
  EXPECT_EQ((*r)["node"], "dgx-h100-001");
  EXPECT_EQ((*r)["gpus"][0], "dgx-h100-001:1");
  // The same by chained hashes; then the worker forgets everything.
  Json by_hash = {{"input_length", 1536}, {"block_hashes", seq}};
  EXPECT_EQ((*(*service)->route(by_hash))["worker"], 2);
  ASSERT_TRUE((*service)->kv_events(Json::parse(R"({"worker_id": 2, "event": {"event_id": 3, "data": "cleared"}})")));
  EXPECT_EQ((*(*service)->route(by_hash))["overlap_blocks"], 0);
}

TEST(RouterApi, BadBodiesSayWhere) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  auto service = RouterService::create(*cluster, {"llama3-8b", 2, 1, "kv-topo"});
  ASSERT_TRUE(service);
  auto no_len = (*service)->route(Json{{"hash_ids", {1}}});
  ASSERT_FALSE(no_len);
  EXPECT_NE(no_len.error().message.find("input_length"), std::string::npos);
  auto bad_id = (*service)->route(Json{{"input_length", 10}, {"hash_ids", {1, -3}}});
  ASSERT_FALSE(bad_id);
  EXPECT_NE(bad_id.error().message.find("hash_ids[1]"), std::string::npos);
  auto bad_event = (*service)->kv_events(Json::parse(R"({"worker_id": 0, "events": [{"data": {"moved": {}}}]})"));
  ASSERT_FALSE(bad_event);
  EXPECT_NE(bad_event.error().message.find("events[0].data"), std::string::npos);
  auto orphan = (*service)->kv_events(Json::parse(R"({"worker_id": 1, "event": {"data": {"stored": {"parent_hash": 99, "blocks": []}}}})"));
  ASSERT_FALSE(orphan);
  EXPECT_EQ(orphan.error().code, ErrorCode::kNotFound);
  // Dynamo's 64-bit worker ids take free slots (the orphan's worker 1 took slot 1); then none is left.
  auto worker = (*service)->kv_events(Json::parse(R"({"worker_id": 7, "event": {"data": "cleared"}})"));
  ASSERT_TRUE(worker) << worker.error().to_string();
  auto full = (*service)->kv_events(Json::parse(R"({"worker_id": 8, "event": {"data": "cleared"}})"));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, ErrorCode::kInfeasible);
  EXPECT_FALSE(RouterService::create(*cluster, {"llama3-8b", 2, 1, "nope"}));
}

TEST(RouterApi, AdmissionBoundShedsUntilARequestIsDone) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  RouteServiceOptions o{"llama3-8b", 2, 1, "kv"};
  o.max_in_flight = 2;
  auto service = RouterService::create(*cluster, o);
  ASSERT_TRUE(service) << service.error().to_string();
  auto route = [&](std::uint64_t id) { return (*service)->route_or_shed(Json{{"input_length", 1024}, {"hash_ids", {id, id + 1}}, {"request_id", id}}); };
  auto first = route(10);
  ASSERT_TRUE(first) << first.error().to_string();
  EXPECT_FALSE(first->shed);
  EXPECT_EQ(first->answer["policy"], "kv");
  auto dup = route(10);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kConflict);
  auto second = route(20);
  ASSERT_TRUE(second && !second->shed);
  EXPECT_EQ((*service)->in_flight(), 2u);
  // The queue is full: shed, with a Retry-After of at least a second; an anonymous route too.
  auto shed = route(30);
  ASSERT_TRUE(shed);
  EXPECT_TRUE(shed->shed);
  EXPECT_GE(shed->retry_after_s, 1);
  EXPECT_EQ(shed->answer["error"]["code"], "overloaded");
  EXPECT_EQ(shed->answer["in_flight"], 2);
  EXPECT_FALSE((*service)->route(Json{{"input_length", 512}, {"hash_ids", {7}}}));
  // A prefill done keeps the request in flight; finished frees its place.
  auto pre = (*service)->done(Json{{"request_id", 10}, {"stage", "prefill"}});
  ASSERT_TRUE(pre) << pre.error().to_string();
  EXPECT_EQ((*pre)["in_flight"], 2);
  auto still = route(30);
  ASSERT_TRUE(still);
  EXPECT_TRUE(still->shed);
  auto fin = (*service)->done(Json{{"request_id", 10}});
  ASSERT_TRUE(fin) << fin.error().to_string();
  EXPECT_EQ((*fin)["in_flight"], 1);
  auto admitted = route(30);
  ASSERT_TRUE(admitted);
  EXPECT_FALSE(admitted->shed);
  // Unknown ids and bad stages are refused by name.
  auto unknown = (*service)->done(Json{{"request_id", 10}});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  auto stage = (*service)->done(Json{{"request_id", 20}, {"stage", "decoded"}});
  ASSERT_FALSE(stage);
  EXPECT_NE(stage.error().message.find("stage"), std::string::npos);
}

}  // namespace
}  // namespace toposched::router
