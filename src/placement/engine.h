// Engine: the one entry point through which every front end (the CLI's `place`/`release`,
// `toposched serve`, the Kubernetes extender, Slurm's job_submit) changes an allocation
// state, and the JSON those front ends answer with.
//
// The place transaction: job id (the first free `job-N` when none is given), duplicate
// check (kConflict), normalise, place with the policy (check_placement included), allocate.
// Requests arrive as PlaceRequest (a JobRequest plus the policy name), parsed from the same
// JSON keys the CLI's flags use (place_request_from_json); answers are the `place` JSON
// (placement_to_json) and the `release` JSON.
//
// Decisions are applied in batches (decide()): each command of a batch is decided on the
// state, then its mutations (placement/mutation.h, the engine's log record) applied
// (apply()), so it sees the effect of the ones before it; `commit` is then called once
// with the batch's mutations, with the writer lock held (the service's store persists
// exactly these records: Store::commit), and the
// batch becomes visible to readers only when `commit` succeeded. When it fails, the
// inverse of the batch's changes is applied in reverse order (through apply(), like every
// other change), leaving the state and the job order exactly as before, and each command
// gets the commit's error.
// This lets the service group several decisions into one durable store transaction and
// never acknowledge (or show) a decision before it is on stable storage.
//
// Node availability (placement/node_availability.h) is engine state like the jobs: a
// kSetNodeAvailability command decides a kMarkNode or kUnmarkNode mutation, committed, logged and undone the
// same way. Every placement with a policy (not a job held where another scheduler put it)
// is confined to the available nodes, within the request's own node mask.
//
// Thread-safety: Engine is safe to use from any number of threads. Decisions are
// serialised (one writer at a time, as kube-scheduler and slurmctld do): decide() holds the
// exclusive lock while it decides and commits a batch. Reads (read(), jobs_json(),
// job_json()) take the shared lock on a consistent, committed state and hold it only while
// they copy or compute their answer, so they delay a decision by at most that long (and
// wait at most one batch's decide + commit). The free functions are pure and thread-safe on distinct states.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/allocation_state.h"
#include "placement/job_request.h"
#include "placement/job_schema.h"
#include "placement/mutation.h"
#include "placement/node_availability.h"
#include "placement/placement.h"
#include "topology/mutex.h"

namespace toposched {

// Parses the place options given as JSON keys (the body of POST /v1/jobs): one key per
// row of the job-request schema (placement/job_schema.h: the same names, types and bounds
// as `toposched place`'s flags; "workload" is read as "kind"). Unknown keys, wrong types,
// values outside a row's bounds and job ids that cannot travel in a URL path are
// kInvalidArgument errors naming the key.
Result<PlaceRequest> place_request_from_json(const nlohmann::json& body);
// The request as JSON with the same keys, in the schema's order, defaults left out (what
// the store keeps beside a job).
nlohmann::ordered_json place_request_to_json(const PlaceRequest& request);

// The `place` JSON: {"job","policy","gpus":[{"node","gpu","rank"}],"nodes",
// "predicted_comm_us",...} (DESIGN.md contract).
nlohmann::ordered_json placement_to_json(const Cluster& cluster, const Placement& placement);
// "node:index" of a GPU, and its inverse (kInvalidArgument naming what is wrong).
std::string gpu_name(const Cluster& cluster, GpuId gpu);
Result<GpuId> parse_gpu(const Cluster& cluster, std::string_view text);

// The place transaction on `state`: fills an empty job id with the first free job-N,
// refuses an id in use (kConflict), normalises, places within the request's node mask and
// off its blocked GPUs (aligned to Slurm's GPU choice when the request asks:
// placement/slurm_alignment.h); with `hold` it also allocates.
// Errors: kInvalidArgument (bad request, unknown policy), kConflict, kInfeasible (the
// message names the job and the policy and says why). The simulator's placer calls it with
// PlaceDetail::kGpusOnly: the same decision as the CLI's, without the description.
Result<Placement> place_job(AllocationState& state, const PlaceRequest& request, bool hold,
                            PlaceDetail detail = PlaceDetail::kFull);

// One change asked of the engine.
struct Command {
  enum class Kind { kPlace, kRelease, kSetNodeAvailability };
  Kind kind = Kind::kPlace;
  PlaceRequest place;   // kPlace
  bool dry_run = false; // kPlace: decide, hold nothing, commit nothing
  // kPlace: when not empty, hold exactly these GPUs (rank order) for place.job.job_id instead
  // of asking a policy: a job another scheduler already placed (serve --slurm mirrors Slurm's).
  std::vector<GpuId> hold_gpus;
  // kPlace: kGpusOnly skips the description (explanation, predicted times) for a caller that
  // reads only the GPUs (the Kubernetes extender); the decision is the same.
  PlaceDetail detail = PlaceDetail::kFull;
  // kPlace with dry_run only: decide as if these jobs held no GPUs (preemption's what-if:
  // would the job fit once they are gone?). Unknown ids free nothing. The state is unchanged.
  std::vector<std::string> assume_released;
  // kPlace with a policy: marks by this source do not exclude a node. For a caller that has
  // already filtered the nodes on the same facts, fresher: kube-scheduler offers the
  // extender only nodes that pass its own filters, so a node it offers the moment it is
  // uncordoned must not wait for the lifecycle controller's "k8s" mark to be lifted.
  std::string caller_judges_source;
  std::string job_id;   // kRelease
  NodeAvailabilityChange availability;  // kSetNodeAvailability
};

// What the engine decided for one command.
struct Decision {
  Command::Kind kind = Command::Kind::kPlace;
  bool dry_run = false;
  std::string job_id;
  std::vector<GpuId> gpus_by_rank;  // placed, or released (in rank order)
  std::string request_json;         // kPlace: the request as normalised keys
  std::string answer_json;          // the `place` JSON, or the `release` JSON (kSetNodeAvailability: none)
  double decide_us = 0;             // time spent deciding (not committing)
  // kSetNodeAvailability: the change asked, and the mark's time (kept from the source's
  // earlier mark when it only changes the reason). `changed` is false when the node already
  // was as asked: nothing to commit (the request is idempotent).
  NodeAvailabilityChange availability;
  std::int64_t since_unix_ms = 0;
  bool changed = true;
};

// Called once per batch, with the writer lock held, on the mutations the batch's decisions
// applied, in order (dry runs and idempotent node changes emit none): the log records to
// make durable (Store::commit, StateFileStore::commit). The batch is published only when it
// returns success.
using CommitFn = std::function<Result<void>(std::span<const Mutation>)>;

// A node mark as the engine holds it (Engine::node_marks).
struct StoredNodeMark {
  NodeId node;
  NodeMark mark;
};

// What GET /metrics reports of unavailable nodes: how many, and how many jobs hold GPUs on one.
struct UnavailableSummary {
  std::int64_t nodes = 0;
  std::int64_t jobs_on_them = 0;
};

class Engine {
 public:
  // `cluster` must outlive the engine; `state` is the starting allocation (its jobs get
  // their `place` JSON rebuilt from the GPUs; replace() gives the exact JSON a store kept).
  Engine(const Cluster& cluster, AllocationState state);

  const Cluster& cluster() const { return *cluster_; }

  // Decides every command in order on the current state, commits the changing ones with
  // `commit` (may be empty: nothing to make durable), publishes them, returns one result
  // per command.
  std::vector<Result<Decision>> decide(std::span<const Command> commands, const CommitFn& commit);
  Result<Decision> decide_one(const Command& command, const CommitFn& commit);

  // Applies the mutations in order, all or nothing: when one fails (a GPU already owned, an
  // unknown job), the inverse of those before it is applied and the error returned, so the
  // state and the job order are as before the call. The only function that changes the
  // allocation state; decide() calls it for each decision and, when the commit fails, with
  // the inverse of the batch; replace() with a store's content.
  Result<void> apply(std::span<const Mutation> mutations);

  // Replaces every job and every node mark with the state `mutations` build (kPlace and
  // kMarkNode records: a store's content, service/store.h load_state): the release of
  // every job and the lift of every mark, then `mutations`, in one all-or-nothing apply
  // under the writer lock, so readers see the old or the new state, never a mix. Start-up
  // restore (on an empty engine) and an HA replica refreshing its copy both use it. On
  // error (a job that does not fit) nothing changes.
  Result<void> replace(std::span<const Mutation> mutations);

  // Runs `fn` on the committed state under the shared lock (keep it short).
  template <class Fn>
  auto read(Fn&& fn) const {
    ReaderLock lock(mutex_);
    return fn(static_cast<const AllocationState&>(state_));
  }
  // {"jobs":[the `place` JSON of every job, in allocation order]}, byte-stable. A job holding
  // GPUs on an unavailable node also has "unavailable_nodes":[{"node","reason"}] (reason as
  // NodeAvailability::reasons) as its last key; other jobs are exactly as placed.
  std::string jobs_json() const;
  std::optional<std::string> job_json(std::string_view job_id) const;
  // {"nodes":[node JSON, ...]} in node order; one node's JSON: {"node","available",
  // "unavailable":[{"source","reason","since_unix_ms"}],"gpus","free_gpus","jobs":[ids]}.
  std::string nodes_json() const;
  std::optional<std::string> node_json(std::string_view node) const;
  UnavailableSummary unavailable_summary() const;
  // The marks `source` holds, in node order (serve --slurm's sync compares Slurm's view
  // with the marks of source "slurm").
  std::vector<StoredNodeMark> node_marks(std::string_view source) const;
  std::size_t job_count() const;
  std::int64_t free_gpus() const;

 private:
  // Decides one command on the current state without changing it; `change` gets what
  // applying the decision does (nothing for a dry run), `inverse` what undoes it.
  Result<Decision> decide_command(const Command& command, std::vector<Mutation>& change,
                                  std::vector<Mutation>& inverse) const REQUIRES(mutex_);
  Result<Decision> decide_availability(const Command& command, std::vector<Mutation>& change,
                                       std::vector<Mutation>& inverse) const REQUIRES(mutex_);
  Result<void> apply_locked(std::span<const Mutation> changes) REQUIRES(mutex_);
  Result<void> apply_one(const Mutation& change) REQUIRES(mutex_);
  Mutation inverse_of(const Mutation& change) const REQUIRES(mutex_);

  const Cluster* cluster_;
  mutable SharedMutex mutex_;
  AllocationState state_ GUARDED_BY(mutex_);
  std::unordered_map<std::string, std::string> answers_ GUARDED_BY(mutex_);  // job -> place JSON
  NodeAvailability availability_ GUARDED_BY(mutex_);
};

}  // namespace toposched
