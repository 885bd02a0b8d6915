// serve --slurm: a background worker that keeps the service's allocation state equal to
// Slurm's. Every poll interval it reads Slurm's live state (slurm/slurm_commands.h), asks
// slurm::reconcile() what differs from the jobs and the "slurm" node marks the engine holds,
// and applies that through the Scheduler like any client: releases, node marks
// (Command::kSetNodeAvailability, source "slurm"), then holds of exact GPUs
// (Command::hold_gpus), each committed to the store before the next. A job the job_submit.lua placed that Slurm
// does not list yet is released only after `grace_s` (slurmctld creates the job after the
// plugin's request returns). Failures (Slurm unreachable, output that does not parse) change
// nothing and are logged and shown by status(); the next poll tries again.
//
// Thread-safety: start()/stop() from one thread; status() and sync_once() from any (sync_once
// calls are serialised by an internal mutex).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "service/scheduler.h"
#include "topology/mutex.h"
#include "slurm/sync.h"

namespace toposched::service {

class SlurmSync {
 public:
  // `cluster` and `scheduler` must outlive the worker (the service stops it before the scheduler).
  SlurmSync(const Cluster& cluster, Scheduler& scheduler, double interval_s, double grace_s = 30);
  ~SlurmSync();

  void start();
  void stop();
  // One poll: the number of changes applied, or why nothing was.
  Result<int> sync_once() EXCLUDES(sync_mutex_, status_mutex_);
  // {"polls","changes","last_error","last_ok_unix_ms","interval_s"}.
  nlohmann::json status() const EXCLUDES(status_mutex_);

 private:
  void loop();
  Result<void> apply(const slurm::SyncAction& action);
  void record_error(const Error& e) EXCLUDES(status_mutex_);
  void record_success(int applied) EXCLUDES(status_mutex_);

  const Cluster& cluster_;
  Scheduler& scheduler_;
  const double interval_s_;
  const double grace_s_;
  Mutex sync_mutex_;  // one sync_once at a time
  std::map<std::string, std::chrono::steady_clock::time_point> unseen_since_ GUARDED_BY(sync_mutex_);
  mutable Mutex status_mutex_;
  long long polls_ GUARDED_BY(status_mutex_) = 0;
  long long changes_ GUARDED_BY(status_mutex_) = 0;
  long long last_ok_unix_ms_ GUARDED_BY(status_mutex_) = 0;
  std::string last_error_ GUARDED_BY(status_mutex_);
  StopSignal stop_;
  std::thread worker_;
};

}  // namespace toposched::service
