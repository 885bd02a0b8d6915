// POST /v1/route and POST /v1/kv-events through a real server on a loopback port it picks:
// KV events steer the next routing decision; bad bodies get the JSON error object; a
// router whose replicas do not fit answers 501.
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "router/kv_index.h"
#include "service/server.h"

namespace toposched::service {
namespace {

using nlohmann::json;

struct RouterTempDir {
  std::filesystem::path path;
  RouterTempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "toposched-router-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~RouterTempDir() { std::filesystem::remove_all(path); }
};

std::unique_ptr<Server> start_router(const RouterTempDir& dir, const std::string& cluster, int workers) {
  ServeOptions o;
  o.cluster_spec = cluster;
  o.store_url = "sqlite:" + (dir.path / "state.db").string();
  o.listen = "127.0.0.1:0";
  o.router.workers = workers;
  o.router.policy = "kv";
  auto s = Server::start(std::move(o));
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

std::pair<int, json> post(httplib::Client& c, const std::string& path, const std::string& body) {
  auto r = c.Post(path, body, "application/json");
  if (!r) return {0, json()};
  return {r->status, json::parse(r->body, nullptr, false)};
}

TEST(RouterEndpoints, EventsSteerTheRoute) {
  RouterTempDir dir;
  auto s = start_router(dir, "preset:dgx-h100?nodes=2", 4);
  ASSERT_TRUE(s);
  httplib::Client c("127.0.0.1", s->port());
  c.set_read_timeout(30, 0);
  auto seq = router::sequence_hashes(std::vector<std::uint64_t>{5, 6});
  auto [st, ev] = post(c, "/v1/kv-events",
                       fmt::format(R"({{"worker_id": 3, "event": {{"event_id": 1, "data": {{"stored": {{"parent_hash": null,
                                     "blocks": [{{"block_hash": {}, "tokens_hash": {}}}, {{"block_hash": {}, "tokens_hash": {}}}]}}}}}}}})",
                                   seq[0], router::local_block_hash(5), seq[1], router::local_block_hash(6)));
  ASSERT_EQ(st, 200) << ev.dump();
  EXPECT_EQ(ev["applied"], 1);
  auto [rs, route] = post(c, "/v1/route", R"({"input_length": 1024, "hash_ids": [5, 6]})");
  ASSERT_EQ(rs, 200) << route.dump();
  EXPECT_EQ(route["worker"], 3);
  EXPECT_EQ(route["overlap_blocks"], 2);
  EXPECT_EQ(route["node"], "dgx-h100-002");
  auto [bs, bad] = post(c, "/v1/route", R"({"hash_ids": [5]})");
  EXPECT_EQ(bs, 400);
  EXPECT_TRUE(bad["error"]["message"].get<std::string>().find("input_length") != std::string::npos) << bad.dump();
  auto [os, orphan] = post(c, "/v1/kv-events", R"({"worker_id": 0, "event": {"data": {"stored": {"parent_hash": 7, "blocks": []}}}})");
  EXPECT_EQ(os, 404) << orphan.dump();
  auto [js, junk] = post(c, "/v1/kv-events", "{not json");
  EXPECT_EQ(js, 400);
  s->stop();
}

TEST(RouterEndpoints, ReplicasThatDoNotFitAnswer501) {
  RouterTempDir dir;
  auto s = start_router(dir, "preset:dgx-h100?nodes=1", 64);
  ASSERT_TRUE(s);
  httplib::Client c("127.0.0.1", s->port());
  auto [st, body] = post(c, "/v1/route", R"({"input_length": 10, "hash_ids": [1]})");
  EXPECT_EQ(st, 501) << body.dump();
  EXPECT_EQ(body["error"]["code"], "unsupported");
  s->stop();
}

}  // namespace
}  // namespace toposched::service
