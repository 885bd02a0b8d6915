// Scheduler: the placement Engine made durable: every decision that changes the state is
// committed to a Store before its caller gets an answer, and a restarted scheduler restores
// exactly the committed jobs.
//
// Group commit: submit() queues a command and waits; one writer thread takes every command
// queued so far (at most `max_batch`), decides them in order on the engine and commits the
// changing ones in ONE store transaction, then wakes their callers. Under load one fsync
// thus covers many decisions; no caller is answered before the commit that holds its
// decision returned, and a failed commit undoes the whole batch (each caller gets the error).
// Dry runs skip the queue: they decide on the engine directly and commit nothing.
//
// The store commits exactly the mutations the engine applied (placement/mutation.h): the
// scheduler translates nothing. open() binds the store to the cluster (name + SHA-256 of
// its native JSON spec; another cluster's store is refused) and restores its jobs with
// their GPUs in rank order and the exact place JSON the clients received, by applying the
// store's mutations (load_state) through Engine::replace.
//
// Thread-safety: submit(), dry_run() and every const method may be called from any thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "placement/engine.h"
#include "service/metrics.h"
#include "service/store.h"
#include "topology/mutex.h"

namespace toposched::service {

// Restores the store's jobs and node marks into the engine (start-up): the store's
// mutations (load_state) through Engine::replace; kValidation naming the job (or the node)
// when a record does not fit the cluster.
Result<void> restore_jobs(Engine& engine, Store& store);

// A check every batch of decisions passes before it is decided (HA: service/replication.h).
// enter() refuses the batch (each command gets the error, nothing is decided) or returns a
// lock that the writer holds until the batch is decided and committed; it may first bring
// the engine up to date. Called from the writer thread only.
class BatchGate {
 public:
  virtual ~BatchGate() = default;
  virtual Result<std::unique_lock<Mutex>> enter(Engine& engine) = 0;
};

class Replica;
struct ReplicaOptions;

class Scheduler {
 public:
  // `cluster` and `metrics` must outlive the scheduler. With `replication` and a store that
  // several replicas share, the store's replica (Store::replicate) gates every batch from
  // the first on: it is in place before the writer starts.
  static Result<std::unique_ptr<Scheduler>> open(const Cluster& cluster, std::unique_ptr<Store> store,
                                                 Metrics& metrics, std::size_t max_batch = 256,
                                                 const ReplicaOptions* replication = nullptr);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Decides the command and, when it changes the state, returns only after the decision
  // is durable. Errors: those of the engine, or the store's (kUnavailable, kIo).
  Result<Decision> submit(Command command);
  // Decides without holding or committing anything (POST /v1/jobs?dry_run=1).
  Result<Decision> dry_run(Command command);

  const Engine& engine() const { return engine_; }
  Store& store() { return *store_; }
  // For a BatchGate that refreshes the engine from a shared store (a follower's copy); any
  // other change goes through submit().
  Engine& mutable_engine() { return engine_; }
  // The replica gating the batches (a shared store opened with `replication`), or nullptr.
  const Replica* replica() const { return replica_.get(); }
  // Stops the writer after the queued commands were answered.
  void stop();

 private:
  struct Pending;
  Scheduler(const Cluster& cluster, std::unique_ptr<Store> store, Metrics& metrics, std::size_t max_batch);
  void writer_loop();
  // The CommitFn of the engine: the batch's mutations (its log records) to the store.
  Result<void> commit(std::span<const Mutation> batch);
  void count(const Result<Decision>& result);

  Engine engine_;
  std::unique_ptr<Store> store_;  // used by the writer thread only (and restore, before it starts)
  Metrics& metrics_;
  std::size_t max_batch_;
  Mutex mutex_;
  CondVar wake_;  // a command was queued, or stop() was called
  std::deque<Pending*> queue_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread writer_;
  // Set by open() before the writer starts and never changed: the writer reads it unlocked.
  // Destroyed before the store and the engine.
  std::shared_ptr<Replica> replica_;
};

}  // namespace toposched::service
