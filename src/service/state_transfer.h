// Moving allocation state between the CLI's --state JSON files (placement/state_file.h)
// and a service store (`toposched state import|export`), so a cluster managed with CLI
// calls can be handed to `toposched serve` and back.
//
// Import adds every job of the file to the store in one commit (all or nothing; a job id
// already in the store is a kConflict and nothing is imported); the store is bound to the
// cluster first, so a store of another cluster is refused. Export writes the store's jobs
// (GPUs in rank order) as a state file. Do not run them on a store a live server uses
// (SQLite would serialise them, but the server would not see imported jobs until it
// restarts). Pure functions over their arguments; thread-safe on distinct stores.
#pragma once

#include <cstddef>
#include <string>

#include "service/store.h"
#include "topology/cluster.h"

namespace toposched::service {

// Returns the number of jobs imported.
Result<std::size_t> import_state_file(const Cluster& cluster, Store& store, const std::string& state_path);
// The state file text (state_to_json) of the store's jobs.
Result<std::string> export_state(const Cluster& cluster, Store& store);

}  // namespace toposched::service
