// LeaderElection: which of several `toposched serve` replicas sharing one etcd prefix may
// decide. Replicas campaign for one key (PREFIX/leader) with an etcd lease (TTL a few
// seconds) kept alive by a background thread; the replica whose Txn created the key is the
// leader until its lease ends (crash: etcd expires it after the TTL; clean stop: revoked).
//
// Fencing. A leader's Term carries the leader key's create revision (unique per term: a
// later leader's key has a higher one) and `valid_until`, the instant this replica stops
// deciding: the send time of the last keep-alive etcd acknowledged, plus the TTL it granted,
// minus a guard. etcd cannot expire the lease before send time + TTL, so the old leader has
// stopped (term() returns nothing) before any other replica can create the key. Every store
// commit is a Txn that compares the leader key's create revision with the Term's and must
// finish before `valid_until` (its HTTP deadline), so a replica cut off from etcd can neither
// acknowledge after its term nor write after another leader's began.
//
// Thread-safety: start/stop/resign from the owner's thread; term(), leader() and
// is_running() from any thread (state behind mutex_). One background thread per instance.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "service/etcd_client.h"
#include "topology/mutex.h"

namespace toposched::service {

class LeaderElection {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::string key;                             // e.g. "/toposched/leader"
    std::string identity;                        // this replica as followers should name it (its URL)
    std::chrono::seconds ttl{3};                 // lease TTL (etcd raises it to its minimum, ~2 s)
    std::chrono::milliseconds poll{200};         // how often a follower looks for a free seat
  };
  // Proof of leadership for one term.
  struct Term {
    std::int64_t lease_id = 0;
    std::int64_t key_revision = 0;      // create revision of the leader key: the fencing token
    std::uint64_t generation = 0;       // counts this replica's terms (1, 2, ...): reload on change
    Clock::time_point valid_until{};    // stop deciding at this instant
  };

  LeaderElection(std::vector<EtcdEndpoint> endpoints, EtcdClient::Options client_options, Options options);
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Starts campaigning (idempotent).
  void start();
  // Resigns (revokes the lease, so a follower takes over at once) and stops the thread.
  void stop();
  // Gives up a term now (e.g. after a commit found the store changed under it); campaigns
  // again afterwards with a new lease.
  void resign();

  // The current term, if this replica leads and its term has not run out.
  std::optional<Term> term() const;
  // The leader as last seen: its identity, or empty when there is none, when etcd could not
  // be read at the last poll, or when the leader key was last read more than a TTL ago (a
  // replica cut off from etcd, whose loop may be stuck in a call, does not point at a leader
  // whose lease may have ended; this replica itself only while its term runs).
  std::string leader() const;
  // The last error talking to etcd, empty after a success (for /readyz and logs).
  std::string last_error() const;
  const Options& options() const { return options_; }

 private:
  void run();
  bool stop_requested() const EXCLUDES(mutex_);
  void sleep_until_next_poll() EXCLUDES(mutex_);
  void step(Clock::time_point now) EXCLUDES(mutex_);
  void keep_lease_alive(Clock::time_point now) EXCLUDES(mutex_);
  void campaign_or_watch(Clock::time_point now) EXCLUDES(mutex_);
  void drop_lease_locked() REQUIRES(mutex_);
  void note_error(const Error& e) EXCLUDES(mutex_);
  void lost_sight_of_etcd(const Error& e) EXCLUDES(mutex_);
  Clock::duration guard() const;
  Clock::duration call_budget() const;

  Options options_;
  EtcdClient client_;  // used by the background thread only (and stop/resign once it ended)

  mutable Mutex mutex_;
  CondVar wake_;  // stop / resign requests
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool resign_requested_ GUARDED_BY(mutex_) = false;
  std::int64_t lease_id_ GUARDED_BY(mutex_) = 0;  // 0 = none
  Clock::time_point lease_expiry_lb_ GUARDED_BY(mutex_);  // etcd keeps the lease at least until then
  Clock::time_point next_keepalive_ GUARDED_BY(mutex_);
  std::optional<Term> term_ GUARDED_BY(mutex_);  // set while leader
  std::uint64_t generation_ GUARDED_BY(mutex_) = 0;
  std::string leader_ GUARDED_BY(mutex_);
  Clock::time_point leader_seen_at_ GUARDED_BY(mutex_);  // when leader_ was last read from etcd
  std::string last_error_ GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace toposched::service
