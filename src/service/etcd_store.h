// EtcdStore: the Store kept in an etcd v3 cluster, for several `toposched serve` replicas
// (HA). URL: etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (PREFIX defaults to /toposched).
//
// Keys under PREFIX:
//   PREFIX/cluster        {"name","digest"}: the cluster the jobs belong to
//   PREFIX/leader         the leading replica's identity, attached to its lease (LeaderElection)
//   PREFIX/seq            the last event sequence number (decimal); its mod revision is the
//                         store's data revision
//   PREFIX/jobs/<id>      a JobRecord as JSON (with its place event's seq: commit order)
//   PREFIX/node-marks/<source>/<node>   a NodeMarkRecord as JSON
//   PREFIX/events/<seq>   a StoreEvent as JSON, seq zero-padded to 20 digits; the newest
//                         event_log_limit() of them (default kDefaultEventLogLimit)
//
// Every commit() is ONE etcd Txn, acknowledged only after etcd applied it (a quorum has it in
// its WAL). It succeeds only if (1) the leader key still has the create revision of this
// replica's term (fencing: a deposed leader's Txn fails), (2) PREFIX/seq has the revision
// this replica last loaded or wrote (nobody wrote behind its back), (3) each placed id is
// absent and each released id present. Its deadline is the end of the term, so a replica
// cut off from etcd gives up before another can lead.
//
// Leadership: a store opened with open_etcd_store() has a LeaderElection that is not started;
// call start_election(identity, ttl) to campaign. commit() answers kUnavailable unless this
// replica leads and has called load_jobs() during its current term (a new leader reloads
// before it decides). bind_cluster, load_jobs, events and data_revision work on any replica.
// At most kMaxBatch mutations per commit (etcd's default limit of 128 operations per Txn).
//
// Thread-safety: commit/bind_cluster/load_jobs from one thread at a time (the writer);
// data_revision, events, leader() and election() may be called from any thread.
#pragma once

#include <memory>
#include <mutex>

#include "service/etcd_client.h"
#include "service/leader_election.h"
#include "service/store.h"

namespace toposched::service {

struct EtcdStoreUrl {
  std::vector<EtcdEndpoint> endpoints;
  std::string prefix = "/toposched";  // no trailing '/'
};

// Parses "etcd://H:P[,H:P...][/PREFIX]"; errors name what was expected.
Result<EtcdStoreUrl> parse_etcd_store_url(std::string_view url);

class EtcdStore final : public Store {
 public:
  static constexpr std::size_t kMaxBatch = 60;
  // The newest events kept by default: about 50 MB of etcd's default 2 GB quota.
  static constexpr std::int64_t kDefaultEventLogLimit = 100'000;

  EtcdStore(EtcdStoreUrl url, EtcdClient::Options options);
  ~EtcdStore() override;

  std::string_view kind() const override { return "etcd"; }
  Result<void> bind_cluster(const Cluster& cluster) override;
  Result<std::vector<JobRecord>> load_jobs() override;
  Result<std::vector<NodeMarkRecord>> load_node_marks() override;
  Result<void> commit(std::span<const Mutation> batch) override;
  Result<std::vector<StoreEvent>> events(std::int64_t after_seq, std::size_t limit) override;
  std::size_t max_batch() const override { return kMaxBatch; }
  std::shared_ptr<Replica> replicate(const ReplicaOptions& options, Engine& engine) override;

  // Starts campaigning for leadership as `identity` (what followers report as the leader's
  // address, e.g. "http://127.0.0.1:7070").
  void start_election(std::string identity, std::chrono::seconds ttl);
  LeaderElection* election() { return election_.get(); }
  // The mod revision of PREFIX/seq (0: nothing committed yet), read from the nearest member
  // without a quorum round (serializable): cheap enough to poll, may lag by a moment.
  Result<std::int64_t> data_revision();
  // The load_jobs() that a follower runs to refresh its copy, read serializably so that it
  // works while etcd has no quorum (possibly stale).
  Result<std::vector<JobRecord>> load_jobs_local();
  Result<std::vector<NodeMarkRecord>> load_node_marks_local();
  const EtcdStoreUrl& url() const { return url_; }
  // Whether the writer's view is current for term `generation`: load_jobs() ran during it
  // and no commit since has had an unknown outcome or found the store changed. When not,
  // the writer reloads (load_jobs) before it decides.
  bool loaded_in(std::uint64_t generation) const { return loaded_ && loaded_generation_ == generation; }
  // The data revision (see data_revision()) of the writer's view: what its last load or
  // successful commit saw (0: nothing yet). A replica that stops leading keeps a copy of
  // this age; a follower's poll compares against it so that a copy never goes back in time.
  // Writer's view: call from the writer thread or under the lock that serialises it with
  // the writer (Replication's decide_mutex_).
  std::int64_t writer_revision() const { return seq_mod_revision_; }

 private:
  Result<void> bind_digest(std::string_view cluster_name, std::string_view spec_digest);
  Result<std::vector<JobRecord>> load(bool serializable);
  Result<std::vector<NodeMarkRecord>> load_marks(bool serializable);
  Result<void> diagnose_failed_commit(const EtcdTxnResult& r, const LeaderElection::Term& term,
                                      const std::vector<std::pair<std::string, bool>>& ids);
  std::string key(std::string_view suffix) const { return url_.prefix + "/" + std::string(suffix); }

  EtcdStoreUrl url_;
  EtcdClient::Options options_;
  EtcdClient client_;        // writer and readers (serialised inside)
  EtcdClient reader_;        // data_revision/events, so a poll never waits behind a commit
  std::unique_ptr<LeaderElection> election_;  // created by start_election

  // The writer's view; only the writer thread touches these.
  bool loaded_ = false;
  std::uint64_t loaded_generation_ = 0;  // the term during which load_jobs ran (0: none)
  std::int64_t seq_ = 0;                 // last event seq committed
  std::int64_t seq_mod_revision_ = 0;    // mod revision of PREFIX/seq as last seen (0: absent)
  // No event below this seq is left (0: not known yet). A trim deletes the range from here,
  // not from seq 0: etcd walks its key index through every key deleted since the last
  // compaction that lies in a deleted range, so a range from 0 got slower with every commit.
  std::int64_t events_trimmed_below_ = 0;
};

// open_store's "etcd://" row: `rest` is the URL after "etcd://" (HOST:PORT,.../PREFIX).
Result<std::unique_ptr<Store>> open_etcd_store(std::string_view rest);

}  // namespace toposched::service
