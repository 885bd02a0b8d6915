// Store: where `toposched serve` keeps its allocation state durably, so a restarted (or
// another, in HA) server restores exactly the jobs whose placement it acknowledged.
//
// A store holds: the cluster it belongs to (name and spec digest), the live jobs with their
// GPUs in rank order plus the request and the answer as JSON, the node marks (a node made
// unavailable by a source, placement/node_availability.h), and an append-only event log.
// Every change goes through commit(): one call = one atomic, durable transaction (SQLite:
// WAL + synchronous=FULL; etcd: one Txn guarded by the leader's lease). A commit that
// returns success is on stable storage; one that fails has changed nothing. The server
// acknowledges a mutation only after its commit returned (group commits batch several
// mutations into one commit(), never acknowledge before it).
//
// What a store commits is the engine's own log record, placement/mutation.h: the exact
// mutations Engine::decide applied hand to its commit function, written as rows (GPUs and
// nodes by name, so a store binds to its cluster first: bind_cluster). What it loads goes
// back to the engine as mutations too (load_state, then Engine::replace), at start-up and
// when an HA follower refreshes its copy. The rows' format is unchanged since the store's
// first version: JobRecord and NodeMarkRecord below are those rows.
//
// Implementations: SQLite (sqlite_store.h, the default) and etcd (etcd_store.h, for HA).
// Open one with open_store("sqlite:PATH" | "etcd://H:P,.../PREFIX").
//
// Thread-safety: the server calls a Store from one writer thread at a time (decisions are
// serialised); load/events may run on other threads only where an implementation says so.
#pragma once

#include <cstdint>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placement/mutation.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {
class Engine;
}

namespace toposched::service {

class Replica;
struct ReplicaOptions;

// One placed job as the store keeps it: the row a kPlace mutation writes (job_record).
struct JobRecord {
  std::string id;
  std::vector<std::string> gpus_by_rank;  // "node:index", rank order
  std::string request_json;               // the request as the engine normalised it
  std::string placement_json;             // the `place` JSON the client received
  std::int64_t created_unix_ms = 0;
};

// One source's mark on one node, as the store keeps it (key: node and source): the row a
// kMarkNode mutation writes (node_mark_record).
struct NodeMarkRecord {
  std::string node;
  std::string source;
  std::string reason;
  std::int64_t since_unix_ms = 0;
};

// One line of the event log (sequence numbers increase by commit order, gaps allowed).
struct StoreEvent {
  std::int64_t seq = 0;
  std::string kind;  // "place" | "release" | "mark-node" | "unmark-node"
  std::string job_id;  // the job; for node events the node
  std::string body_json;
  std::int64_t unix_ms = 0;
};

class Store {
 public:
  virtual ~Store() = default;
  // "sqlite" or "etcd".
  virtual std::string_view kind() const = 0;
  // A store that is empty records the cluster (its name and cluster_digest); one that holds
  // another digest is refused (kValidation, naming both clusters) so jobs are never restored
  // onto the wrong cluster. The store keeps `cluster` (which must outlive it) to name the
  // GPUs and nodes of the mutations it commits; commit() before a successful bind is
  // kInvalidArgument.
  virtual Result<void> bind_cluster(const Cluster& cluster) = 0;
  // Every live job, in commit order. A record that does not read as one (another writer
  // corrupted it) is kParse naming its place: "etcd key /p/jobs/a:1:9: ..." or
  // "state.db (job 'a', column gpus):1:9: ...", never a job with made-up values.
  virtual Result<std::vector<JobRecord>> load_jobs() = 0;
  // Every node mark, ordered by node and source.
  virtual Result<std::vector<NodeMarkRecord>> load_node_marks() = 0;
  // Writes the mutations in one durable transaction, in order: all or nothing (kPlace: the
  // job_record row, created_unix_ms 0 stamped with the commit's time; kRelease: the row
  // deleted; kMarkNode / kUnmarkNode: the node_mark_record row set or deleted; each one
  // event). Errors: kConflict (placing an id that exists, releasing one that does not),
  // kUnavailable (store not reachable, or, in HA, this replica is no longer the leader),
  // kInvalidArgument (not bound to a cluster), kIo.
  virtual Result<void> commit(std::span<const Mutation> batch) = 0;
  // Event log entries with seq > after_seq, oldest first, at most `limit`.
  virtual Result<std::vector<StoreEvent>> events(std::int64_t after_seq, std::size_t limit) = 0;
  // Most mutations one commit() accepts (etcd: its per-Txn operation limit); the scheduler's
  // group commits stay within it.
  virtual std::size_t max_batch() const { return SIZE_MAX; }
  // For a store several replicas share (etcd): starts campaigning as options.advertise and
  // returns the replica that gates `engine`'s decisions (service/replica.h); the store and
  // the engine must outlive it. A store one server uses alone answers nullptr.
  virtual std::shared_ptr<Replica> replicate(const ReplicaOptions& options, Engine& engine);
  // How many of the newest events the log keeps: the commit that pushes an event out of the
  // window deletes it in the same transaction, so a service that runs for months keeps a
  // bounded log. 0 keeps every event. Each kind sets its default (SQLite every event; etcd,
  // whose whole keyspace lives in a size-capped database, EtcdStore::kDefaultEventLogLimit). Set it
  // before the first commit, from the writer's thread.
  void set_event_log_limit(std::int64_t keep) { event_log_limit_ = keep < 0 ? 0 : keep; }
  std::int64_t event_log_limit() const { return event_log_limit_; }

 protected:
  // kInvalidArgument unless bind_cluster succeeded (commit's first check).
  Result<void> check_bound() const;
  std::int64_t event_log_limit_ = 0;
  const Cluster* cluster_ = nullptr;  // set by a successful bind_cluster
};

// "sha256:<hex>" of the cluster's native JSON spec (less what decides no placement:
// write_native_json_identity): the same for the same cluster however it was given (preset,
// YAML, JSON).
std::string cluster_digest(const Cluster& cluster);

// The row a kPlace mutation writes (GPUs as "node:index" in rank order; a created_unix_ms
// of 0 becomes `now_unix_ms`), and the one a kMarkNode / kUnmarkNode mutation sets or
// deletes. Pure.
JobRecord job_record(const Cluster& cluster, const Mutation& place, std::int64_t now_unix_ms);
NodeMarkRecord node_mark_record(const Cluster& cluster, const Mutation& mark);

// The mutations that rebuild what the rows hold: one kPlace per job in commit order (GPUs
// in rank order, the request, the exact answer JSON, the creation time), then one kMarkNode
// per mark. kValidation naming the job ("store job 'a': no node named ...") or the mark
// when a row does not fit the cluster.
Result<std::vector<Mutation>> state_mutations(const Cluster& cluster, std::vector<JobRecord> jobs,
                                              std::vector<NodeMarkRecord> marks);
// state_mutations of everything `store` holds (load_jobs, load_node_marks).
Result<std::vector<Mutation>> load_state(Store& store, const Cluster& cluster);

// The table open_store() chooses from (store.cc), in the table style of formats/exporter.cc:
// a new kind of store adds one row {prefix, description, open function} there, e.g.
// {"etcd://", "...", open_etcd_store}, with open_etcd_store in its own etcd_store.cc.
struct StoreScheme {
  std::string_view prefix;       // "sqlite:", "etcd://"
  std::string_view description;  // one line for error messages and --help
  Result<std::unique_ptr<Store>> (*open)(std::string_view rest);  // rest = url after prefix
};
const std::vector<StoreScheme>& store_schemes();

// Opens the store named by `url`: "sqlite:PATH" or "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]";
// kInvalidArgument listing the known kinds for any other URL.
Result<std::unique_ptr<Store>> open_store(std::string_view url);

}  // namespace toposched::service
