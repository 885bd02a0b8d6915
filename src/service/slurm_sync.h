// serve --slurm: a background worker that keeps the service's allocation state equal to
// Slurm's. Every poll interval it reads Slurm's live state (slurm/slurm_commands.h), asks
// slurm::reconcile() what differs from the jobs the engine holds, and applies that through
// the Scheduler like any client: releases, then holds of exact GPUs (Command::hold_gpus),
// each committed to the store before the next. A job the job_submit.lua placed that Slurm
// does not list yet is released only after `grace_s` (slurmctld creates the job after the
// plugin's request returns). Failures (Slurm unreachable, output that does not parse) change
// nothing and are logged and shown by status(); the next poll tries again.
//
// Thread-safety: start()/stop() from one thread; status() and sync_once() from any (sync_once
// calls are serialised by an internal mutex).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "service/scheduler.h"
#include "slurm/sync.h"

namespace toposched::service {

class SlurmSync {
 public:
  // `cluster` and `scheduler` must outlive the worker (Server::stop stops it first).
  SlurmSync(const Cluster& cluster, Scheduler& scheduler, double interval_s, double grace_s = 30);
  ~SlurmSync();

  void start();
  void stop();
  // One poll: the number of changes applied, or why nothing was.
  Result<int> sync_once();
  // {"polls","changes","last_error","last_ok_unix_ms","interval_s"}.
  nlohmann::json status() const;

 private:
  void loop();
  Result<void> apply(const slurm::SyncAction& action);

  const Cluster& cluster_;
  Scheduler& scheduler_;
  const double interval_s_;
  const double grace_s_;
  std::mutex sync_mutex_;  // one sync_once at a time
  std::map<std::string, std::chrono::steady_clock::time_point> unseen_since_;  // guarded by sync_mutex_
  mutable std::mutex status_mutex_;
  long long polls_ = 0, changes_ = 0, last_ok_unix_ms_ = 0;  // guarded by status_mutex_
  std::string last_error_;                                  // guarded by status_mutex_
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by wake_mutex_
  std::thread worker_;
};

}  // namespace toposched::service
