// Mutex, SharedMutex, their scoped locks (MutexLock, ReaderLock, WriterLock), CondVar and
// StopSignal: std::mutex, std::shared_mutex and std::condition_variable with clang's
// thread-safety annotations (topology/thread_annotations.h), so that -Wthread-safety can
// check every member marked GUARDED_BY. libstdc++'s types carry no capability attributes
// (libc++ has them, g++ builds with libstdc++), hence these thin inline wrappers, in the
// style of LevelDB's port::Mutex / MutexLock / CondVar. They add no state and no work.
//
// Mutex and SharedMutex satisfy the standard Lockable requirements (lock/unlock, and
// lock_shared/unlock_shared), so std::unique_lock<Mutex> still works where a lock must be
// moved (the analysis does not follow it: assert_held() tells it, see service/replication.cc).
//
// Thread-safety: that is their purpose. A Mutex must not be locked twice by one thread and
// must be unlocked by the thread that locked it (std::mutex's rules); none is copyable or
// movable. StopSignal may be raised and waited on from any threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "topology/thread_annotations.h"

namespace toposched {

class CondVar;

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis that the calling thread holds this mutex through a lock it cannot
  // follow (a std::unique_lock<Mutex> handed out of a function). Checks nothing.
  void assert_held() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

class CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex, or a SharedMutex exclusively, for its lifetime.
template <class Lockable>
class SCOPED_CAPABILITY ExclusiveLock {
 public:
  explicit ExclusiveLock(Lockable& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~ExclusiveLock() RELEASE() { mu_.unlock(); }
  ExclusiveLock(const ExclusiveLock&) = delete;
  ExclusiveLock& operator=(const ExclusiveLock&) = delete;

 private:
  Lockable& mu_;
};
using MutexLock = ExclusiveLock<Mutex>;
using WriterLock = ExclusiveLock<SharedMutex>;

// Holds a SharedMutex shared for its lifetime.
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() RELEASE() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

// A condition variable waited on with a Mutex the caller holds (through a MutexLock). The
// waits take no predicate: a lambda is analysed as a function of its own, which holds no
// lock, so callers loop on their guarded condition around wait() instead.
class CondVar {
 public:
  using Clock = std::chrono::steady_clock;

  // Releases `mu` while waiting and holds it again on return (possibly spuriously woken).
  void wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // the caller's MutexLock still owns the mutex
  }
  // The same, until `deadline` at the latest: false when it passed.
  bool wait_until(Mutex& mu, Clock::time_point deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A stop request for a background loop that sleeps between rounds: request() wakes the
// sleeper at once, and every later sleep returns at once.
class StopSignal {
 public:
  void request() EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      requested_ = true;
    }
    cv_.notify_all();
  }
  // Sleeps for `period`, less when a stop is requested meanwhile; true when one was.
  bool sleep_for(CondVar::Clock::duration period) EXCLUDES(mu_) {
    const auto deadline = CondVar::Clock::now() + period;
    MutexLock lock(mu_);
    while (!requested_ && cv_.wait_until(mu_, deadline)) {
    }
    return requested_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool requested_ GUARDED_BY(mu_) = false;
};

}  // namespace toposched
