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

}  // namespace
}  // namespace toposched::router
