// The Store implementations the shared store suite (store_suite_test.cc) runs against, as a
// table: each entry opens a fresh, empty store, or reopens the one it opened last (a server
// restart). etcd stores are opened on the shared 3-member test cluster under a fresh prefix
// and wait until they lead, then load (what `toposched serve` does before it decides).
// Thread-safety: a StoreBackend is used by one test at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "service/store.h"

namespace toposched::service::testing {

struct StoreBackend {
  std::string name;
  // Opens a fresh empty store; returns nullptr and sets `skip` when this backend cannot run.
  std::function<std::unique_ptr<Store>(std::string& skip)> open_fresh;
  // Opens the store last opened by open_fresh again (same file / same prefix).
  std::function<std::unique_ptr<Store>()> reopen;
};

const std::vector<StoreBackend>& store_backends();

}  // namespace toposched::service::testing
