#include "service/store_backends.h"

#include <chrono>
#include <thread>

#include "service/etcd_store.h"
#include "service/etcd_test_cluster.h"

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

}  // namespace

const std::vector<StoreBackend>& store_backends() {
  static const std::vector<StoreBackend> kBackends = {
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

}  // namespace toposched::service::testing
