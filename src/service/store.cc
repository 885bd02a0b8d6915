#include "service/store.h"

#include <fmt/format.h>

#include "service/etcd_store.h"
#include "service/replica.h"
#include "service/sqlite_store.h"

namespace toposched::service {

namespace {
Result<std::unique_ptr<Store>> open_sqlite(std::string_view rest) {
  if (rest.empty()) return make_error(ErrorCode::kInvalidArgument, "store URL 'sqlite:' needs a path, e.g. sqlite:./toposched-state.db");
  return open_sqlite_store(std::string(rest));
}
}  // namespace

std::shared_ptr<Replica> Store::replicate(const ReplicaOptions&, Engine&) { return nullptr; }

// One row per store kind: the URL prefix, what it is, and how to open the rest of the URL.
// A new kind adds one row here (and its own file under src/service/).
const std::vector<StoreScheme>& store_schemes() {
  static const std::vector<StoreScheme> kSchemes = {
      {"sqlite:", "one SQLite file (WAL, synchronous=FULL): sqlite:PATH", open_sqlite},
      {"etcd://", "an etcd v3 cluster shared by replicas (HA): etcd://HOST:PORT[,HOST:PORT...][/PREFIX]", open_etcd_store},
  };
  return kSchemes;
}

Result<std::unique_ptr<Store>> open_store(std::string_view url) {
  for (const StoreScheme& s : store_schemes())
    if (url.starts_with(s.prefix)) return s.open(url.substr(s.prefix.size()));
  std::string known;
  for (const StoreScheme& s : store_schemes()) known += (known.empty() ? "" : "; ") + std::string(s.description);
  return make_error(ErrorCode::kInvalidArgument, fmt::format("unknown store URL '{}'; stores: {}", url, known));
}

}  // namespace toposched::service
