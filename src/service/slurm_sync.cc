#include "service/slurm_sync.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "service/component.h"
#include "service/http.h"
#include "slurm/slurm_commands.h"
#include "slurm/sync.h"

namespace toposched::service {

namespace {
long long now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

SlurmSync::SlurmSync(const Cluster& cluster, Scheduler& scheduler, double interval_s, double grace_s)
    : cluster_(cluster), scheduler_(scheduler), interval_s_(interval_s), grace_s_(grace_s) {}

SlurmSync::~SlurmSync() { stop(); }

void SlurmSync::start() { worker_ = std::thread([this] { loop(); }); }

void SlurmSync::stop() {
  stop_.request();
  if (worker_.joinable()) worker_.join();
}

void SlurmSync::loop() {
  for (;;) {
    auto done = sync_once();
    if (!done) spdlog::warn("slurm sync: {} (state unchanged; retrying)", done.error().to_string());
    const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(interval_s_));
    if (stop_.sleep_for(interval)) return;
  }
}

namespace {
// The engine command that carries out one sync action.
Command command_for(const slurm::SyncAction& a) {
  Command c;
  switch (a.kind) {
    case slurm::SyncAction::Kind::kRelease:
      c.kind = Command::Kind::kRelease;
      c.job_id = a.job_id;
      break;
    case slurm::SyncAction::Kind::kHold:
      c.kind = Command::Kind::kPlace;
      c.place.job.job_id = a.job_id;
      c.place.policy = "slurm";
      c.hold_gpus = a.gpus;
      break;
    case slurm::SyncAction::Kind::kMarkNode:
    case slurm::SyncAction::Kind::kUnmarkNode: {
      const bool lift = a.kind == slurm::SyncAction::Kind::kUnmarkNode;
      c.kind = Command::Kind::kSetNodeAvailability;
      c.availability = {a.node, std::string(slurm::kSlurmSource), lift, lift ? std::string() : a.reason};
      break;
    }
  }
  return c;
}

std::string_view verb(slurm::SyncAction::Kind k) {
  switch (k) {
    case slurm::SyncAction::Kind::kRelease: return "released";
    case slurm::SyncAction::Kind::kHold: return "holding";
    case slurm::SyncAction::Kind::kMarkNode: return "marked unavailable";
    case slurm::SyncAction::Kind::kUnmarkNode: return "lifted the mark of";
  }
  return "";
}
}  // namespace

Result<void> SlurmSync::apply(const slurm::SyncAction& a) {
  auto d = scheduler_.submit(command_for(a));
  if (!d) return tl::unexpected(d.error());
  if (a.node.empty()) {
    spdlog::info("slurm sync: {} {} ({} GPUs): {}", verb(a.kind), a.job_id, d->gpus_by_rank.size(), a.reason);
  } else {
    spdlog::info("slurm sync: {} node {}: {}", verb(a.kind), a.node, a.reason);
  }
  return {};
}

void SlurmSync::record_error(const Error& e) {
  MutexLock lock(status_mutex_);
  ++polls_;
  last_error_ = e.to_string();
}

void SlurmSync::record_success(int applied) {
  MutexLock lock(status_mutex_);
  ++polls_;
  changes_ += applied;
  last_error_.clear();
  last_ok_unix_ms_ = now_unix_ms();
}

Result<int> SlurmSync::sync_once() {
  MutexLock guard(sync_mutex_);
  auto live = slurm::read_live_state();
  if (!live) {
    record_error(live.error());
    return tl::unexpected(live.error());
  }
  std::vector<slurm::HeldJob> held = scheduler_.engine().read([](const AllocationState& s) {
    std::vector<slurm::HeldJob> out;
    for (const std::string& id : s.job_ids()) {
      auto g = s.job_gpus(id);
      out.push_back({id, {g.begin(), g.end()}});
    }
    return out;
  });
  std::vector<slurm::SlurmNodeMark> marks;
  for (const StoredNodeMark& m : scheduler_.engine().node_marks(slurm::kSlurmSource))
    marks.push_back({cluster_.node_name(m.node), m.mark.reason});
  auto actions = slurm::reconcile(cluster_, *live, held, marks);
  if (!actions) {
    record_error(actions.error());
    return tl::unexpected(actions.error());
  }
  const auto now = std::chrono::steady_clock::now();
  std::map<std::string, std::chrono::steady_clock::time_point> still_unseen;
  int applied = 0;
  for (const slurm::SyncAction& a : *actions) {
    if (a.slurm_may_not_know_yet) {
      auto first = unseen_since_.emplace(a.job_id, now).first->second;
      if (std::chrono::duration<double>(now - first).count() < grace_s_) {
        still_unseen[a.job_id] = first;
        continue;
      }
    }
    if (auto ok = apply(a); !ok) {
      record_error(ok.error());
      unseen_since_ = std::move(still_unseen);
      return tl::unexpected(ok.error());
    }
    ++applied;
  }
  unseen_since_ = std::move(still_unseen);
  record_success(applied);
  return applied;
}

nlohmann::json SlurmSync::status() const {
  MutexLock lock(status_mutex_);
  return {{"polls", polls_},
          {"changes", changes_},
          {"last_error", last_error_},
          {"last_ok_unix_ms", last_ok_unix_ms_},
          {"interval_s", interval_s_}};
}

namespace {
// serve --slurm: the sync worker and GET /v1/slurm/sync.
class SlurmSyncComponent final : public Component {
 public:
  SlurmSyncComponent(const Cluster& cluster, Scheduler& scheduler, double interval_s)
      : sync_(std::make_shared<SlurmSync>(cluster, scheduler, interval_s)) {}
  Result<void> start() override {
    sync_->start();
    return {};
  }
  void stop() override { sync_->stop(); }
  void install(Endpoints& endpoints) override {
    endpoints.api.Get("/v1/slurm/sync", [sync = sync_](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, sync->status().dump());
    });
  }

 private:
  std::shared_ptr<SlurmSync> sync_;
};
}  // namespace

std::unique_ptr<Component> make_slurm_sync(ServiceContext& ctx) {
  if (!ctx.options.slurm.enabled) return nullptr;
  return std::make_unique<SlurmSyncComponent>(ctx.cluster, ctx.scheduler, ctx.options.slurm.poll_interval_s);
}

}  // namespace toposched::service
