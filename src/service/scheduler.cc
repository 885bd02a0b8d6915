#include "service/scheduler.h"

#include <chrono>
#include <future>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "service/replica.h"
#include "topology/hostlist.h"

namespace toposched::service {

namespace {
// "N on HOSTLIST" for the log line of a mutation.
std::string gpu_summary(const Cluster& c, std::span<const GpuId> gpus) {
  std::vector<std::string> nodes;
  for (GpuId g : gpus) {
    const std::string& n = c.node_name(c.gpu_node(g));
    if (nodes.empty() || nodes.back() != n) nodes.push_back(n);
  }
  return fmt::format("{} nodes={}", gpus.size(), compress_hostlist(nodes));
}

// The log line of a decision that changed the state.
void log_decision(const Cluster& c, const Decision& d, std::size_t batch_size) {
  if (d.kind == Command::Kind::kSetNodeAvailability) {
    if (d.availability.available)
      spdlog::info("node {} available again for source {} batch={}", d.availability.node, d.availability.source,
                   batch_size);
    else
      spdlog::info("node {} unavailable: {}: {} batch={}", d.availability.node, d.availability.source,
                   d.availability.reason, batch_size);
    return;
  }
  spdlog::info("{} job={} decide_us={:.0f} gpus={} batch={}", d.kind == Command::Kind::kPlace ? "place" : "release",
               d.job_id, d.decide_us, gpu_summary(c, d.gpus_by_rank), batch_size);
}
}  // namespace

struct Scheduler::Pending {
  Command command;
  std::promise<Result<Decision>> answer;
};

Result<void> restore_jobs(Engine& engine, Store& store) {
  TOPOSCHED_TRY(state, load_state(store, engine.cluster()));
  if (auto ok = engine.replace(state); !ok)
    return make_error(ErrorCode::kValidation, fmt::format("store: {}", ok.error().message));
  return {};
}

Scheduler::Scheduler(const Cluster& cluster, std::unique_ptr<Store> store, Metrics& metrics, std::size_t max_batch)
    : engine_(cluster, AllocationState(cluster)),
      store_(std::move(store)),
      metrics_(metrics),
      max_batch_(max_batch == 0 ? 1 : max_batch) {}

Result<std::unique_ptr<Scheduler>> Scheduler::open(const Cluster& cluster, std::unique_ptr<Store> store,
                                                   Metrics& metrics, std::size_t max_batch,
                                                   const ReplicaOptions* replication) {
  TOPOSCHED_CHECK(store->bind_cluster(cluster));
  max_batch = std::min(max_batch, store->max_batch());
  std::unique_ptr<Scheduler> s(new Scheduler(cluster, std::move(store), metrics, max_batch));
  TOPOSCHED_CHECK(restore_jobs(s->engine_, *s->store_));
  if (replication) s->replica_ = s->store_->replicate(*replication, s->engine_);
  s->writer_ = std::thread([p = s.get()] { p->writer_loop(); });
  return s;
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
}

Result<Decision> Scheduler::submit(Command command) {
  Pending pending{std::move(command), {}};
  auto answer = pending.answer.get_future();
  {
    MutexLock lock(mutex_);
    if (stopping_) return make_error(ErrorCode::kUnavailable, "the server is shutting down");
    queue_.push_back(&pending);
  }
  wake_.notify_one();
  return answer.get();
}

Result<Decision> Scheduler::dry_run(Command command) {
  command.dry_run = true;
  auto result = engine_.decide_one(command, nullptr);
  count(result);
  return result;
}

Result<void> Scheduler::commit(std::span<const Mutation> batch) {
  auto start = std::chrono::steady_clock::now();
  auto ok = store_->commit(batch);
  metrics_.observe_commit(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                          batch.size());
  return ok;
}

void Scheduler::count(const Result<Decision>& r) {
  if (r && r->kind == Command::Kind::kSetNodeAvailability) return;  // not a placement attempt
  if (r) {
    metrics_.observe_decision(r->decide_us * 1e-6);
    metrics_.count_attempt(r->dry_run ? "dry_run" : r->kind == Command::Kind::kPlace ? "placed" : "released");
    return;
  }
  switch (r.error().code) {
    case ErrorCode::kInfeasible: metrics_.count_attempt("infeasible"); break;
    case ErrorCode::kConflict: metrics_.count_attempt("conflict"); break;
    case ErrorCode::kNotFound: metrics_.count_attempt("not_found"); break;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kValidation: metrics_.count_attempt("invalid"); break;
    case ErrorCode::kUnavailable: metrics_.count_attempt("unavailable"); break;
    default: metrics_.count_attempt("error"); break;
  }
}

void Scheduler::writer_loop() {
  std::vector<Pending*> batch;
  std::vector<Command> commands;
  while (true) {
    batch.clear();
    {
      MutexLock lock(mutex_);
      while (!stopping_ && queue_.empty()) wake_.wait(mutex_);
      if (queue_.empty()) return;  // stopping, nothing left to answer
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    std::unique_lock<Mutex> gate_lock;
    if (replica_) {
      auto entered = replica_->enter(engine_);
      if (!entered) {
        for (Pending* p : batch) {
          Result<Decision> refused = tl::unexpected(entered.error());
          count(refused);
          p->answer.set_value(std::move(refused));
        }
        continue;
      }
      gate_lock = std::move(*entered);
    }
    commands.clear();
    for (Pending* p : batch) commands.push_back(std::move(p->command));
    auto results = engine_.decide(commands, [this](std::span<const Mutation> m) { return commit(m); });
    for (std::size_t i = 0; i < batch.size(); ++i) {
      count(results[i]);
      if (results[i] && !results[i]->dry_run && results[i]->changed)
        log_decision(engine_.cluster(), *results[i], batch.size());
      batch[i]->answer.set_value(std::move(results[i]));
    }
  }
}

}  // namespace toposched::service
