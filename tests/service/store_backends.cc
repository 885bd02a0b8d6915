#include "service/store_backends.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "formats/native_spec.h"
#include "placement/engine.h"

#include "service/etcd_store.h"
#include "service/etcd_test_cluster.h"
#include "service/sqlite_store.h"

namespace toposched::service::testing {
namespace {

using namespace std::chrono_literals;

// Opens the etcd store at `url`, campaigns, and waits (bounded) until it leads.
std::unique_ptr<Store> open_leading_etcd_store(const std::string& url) {
  auto store = open_etcd_store(std::string_view(url).substr(std::string_view("etcd://").size()));
  if (!store) return nullptr;
  auto* etcd = static_cast<EtcdStore*>(store->get());
  etcd->start_election("test-replica", 2s);
  for (int i = 0; i < 200 && !etcd->election()->term(); ++i) std::this_thread::sleep_for(50ms);
  if (!etcd->election()->term()) return nullptr;
  return std::move(*store);
}

std::string g_etcd_url;  // the store last opened fresh

// A directory for this process's SQLite files, removed at exit.
struct SqliteDir {
  std::filesystem::path path;
  int next = 0;
  SqliteDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "toposched-suite-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~SqliteDir() { std::filesystem::remove_all(path); }
};
SqliteDir& sqlite_dir() {
  static SqliteDir dir;
  return dir;
}
std::string g_sqlite_path;

}  // namespace

const std::vector<StoreBackend>& store_backends() {
  static const std::vector<StoreBackend> kBackends = {
      {"sqlite",
       [](std::string&) -> std::unique_ptr<Store> {
         g_sqlite_path = (sqlite_dir().path / ("s" + std::to_string(sqlite_dir().next++) + ".db")).string();
         auto s = open_sqlite_store(g_sqlite_path);
         return s ? std::move(*s) : nullptr;
       },
       []() -> std::unique_ptr<Store> {
         auto s = open_sqlite_store(g_sqlite_path);
         return s ? std::move(*s) : nullptr;
       }},
      {"etcd",
       [](std::string& skip) -> std::unique_ptr<Store> {
         const auto& cluster = shared_etcd();
         if (cluster.endpoints.empty()) {
           skip = cluster.why_not;
           return nullptr;
         }
         g_etcd_url = "etcd://" + cluster.endpoints + unique_prefix();
         return open_leading_etcd_store(g_etcd_url);
       },
       [] { return open_leading_etcd_store(g_etcd_url); }},
  };
  return kBackends;
}

const Cluster& store_cluster(const std::string& name) {
  static std::map<std::string, Cluster> clusters;
  auto it = clusters.find(name);
  if (it != clusters.end()) return it->second;
  auto c = read_native_spec("name: " + name + R"(
node_types:
  - name: eight
    gpu: {model: H100-SXM5, count: 8}
    nvlink: {links: 18}
nodes:
  - {names: n, type: eight}
  - {names: "n[1-3]", type: eight}
)",
                            "store-cluster.yaml");
  if (!c) ADD_FAILURE() << c.error().to_string();
  return clusters.emplace(name, std::move(*c)).first->second;
}

Mutation place_mutation(const Cluster& cluster, const JobRecord& job) {
  Mutation m;
  m.kind = Mutation::Kind::kPlace;
  m.job_id = job.id;
  for (const std::string& name : job.gpus_by_rank) {
    auto g = parse_gpu(cluster, name);
    EXPECT_TRUE(g) << name;
    if (g) m.gpus_by_rank.push_back(*g);
  }
  m.request_json = job.request_json;
  m.answer_json = job.placement_json;
  m.created_unix_ms = job.created_unix_ms;
  return m;
}

Mutation release_mutation(std::string id) { return Mutation::release_of(std::move(id)); }

Mutation mark_mutation(const Cluster& cluster, const std::string& node, std::string source, std::string reason,
                       std::int64_t since_unix_ms) {
  Mutation m;
  m.kind = Mutation::Kind::kMarkNode;
  auto n = cluster.find_node(node);
  EXPECT_TRUE(n) << node;
  if (n) m.node = *n;
  m.mark = NodeMark{std::move(source), std::move(reason), since_unix_ms};
  return m;
}

Mutation unmark_mutation(const Cluster& cluster, const std::string& node, std::string source) {
  Mutation m = mark_mutation(cluster, node, std::move(source), {}, 0);
  m.kind = Mutation::Kind::kUnmarkNode;
  return m;
}

}  // namespace toposched::service::testing
