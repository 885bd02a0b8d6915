// Replication: what makes one `toposched serve` a replica among several on one etcd store.
//
// Leader: every batch of decisions passes enter() first (the Scheduler's BatchGate). It
// answers kUnavailable naming the leader when this replica does not lead; when this replica
// leads but its engine does not hold the state as of its current term (a new term, or a
// commit whose outcome is unknown), it reloads the engine from etcd first (linearizable
// read), so a new leader never decides on a stale copy. The store's Txn guard (leader key
// revision + data revision) fences anything that slips past.
// Follower: a background thread polls the store's data revision every `poll` (serializable
// read: works while etcd has no quorum) and, when it moved past the copy's revision, reloads
// the engine from etcd, so reads (GET /v1/jobs, /v1/fragmentation, ...) answer from a copy at
// most a poll behind. A copy never goes back: a replica that led keeps what it committed until
// etcd shows a newer revision. With etcd unreachable, or without quorum, the copy stays as it
// was; two replicas' copies may then differ by the last commits before quorum was lost (the
// surviving member cannot confirm them until quorum returns).
//
// Thread-safety: enter() from the scheduler's writer thread; role(), leader(), status()
// from any thread. decide_mutex_ serialises a batch (held from enter() to the end of its
// commit) against a follower reload.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "placement/engine.h"
#include "service/etcd_store.h"
#include "service/replica.h"
#include "topology/mutex.h"

namespace toposched::service {

class Replication final : public Replica {
 public:
  // `store` and `engine` must outlive this object; the store's election must be started.
  Replication(EtcdStore& store, Engine& engine, std::chrono::milliseconds poll = std::chrono::milliseconds(200));
  ~Replication() override;
  Replication(const Replication&) = delete;
  Replication& operator=(const Replication&) = delete;

  Result<std::unique_lock<Mutex>> enter(Engine& engine) override;

  bool leads() const override { return store_.election()->term().has_value(); }
  std::string leader() const override { return store_.election()->leader(); }
  // "this replica is not the leader; the leader is URL", or that no leader is known, with
  // etcd's last error.
  Error refusal() const override;
  // {"role","leader","etcd_error","data_revision"}.
  std::string status_json() const override;

 private:
  void follow_loop();
  void refresh_copy(std::int64_t data_revision) EXCLUDES(decide_mutex_);
  // The engine's state replaced by the store's rows, as mutations (state_mutations) through
  // Engine::replace: the same records and the same apply as the leader's commits.
  Result<void> reload(std::vector<JobRecord> jobs, std::vector<NodeMarkRecord> marks);

  EtcdStore& store_;
  Engine& engine_;
  std::chrono::milliseconds poll_;
  Mutex decide_mutex_;
  std::int64_t copy_revision_ GUARDED_BY(decide_mutex_) = -1;  // data revision of the copy (-1: the leader's, see EtcdStore::writer_revision)
  std::atomic<std::int64_t> seen_revision_{0};                  // last data revision polled (status only)
  StopSignal stop_;
  std::thread follower_;
};

}  // namespace toposched::service
