// Mutation: one change of an allocation state, the one record every writer of that state
// uses. The engine's deciding emits mutations (placement/engine.h), Engine::apply() applies
// them (the only function that changes the served state), the service's stores persist
// them (service/store.h: Store::commit writes a batch of them in one transaction), and
// restore, an HA follower's reload, the undo of a failed commit and the CLI's state file
// (placement/state_file.h) are lists of them too. What is applied, what is written and
// what is replayed are therefore one thing, as LevelDB's WriteBatch is both its log record
// and what recovery replays.
//
// A mutation names GPUs and nodes by id in one cluster; a store writes them as names
// ("node:index", node names), so its rows read without the ids and a store refuses to be
// opened for another cluster (Store::bind_cluster).
//
// A plain value: no invariants beyond the per-kind members below; thread-safe as any value.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "placement/node_availability.h"
#include "topology/cluster.h"

namespace toposched {

struct Mutation {
  enum class Kind {
    kPlace,       // job_id holds gpus_by_rank (request_json, answer_json, created_unix_ms, order)
    kRelease,     // job_id's GPUs are freed; only job_id is read
    kMarkNode,    // node's mark by mark.source becomes `mark` (replacing that source's earlier one)
    kUnmarkNode,  // node's mark by mark.source is lifted (none there: nothing to lift, not an error)
  };
  Kind kind = Kind::kPlace;
  std::string job_id{};
  std::vector<GpuId> gpus_by_rank{};  // kPlace
  std::string request_json{};         // kPlace: the request as the engine normalised it (a store keeps it)
  std::string answer_json{};          // kPlace: the `place` JSON the client received (what readers get)
  // kPlace: when the job was placed; 0 = the time of the commit that writes it (a store
  // stamps it; the engine does not read it).
  std::int64_t created_unix_ms = 0;
  // kPlace: the job's position in the job order (AllocationState::job_order); 0 = after
  // every job. Only the engine's undo sets it (the inverse of a release puts the job back
  // at its old position); a store keeps commit order and does not persist it.
  std::uint64_t order = 0;
  NodeId node{};    // kMarkNode, kUnmarkNode
  NodeMark mark{};  // kMarkNode: the mark; kUnmarkNode: only mark.source is read

  // The two job records, so that every writer fills the same members.
  static Mutation place_of(std::string job_id, std::vector<GpuId> gpus_by_rank, std::string answer_json = {},
                           std::uint64_t order = 0) {
    Mutation m;
    m.kind = Kind::kPlace;
    m.job_id = std::move(job_id);
    m.gpus_by_rank = std::move(gpus_by_rank);
    m.answer_json = std::move(answer_json);
    m.order = order;
    return m;
  }
  static Mutation release_of(std::string job_id) {
    Mutation m;
    m.kind = Kind::kRelease;
    m.job_id = std::move(job_id);
    return m;
  }
};

}  // namespace toposched
