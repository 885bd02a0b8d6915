// toposched serve, in process on a loopback port it picks (port 0): the jobs API, bad input
// (statuses, JSON errors, state unchanged), tokens, 16 concurrent clients on 10,000 GPUs,
// byte-identical restart, Topograph's API, and the components' lifecycle (service/component.h).
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "formats/cluster_source.h"
#include "formats/exporter.h"
#include "service/component.h"
#include "service/server.h"

namespace toposched::service {
namespace {

using nlohmann::json;

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "toposched-serve-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

ServeOptions options(const TempDir& dir, std::string cluster) {
  ServeOptions o;
  o.cluster_spec = std::move(cluster);
  o.store_url = "sqlite:" + (dir.path / "state.db").string();
  o.listen = "127.0.0.1:0";
  return o;
}

std::unique_ptr<Server> start(ServeOptions o) {
  auto s = Server::start(std::move(o));
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

httplib::Client client(const Server& s) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_keep_alive(true);
  c.set_read_timeout(60, 0);
  return c;
}

// Status, and the body parsed when it is JSON.
struct Reply {
  int status = 0;
  std::string body;
  json doc;
};

Reply send(httplib::Client& c, const std::string& method, const std::string& path, const std::string& body = "",
           httplib::Headers headers = {}) {
  httplib::Result r = method == "POST"     ? c.Post(path, headers, body, "application/json")
                      : method == "DELETE" ? c.Delete(path, headers)
                                           : c.Get(path, headers);
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  out.doc = json::parse(r->body, nullptr, false);
  return out;
}

void expect_error_object(const Reply& r, int status) {
  EXPECT_EQ(r.status, status) << r.body;
  ASSERT_TRUE(r.doc.is_object()) << r.body;
  ASSERT_TRUE(r.doc.contains("error")) << r.body;
  EXPECT_TRUE(r.doc["error"]["code"].is_string()) << r.body;
  EXPECT_FALSE(r.doc["error"]["message"].get<std::string>().empty()) << r.body;
}

TEST(Serve, PlacesListsAndReleasesJobs) {
  TempDir dir;
  auto s = start(options(dir, "preset:dgx-h100?nodes=4"));
  ASSERT_TRUE(s);
  auto c = client(*s);
  EXPECT_EQ(send(c, "GET", "/healthz").body, "OK\n");
  Reply placed = send(c, "POST", "/v1/jobs", R"({"job":"train","gpus":16,"tp":8})");
  ASSERT_EQ(placed.status, 201) << placed.body;
  EXPECT_EQ(placed.doc["job"], "train");
  EXPECT_EQ(placed.doc["gpus"].size(), 16u);
  EXPECT_EQ(placed.doc["gpus"][3]["rank"], 3);
  Reply listed = send(c, "GET", "/v1/jobs");
  ASSERT_EQ(listed.status, 200);
  ASSERT_EQ(listed.doc["jobs"].size(), 1u);
  EXPECT_EQ(listed.doc["jobs"][0], placed.doc);
  EXPECT_EQ(send(c, "GET", "/v1/jobs/train").doc, placed.doc);
  Reply dry = send(c, "POST", "/v1/jobs?dry_run=1", R"({"gpus":8})");
  EXPECT_EQ(dry.status, 200) << dry.body;
  EXPECT_EQ(send(c, "GET", "/v1/jobs").doc["jobs"].size(), 1u);
  Reply auto_id = send(c, "POST", "/v1/jobs", R"({"gpus":1})");
  EXPECT_EQ(auto_id.status, 201);
  EXPECT_EQ(auto_id.doc["job"], "job-1");
  Reply gone = send(c, "DELETE", "/v1/jobs/train");
  EXPECT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(gone.doc["released_gpus"], 16);
  expect_error_object(send(c, "GET", "/v1/jobs/train"), 404);
  EXPECT_EQ(send(c, "GET", "/v1/cluster").doc["gpus"], 32);
  EXPECT_EQ(send(c, "GET", "/v1/fragmentation").doc["free_gpus"], 31);
  EXPECT_EQ(send(c, "GET", "/v1/path?a=dgx-h100-001:0&b=dgx-h100-001:1").doc["level"], "nvlink");
  Reply metrics = send(c, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("toposched_place_attempts_total{result=\"placed\"} 2"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("toposched_gpus_allocated 1"), std::string::npos);
  EXPECT_NE(metrics.body.find("toposched_store_commit_seconds_count"), std::string::npos);
}

TEST(Serve, BadInputGetsItsStatusAJsonErrorAndChangesNothing) {
  TempDir dir;
  ServeOptions o = options(dir, "preset:dgx-h100?nodes=4");
  std::ofstream(dir.path / "token") << "s3cret-token\n";
  o.token_file = (dir.path / "token").string();
  o.max_body_bytes = 4096;
  auto s = start(o);
  ASSERT_TRUE(s);
  auto c = client(*s);
  httplib::Headers auth = {{"Authorization", "Bearer s3cret-token"}};
  ASSERT_EQ(send(c, "POST", "/v1/jobs", R"({"job":"base","gpus":8})", auth).status, 201);
  const std::string jobs_before = send(c, "GET", "/v1/jobs").body;
  const std::string frag_before = send(c, "GET", "/v1/fragmentation").body;
  struct Case {
    std::string method, path, body;
    int status;
    bool with_token = true;
  } cases[] = {
      {"POST", "/v1/jobs", R"({"gpus": 8,)", 400},
      {"POST", "/v1/jobs", R"({"gpus":8,"colour":"red"})", 400},
      {"POST", "/v1/jobs", R"({"gpus":-8})", 400},
      {"POST", "/v1/jobs", R"({"gpus":8,"tp":-1})", 400},
      {"POST", "/v1/jobs", R"({"gpus":8,"policy":"best-ever"})", 400},
      {"POST", "/v1/jobs", R"({"gpus":4096})", 422},
      {"POST", "/v1/jobs", R"({"job":"base","gpus":1})", 409},
      {"POST", "/v1/jobs", "{\"job\":\"" + std::string(8000, 'x') + "\",\"gpus\":1}", 413},
      {"DELETE", "/v1/jobs/nobody", "", 404},
      {"POST", "/v1/jobs", R"({"gpus":1})", 401, false},
      {"DELETE", "/v1/jobs/base", "", 401, false},
      {"GET", "/v1/nothing-here", "", 404},
  };
  for (const Case& k : cases) {
    httplib::Headers h = k.with_token ? auth : httplib::Headers{};
    expect_error_object(send(c, k.method, k.path, k.body, h), k.status);
  }
  httplib::Headers wrong = {{"Authorization", "Bearer s3cret-tokem"}};
  expect_error_object(send(c, "POST", "/v1/jobs", R"({"gpus":1})", wrong), 401);
  EXPECT_EQ(send(c, "GET", "/v1/jobs").body, jobs_before);
  EXPECT_EQ(send(c, "GET", "/v1/fragmentation").body, frag_before);
  // Reads need no token.
  EXPECT_EQ(send(c, "GET", "/v1/jobs/base").status, 200);
}

TEST(Serve, RefusesANonLoopbackAddressWithoutAToken) {
  TempDir dir;
  ServeOptions o = options(dir, "preset:dgx-h100?nodes=2");
  o.listen = "0.0.0.0:0";
  auto s = Server::start(o);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("--token-file"), std::string::npos) << s.error().message;
}

TEST(Serve, RefusesTheStoreOfAnotherCluster) {
  TempDir dir;
  { ASSERT_TRUE(start(options(dir, "preset:dgx-h100?nodes=4"))); }
  auto s = Server::start(options(dir, "preset:dgx-h100?nodes=8"));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kValidation);
  EXPECT_NE(s.error().message.find("belongs to cluster"), std::string::npos) << s.error().message;
}

// Acceptance 2 and 4: 16 client threads place and release 20,000 jobs of mixed sizes on
// 10,000 GPUs; afterwards the invariants hold, no GPU has two owners, the job list is
// exactly the acknowledged, unreleased jobs; a restart answers byte-identically.
TEST(Serve, SixteenClientsTwentyThousandJobsThenAnIdenticalRestart) {
  TempDir dir;
  ServeOptions o = options(dir, "preset:dgx-h100?nodes=1250");
  auto s = start(o);
  ASSERT_TRUE(s);
  constexpr int kThreads = 16, kJobsPerThread = 1250;
  const int sizes[] = {1, 2, 4, 8, 8, 16, 32, 64};
  std::mutex mutex;
  std::set<std::string> live;
  std::atomic<int> placed{0}, refused{0}, failures{0};
  std::vector<std::string> notes;  // guarded by mutex
  auto note_failure = [&](std::string what) {
    std::lock_guard lock(mutex);
    if (notes.size() < 20) notes.push_back(std::move(what));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto c = client(*s);
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::string> mine;
      for (int i = 0; i < kJobsPerThread; ++i) {
        std::string id = fmt::format("t{}-j{}", t, i);
        int gpus = sizes[rng() % std::size(sizes)];
        const std::string body = fmt::format(R"({{"job":"{}","gpus":{}}})", id, gpus);
        auto r = c.Post("/v1/jobs", body, "application/json");
        if (!r) {
          // The connection broke (an idle keep-alive connection the server closed, on a
          // loaded machine): the job is either committed or absent; ask, then retry once.
          note_failure(fmt::format("POST {}: {}", id, httplib::to_string(r.error())));
          auto probe = c.Get("/v1/jobs/" + id);
          if (probe && probe->status == 404) r = c.Post("/v1/jobs", body, "application/json");
          else if (probe && probe->status == 200) r = c.Get("/v1/jobs/" + id), r->status = 201;
        }
        if (!r) {
          ++failures;
          continue;
        }
        if (r->status == 201) {
          ++placed;
          mine.push_back(id);
          std::lock_guard lock(mutex);
          live.insert(id);
        } else if (r->status == 422) {
          ++refused;
        } else {
          ++failures;
          note_failure(fmt::format("POST {}: HTTP {} {}", id, r->status, r->body));
        }
        // Release about half as often as we place (more when the cluster is full), so the
        // occupancy stays high and varies.
        if (!mine.empty() && (rng() % 100 < 45 || r->status == 422)) {
          std::size_t k = rng() % mine.size();
          std::string victim = mine[k];
          mine.erase(mine.begin() + static_cast<long>(k));
          auto d = c.Delete("/v1/jobs/" + victim);
          if (!d) {
            note_failure(fmt::format("DELETE {}: {}", victim, httplib::to_string(d.error())));
            auto probe = c.Get("/v1/jobs/" + victim);
            if (probe && probe->status == 200) d = c.Delete("/v1/jobs/" + victim);
            else if (probe && probe->status == 404) d = c.Get("/healthz");  // already released
          }
          if (!d || d->status != 200) {
            ++failures;
            if (d) note_failure(fmt::format("DELETE {}: HTTP {} {}", victim, d->status, d->body));
            continue;
          }
          std::lock_guard lock(mutex);
          live.erase(victim);
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0) << fmt::format("{}", fmt::join(notes, "\n"));
  EXPECT_EQ(placed + refused, kThreads * kJobsPerThread);
  if (!notes.empty()) std::cerr << "connection errors retried:\n" << fmt::format("{}", fmt::join(notes, "\n")) << "\n";
  EXPECT_GT(placed, 10000);
  EXPECT_GT(refused, 0);  // the cluster was full at times

  auto c = client(*s);
  const std::string jobs = send(c, "GET", "/v1/jobs").body;
  const std::string frag = send(c, "GET", "/v1/fragmentation").body;
  json doc = json::parse(jobs);
  std::set<std::string> listed;
  std::set<std::pair<std::string, int>> owned;
  std::size_t gpu_count = 0;
  for (const auto& job : doc["jobs"]) {
    listed.insert(job["job"].get<std::string>());
    int rank = 0;
    for (const auto& g : job["gpus"]) {
      EXPECT_EQ(g["rank"], rank++);
      owned.insert({g["node"].get<std::string>(), g["gpu"].get<int>()});
      ++gpu_count;
    }
  }
  EXPECT_EQ(listed, live);
  EXPECT_EQ(owned.size(), gpu_count) << "a GPU is owned twice";
  auto invariants = s->scheduler().engine().read([](const AllocationState& st) { return st.check_invariants(); });
  EXPECT_TRUE(invariants) << (invariants ? "" : invariants.error().message);
  EXPECT_EQ(json::parse(frag)["free_gpus"], 10000 - static_cast<long>(gpu_count));

  s.reset();  // stop, then start again on the same store
  auto again = start(o);
  ASSERT_TRUE(again);
  auto c2 = client(*again);
  EXPECT_EQ(send(c2, "GET", "/v1/jobs").body, jobs);
  EXPECT_EQ(send(c2, "GET", "/v1/fragmentation").body, frag);
}

TEST(Serve, TopographGenerateThenPollTopology) {
  TempDir dir;
  auto s = start(options(dir, "preset:gb200-nvl72?racks=4"));
  ASSERT_TRUE(s);
  auto c = client(*s);
  // The example body of Topograph's docs/api.md (engine slurm, plugin topology/block).
  const std::string body = R"({
    "provider": {"name": "aws", "creds": {"accessKeyId": "id", "secretAccessKey": "secret"}},
    "engine": {"name": "slurm", "params": {"plugin": "topology/block", "blockSizes": [18, 36]}},
    "nodes": [{"region": "region1", "instances": {"instance1": "node1"}}]})";
  auto r = c.Post("/v1/generate", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  const std::string uid = r->body;
  std::string topology;
  for (int i = 0; i < 200; ++i) {
    auto t = c.Get("/v1/topology?uid=" + uid);
    ASSERT_TRUE(t);
    if (t->status == 200) {
      topology = t->body;
      break;
    }
    ASSERT_EQ(t->status, 202) << t->body;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto cluster = load_cluster("preset:gb200-nvl72?racks=4");
  ASSERT_TRUE(cluster);
  ExportOptions eo;
  eo.block_sizes = {18, 36};
  auto expected = export_cluster(*cluster, "slurm-block", eo);
  ASSERT_TRUE(expected);
  EXPECT_EQ(topology, expected->text);
  EXPECT_EQ(c.Get("/v1/topology?uid=nope")->status, 404);
  EXPECT_EQ(c.Post("/v1/generate", R"({"engine":{"name":"pbs"}})", "application/json")->status, 400);
}

TEST(Serve, EveryComponentIsNamedAndMadeOnlyWhenItsOptionsAskForIt) {
  std::set<std::string_view> names;
  for (const ComponentKind& kind : component_kinds()) {
    EXPECT_TRUE(kind.make);
    EXPECT_TRUE(names.insert(kind.name).second) << kind.name;
  }
  TempDir dir;
  auto plain = start(options(dir, "preset:dgx-h100?nodes=2"));
  ASSERT_TRUE(plain);
  // SQLite: no HA front; no --slurm, no --k8s-extender.
  EXPECT_EQ(plain->service().component_names(),
            (std::vector<std::string_view>{"health", "jobs", "nodes", "cluster", "topograph", "router"}));
  plain.reset();
  ServeOptions o = options(dir, "preset:dgx-h100?nodes=2");
  o.k8s.enabled = true;
  auto with_extender = start(o);
  ASSERT_TRUE(with_extender);
  EXPECT_EQ(with_extender->service().component_names().back(), "k8s-extender");
  httplib::Client c = client(*with_extender);
  EXPECT_NE(c.Post("/filter", R"({"Pod":{}})", "application/json")->status, 404);  // the verb is served
}

// What the recording components below saw, in order.
std::vector<std::string>& lifecycle_log() {
  static std::vector<std::string> log;
  return log;
}

template <int N>
struct Recording final : Component {
  explicit Recording(ServiceContext& ctx) : ctx_(ctx) {}
  Result<void> start() override {
    // The scheduler runs when a component starts: it may decide through it.
    lifecycle_log().push_back(fmt::format("start {} jobs={}", N, ctx_.scheduler.engine().job_count()));
    if (N == 3) return make_error(ErrorCode::kUnavailable, "cannot reach the thing");
    return {};
  }
  void install(Endpoints&) override { lifecycle_log().push_back(fmt::format("install {}", N)); }
  void stop() override { lifecycle_log().push_back(fmt::format("stop {}", N)); }
  ServiceContext& ctx_;
};

template <int N>
std::unique_ptr<Component> make_recording(ServiceContext& ctx) {
  return std::make_unique<Recording<N>>(ctx);
}
std::unique_ptr<Component> make_none(ServiceContext&) { return nullptr; }

TEST(Serve, ComponentsStartInOrderInstallAfterAllStartedAndStopInReverse) {
  TempDir dir;
  const ComponentKind kinds[] = {{"one", "", make_recording<1>}, {"off", "", make_none}, {"two", "", make_recording<2>}};
  lifecycle_log().clear();
  auto service = Service::open(options(dir, "preset:dgx-h100?nodes=2"), kinds);
  ASSERT_TRUE(service) << service.error().message;
  EXPECT_EQ((*service)->component_names(), (std::vector<std::string_view>{"one", "two"}));
  httplib::Server api;
  std::vector<PreRoutingHook> hooks;
  (*service)->install(api, api, hooks);
  (*service)->stop();
  (*service)->stop();  // once only
  EXPECT_EQ(lifecycle_log(), (std::vector<std::string>{"start 1 jobs=0", "start 2 jobs=0", "install 1", "install 2",
                                                       "stop 2", "stop 1"}));
}

TEST(Serve, AComponentThatCannotStartStopsTheOnesBeforeItAndNamesItself) {
  TempDir dir;
  const ComponentKind kinds[] = {{"one", "", make_recording<1>}, {"flaky", "", make_recording<3>},
                                 {"two", "", make_recording<2>}};
  lifecycle_log().clear();
  auto service = Service::open(options(dir, "preset:dgx-h100?nodes=2"), kinds);
  ASSERT_FALSE(service);
  EXPECT_EQ(service.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(service.error().message, "flaky: cannot reach the thing");
  EXPECT_EQ(lifecycle_log(), (std::vector<std::string>{"start 1 jobs=0", "start 3 jobs=0", "stop 3", "stop 1"}));
}

}  // namespace
}  // namespace toposched::service
