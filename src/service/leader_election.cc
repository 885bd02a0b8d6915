#include "service/leader_election.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace toposched::service {

using namespace std::chrono_literals;

LeaderElection::LeaderElection(std::vector<EtcdEndpoint> endpoints, EtcdClient::Options client_options,
                               Options options)
    : options_(std::move(options)), client_(std::move(endpoints), client_options) {}

LeaderElection::~LeaderElection() { stop(); }

// Keep-alives go out every TTL/4; the guard leaves a quarter TTL between the end of this
// replica's term and the earliest moment etcd can expire its lease.
LeaderElection::Clock::duration LeaderElection::guard() const {
  return std::chrono::duration_cast<Clock::duration>(options_.ttl) / 4;
}

// Each etcd call of the loop is bounded so that one hung member cannot starve the
// keep-alives (the next call goes to the next endpoint).
LeaderElection::Clock::duration LeaderElection::call_budget() const {
  return std::max<Clock::duration>(std::chrono::duration_cast<Clock::duration>(options_.ttl) / 4, 100ms);
}

void LeaderElection::start() {
  MutexLock lock(mutex_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void LeaderElection::stop() {
  {
    MutexLock lock(mutex_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    term_.reset();
  }
  wake_.notify_all();
  thread_.join();
  std::int64_t lease = 0;
  {
    MutexLock lock(mutex_);
    lease = std::exchange(lease_id_, 0);
  }
  if (lease != 0) (void)client_.revoke_lease(lease, Clock::now() + call_budget());
}

void LeaderElection::resign() {
  {
    MutexLock lock(mutex_);
    term_.reset();  // stop deciding now; the thread revokes the lease
    resign_requested_ = true;
  }
  wake_.notify_all();
}

std::optional<LeaderElection::Term> LeaderElection::term() const {
  MutexLock lock(mutex_);
  if (!term_ || Clock::now() >= term_->valid_until) return std::nullopt;
  return term_;
}

std::string LeaderElection::leader() const {
  MutexLock lock(mutex_);
  const auto now = Clock::now();
  if (leader_ == options_.identity) return term_ && now < term_->valid_until ? leader_ : std::string();
  return now - leader_seen_at_ <= options_.ttl ? leader_ : std::string();
}

std::string LeaderElection::last_error() const {
  MutexLock lock(mutex_);
  return last_error_;
}

void LeaderElection::note_error(const Error& e) {
  MutexLock lock(mutex_);
  if (last_error_ != e.message) spdlog::warn("leader election: {}", e.message);
  last_error_ = e.message;
}

void LeaderElection::lost_sight_of_etcd(const Error& e) {
  note_error(e);
  MutexLock lock(mutex_);
  if (!term_) leader_.clear();  // cannot see etcd: the leader is unknown, not the last one seen
}

void LeaderElection::drop_lease_locked() {
  if (term_) spdlog::warn("leader election: {} steps down (lease {} lost)", options_.identity, lease_id_);
  term_.reset();
  lease_id_ = 0;
  if (leader_ == options_.identity) leader_.clear();
}

void LeaderElection::run() {
  while (!stop_requested()) {
    step(Clock::now());
    sleep_until_next_poll();
  }
}

bool LeaderElection::stop_requested() const {
  MutexLock lock(mutex_);
  return stopping_;
}

// Sleeps one poll period, less when stop() or resign() asks for the loop.
void LeaderElection::sleep_until_next_poll() {
  const auto deadline = Clock::now() + options_.poll;
  MutexLock lock(mutex_);
  while (!stopping_ && !resign_requested_ && wake_.wait_until(mutex_, deadline)) {
  }
}

void LeaderElection::step(Clock::time_point now) {
  std::int64_t to_revoke = 0;
  {
    MutexLock lock(mutex_);
    if (resign_requested_) {
      resign_requested_ = false;
      to_revoke = lease_id_;
      drop_lease_locked();
    }
  }
  if (to_revoke != 0) {
    if (auto r = client_.revoke_lease(to_revoke, now + call_budget()); !r) note_error(r.error());
    return;
  }
  keep_lease_alive(now);
  campaign_or_watch(Clock::now());
}

void LeaderElection::keep_lease_alive(Clock::time_point now) {
  std::int64_t lease = 0;
  {
    MutexLock lock(mutex_);
    if (lease_id_ != 0 && now >= lease_expiry_lb_) drop_lease_locked();  // surely expired by now
    if (lease_id_ != 0 && now < next_keepalive_) return;
    lease = lease_id_;
  }
  const auto sent = Clock::now();
  if (lease == 0) {
    auto granted = client_.grant_lease(options_.ttl.count(), sent + call_budget());
    if (!granted) return note_error(granted.error());
    MutexLock lock(mutex_);
    lease_id_ = granted->id;
    lease_expiry_lb_ = sent + std::chrono::seconds(granted->ttl_s);
    next_keepalive_ = sent + std::chrono::seconds(granted->ttl_s) / 4;
    last_error_.clear();
    return;
  }
  auto ttl = client_.keep_alive(lease, sent + call_budget());
  MutexLock lock(mutex_);
  if (!ttl) {
    last_error_ = ttl.error().message;
    next_keepalive_ = Clock::now();  // retry at the next step
    return;
  }
  last_error_.clear();
  if (*ttl <= 0) return drop_lease_locked();
  lease_expiry_lb_ = sent + std::chrono::seconds(*ttl);
  next_keepalive_ = sent + std::chrono::seconds(*ttl) / 4;
  if (term_ && term_->lease_id == lease) term_->valid_until = lease_expiry_lb_ - guard();
}

void LeaderElection::campaign_or_watch(Clock::time_point now) {
  std::int64_t lease = 0;
  {
    MutexLock lock(mutex_);
    lease = lease_id_;
  }
  if (lease == 0) return;
  // Look first (a read-only request: no Raft log entry, no fsync); only when the seat is
  // free, one Txn creates the key if it is still free, else reads who took it.
  auto seen = client_.range(options_.key, {}, 0, 0, false, now + call_budget());
  if (!seen) return lost_sight_of_etcd(seen.error());
  EtcdTxnResult r;
  if (seen->kvs.empty()) {
    std::vector<EtcdCompare> free_seat{{options_.key, EtcdCompare::Target::kCreate, EtcdCompare::Op::kEqual, 0, {}}};
    std::vector<EtcdOp> take{EtcdOp::put(options_.key, options_.identity, lease)};
    std::vector<EtcdOp> look{EtcdOp::get(options_.key)};
    auto t = client_.txn(free_seat, take, look, Clock::now() + call_budget());
    if (!t) return lost_sight_of_etcd(t.error());
    r = std::move(*t);
  } else {
    r.ranges.push_back(std::move(*seen));
  }
  MutexLock lock(mutex_);
  if (lease_id_ != lease || stopping_) return;  // resigned or lost meanwhile
  if (r.succeeded) {
    term_ = Term{lease, r.revision, ++generation_, lease_expiry_lb_ - guard()};
    leader_ = options_.identity;
    leader_seen_at_ = Clock::now();
    spdlog::info("leader election: {} leads (term {}, lease {}, revision {})", options_.identity,
                 generation_, lease, r.revision);
    return;
  }
  const EtcdKeyValue* holder = r.ranges.empty() || r.ranges[0].kvs.empty() ? nullptr : &r.ranges[0].kvs[0];
  if (holder == nullptr) return;  // released between compare and read: next step campaigns
  leader_ = holder->value;
  leader_seen_at_ = Clock::now();
  if (term_ && holder->create_revision != term_->key_revision) drop_lease_locked();
}

}  // namespace toposched::service
