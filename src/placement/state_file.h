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
// exclusive flock(2) on the directory that holds it (symbolic links resolved), held until
// the lock object is destroyed. The directory, not the file: saving replaces the file's
// inode (rename), and a "FILE.lock" beside it would be a file left behind on every run.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placement/allocation_state.h"
#include "placement/engine.h"
#include "topology/error.h"

namespace toposched {

// Fails (kValidation) when a job id is not valid UTF-8 (formats/json_output.h).
Result<std::string> state_to_json(const AllocationState& state);
// Reads with a simdjson fast path (files as toposched writes them, without a document
// tree) and falls back on the yaml-cpp reader for anything else and for most errors; both
// give the same state or the same file:line:col error.
Result<AllocationState> state_from_json(const Cluster& cluster, std::string_view text, const std::string& file);
// The yaml-cpp reader alone: the reference the fast path is tested (and fuzzed) against.
Result<AllocationState> state_from_json_exact(const Cluster& cluster, std::string_view text, const std::string& file);

Result<AllocationState> load_state_file(const Cluster& cluster, const std::string& path);
Result<void> save_state_file(const AllocationState& state, const std::string& path);

// A state file as the engine's store (the CLI's `place`/`release` on --state): the jobs
// loaded from `load_path` (none when empty), and commit() applies a batch of the engine's
// mutations (placement/mutation.h: the records the service's stores commit) to them and
// rewrites `save_path` atomically; a failed commit (bad batch, node marks, write error)
// changes neither the jobs nor the file. The file keeps GPUs and job order, not the
// answers. The caller holds the StateFileLock of both paths. Not thread-safe.
class StateFileStore {
 public:
  static Result<StateFileStore> open(const Cluster& cluster, std::string load_path, std::string save_path);
  const AllocationState& state() const { return state_; }
  const std::string& save_path() const { return save_path_; }
  // The CommitFn of Engine::decide for this file.
  Result<void> commit(std::span<const Mutation> batch);

 private:
  StateFileStore(AllocationState state, std::string save_path)
      : state_(std::move(state)), save_path_(std::move(save_path)) {}
  AllocationState state_;
  std::string save_path_;
};

class StateFileLock {
 public:
  // Locks the directory of every non-empty path, in sorted order (no deadlock between two
  // processes naming the same files); blocks until all are held. kIo when a directory
  // cannot be opened or locked.
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
