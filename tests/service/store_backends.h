// The Store implementations the shared store suite (store_suite_test.cc) runs against, as a
// table (SQLite in a temporary file, etcd on a real 3-member cluster): each entry opens a fresh, empty store, or reopens the one it opened last (a server
// restart). etcd stores are opened on the shared 3-member test cluster under a fresh prefix
// and wait until they lead, then load (what `toposched serve` does before it decides).
// Thread-safety: a StoreBackend is used by one test at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "service/store.h"
#include "topology/cluster.h"

namespace toposched::service::testing {

struct StoreBackend {
  std::string name;
  // Opens a fresh empty store; returns nullptr and sets `skip` when this backend cannot run.
  std::function<std::unique_ptr<Store>(std::string& skip)> open_fresh;
  // Opens the store last opened by open_fresh again (same file / same prefix).
  std::function<std::unique_ptr<Store>()> reopen;
};

const std::vector<StoreBackend>& store_backends();

// A small cluster for store tests, named `name` (another name: another digest): nodes n, n1,
// n2, n3 with 8 GPUs each, so records name GPUs "n:0" .. "n3:7". Lives for the process.
const Cluster& store_cluster(const std::string& name = "suite");
// The mutations a store test commits, from GPU names (parsed on `cluster`; a name the
// cluster lacks fails the test) and job records.
Mutation place_mutation(const Cluster& cluster, const JobRecord& job);
Mutation release_mutation(std::string id);
Mutation mark_mutation(const Cluster& cluster, const std::string& node, std::string source, std::string reason,
                       std::int64_t since_unix_ms);
Mutation unmark_mutation(const Cluster& cluster, const std::string& node, std::string source);

}  // namespace toposched::service::testing
