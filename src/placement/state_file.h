// Allocation-state files (--state / --save-state): JSON naming each job's GPUs as
// "node:index" in rank order, so a sequence of CLI calls can build up a cluster's load:
//
//   {"format": "toposched-allocation-state", "version": 1, "cluster": "dgx-h100-64n",
//    "gpus": 512, "jobs": [{"id": "j1", "gpus": ["dgx-h100-001:0", ...]}]}
//
// Loading checks the file against the cluster (same name and GPU count, known nodes, GPU
// indices in range, no GPU in two jobs, unique job ids) and reports file:line:column.
// Saving writes atomically (temporary file + rename), so --state and --save-state may name
// the same file. Pure functions; thread-safe on distinct files.
//
// StateFileLock serialises read-decide-write cycles of several processes on one file: an
// exclusive flock(2) on "FILE.lock" beside it (created if missing, never removed, so every
// process locks the same inode), held until the lock object is destroyed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "placement/allocation_state.h"
#include "topology/error.h"

namespace toposched {

// Fails (kValidation) when a job id is not valid UTF-8 (formats/json_output.h).
Result<std::string> state_to_json(const AllocationState& state);
Result<AllocationState> state_from_json(const Cluster& cluster, std::string_view text, const std::string& file);

Result<AllocationState> load_state_file(const Cluster& cluster, const std::string& path);
Result<void> save_state_file(const AllocationState& state, const std::string& path);

class StateFileLock {
 public:
  // Locks every non-empty path's lock file, in sorted order (no deadlock between two
  // processes naming the same files); blocks until all are held. kIo when a lock file
  // cannot be created.
  static Result<StateFileLock> acquire(std::vector<std::string> paths);
  StateFileLock(StateFileLock&& other) noexcept : fds_(std::move(other.fds_)) { other.fds_.clear(); }
  StateFileLock& operator=(StateFileLock&&) = delete;
  StateFileLock(const StateFileLock&) = delete;
  ~StateFileLock();

 private:
  StateFileLock() = default;
  std::vector<int> fds_;
};

}  // namespace toposched
