#include "service/replication.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "service/scheduler.h"

namespace toposched::service {

Replication::Replication(EtcdStore& store, Engine& engine, std::chrono::milliseconds poll)
    : store_(store), engine_(engine), poll_(poll) {
  follower_ = std::thread([this] { follow_loop(); });
}

Replication::~Replication() {
  stop_.request();
  if (follower_.joinable()) follower_.join();
}

Error Replication::refusal() const {
  const std::string leader = this->leader();
  if (!leader.empty())
    return Error{ErrorCode::kUnavailable, fmt::format("this replica is not the leader; the leader is {}", leader), {}};
  const std::string why = store_.election()->last_error();
  return Error{ErrorCode::kUnavailable,
               fmt::format("no leader: etcd ({}) is unreachable or has no quorum{}", store_.url().prefix,
                           why.empty() ? std::string() : "; last error: " + why),
               {}};
}

std::string Replication::status_json() const {
  const bool leading = leads();
  return nlohmann::json{{"role", leading ? "leader" : "follower"},
                        {"leader", leader()},
                        {"etcd_error", store_.election()->last_error()},
                        {"data_revision", seen_revision_.load()},
                        {"jobs", engine_.job_count()}}
      .dump();
}

Result<void> Replication::reload(std::vector<JobRecord> jobs, std::vector<NodeMarkRecord> marks) {
  TOPOSCHED_TRY(state, state_mutations(engine_.cluster(), std::move(jobs), std::move(marks)));
  return engine_.replace(state);
}

Result<std::unique_lock<Mutex>> Replication::enter(Engine&) {
  std::unique_lock lock(decide_mutex_);  // handed to the scheduler: held until the batch is committed
  decide_mutex_.assert_held();           // (the analysis does not follow std::unique_lock)
  auto term = store_.election()->term();
  if (!term) return tl::unexpected(refusal());
  if (!store_.loaded_in(term->generation)) {
    TOPOSCHED_TRY(jobs, store_.load_jobs());
    TOPOSCHED_TRY(marks, store_.load_node_marks());
    TOPOSCHED_CHECK(reload(std::move(jobs), std::move(marks)));
    copy_revision_ = -1;  // when this replica follows again, its copy is as new as its last commit
    spdlog::info("replica {}: leads (term {}), {} jobs loaded from etcd", store_.election()->options().identity,
                 term->generation, engine_.job_count());
  }
  return lock;
}

void Replication::follow_loop() {
  while (!stop_.sleep_for(poll_)) {
    auto rev = store_.data_revision();
    if (rev) seen_revision_ = *rev;
    if (rev && !leads()) refresh_copy(*rev);
  }
}

// A follower's reload, when the store's data moved since its copy was taken.
void Replication::refresh_copy(std::int64_t data_revision) {
  MutexLock lock(decide_mutex_);
  if (leads()) return;
  // A copy made while leading is as new as the leader's last load or commit. Only a newer
  // revision replaces a copy: a serializable read may come from a member that lags (or, with
  // no quorum, from one that cannot yet confirm the last commits), and a reload from it would
  // take acknowledged changes back out of this replica's answers.
  if (copy_revision_ < 0) copy_revision_ = store_.writer_revision();
  if (data_revision <= copy_revision_) return;
  auto jobs = store_.load_jobs_local();
  auto marks = jobs ? store_.load_node_marks_local() : Result<std::vector<NodeMarkRecord>>{};
  auto ok = !jobs    ? Result<void>(tl::unexpected(jobs.error()))
            : !marks ? Result<void>(tl::unexpected(marks.error()))
                     : reload(std::move(*jobs), std::move(*marks));
  if (ok)
    copy_revision_ = data_revision;
  else
    spdlog::warn("replica: cannot refresh the copy from etcd: {}", ok.error().message);
}

}  // namespace toposched::service
