// The annotated lock wrappers behave as the std types they wrap: a CondVar waiter wakes on
// notify and times out at its deadline, readers of a SharedMutex share it, and StopSignal
// ends a sleep at once when stop is requested. (What the annotations make clang check is
// tested by the ctest `thread_safety` and its control, tests/data/thread_safety/.)
#include "topology/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

namespace toposched {
namespace {

using namespace std::chrono_literals;

// Longer than any test may run: a wait this long that returns was woken, not timed out.
constexpr auto kForever = std::chrono::hours(1);

TEST(CondVar, WaiterWakesWhenTheGuardedConditionIsSetAndNotified) {
  Mutex mu;
  CondVar cv;
  bool ready = false;  // guarded by mu (a local: the attribute is for members)
  std::thread setter([&] {
    MutexLock lock(mu);
    ready = true;
    cv.notify_all();
  });
  {
    MutexLock lock(mu);
    while (!ready) ASSERT_TRUE(cv.wait_until(mu, CondVar::Clock::now() + kForever));
    EXPECT_TRUE(ready);
  }
  setter.join();
}

TEST(CondVar, WaitUntilAPassedDeadlineReportsTheTimeoutAndHoldsTheMutexAgain) {
  Mutex mu;
  CondVar cv;
  std::atomic<bool> taken{false};
  std::thread other;
  {
    MutexLock lock(mu);
    EXPECT_FALSE(cv.wait_until(mu, CondVar::Clock::now() - 1ms));
    // Held again: another thread cannot take it until this scope ends.
    other = std::thread([&] {
      MutexLock inner(mu);
      taken = true;
    });
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(taken.load());
  }
  other.join();
  EXPECT_TRUE(taken.load());
}

TEST(SharedMutex, ReadersHoldItTogether) {
  SharedMutex mu;
  std::latch both_inside(2);
  // Each reader waits inside its ReaderLock until the other is inside too: with an exclusive
  // lock the second could never enter, and the test would hang (ctest's time-out).
  auto reader = [&] {
    ReaderLock lock(mu);
    both_inside.arrive_and_wait();
  };
  std::thread a(reader), b(reader);
  a.join();
  b.join();
  WriterLock lock(mu);  // and free again afterwards
}

TEST(StopSignal, SleepRunsItsPeriodWhenNoStopIsRequested) {
  StopSignal stop;
  const auto start = CondVar::Clock::now();
  EXPECT_FALSE(stop.sleep_for(20ms));
  EXPECT_GE(CondVar::Clock::now() - start, 20ms);
}

TEST(StopSignal, RequestEndsASleepInProgressAndEveryLaterOne) {
  StopSignal stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(20ms);
    stop.request();
  });
  EXPECT_TRUE(stop.sleep_for(kForever));
  stopper.join();
  EXPECT_TRUE(stop.sleep_for(kForever));
}

}  // namespace
}  // namespace toposched
