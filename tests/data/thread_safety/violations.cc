// The negative control of tools/thread_safety.py: compiled with the same flags as src/, the
// analysis must report an error on every line marked `expect: TEXT` (TEXT a part of clang's
// message) and on no other line. So the check fails if the annotations stop working (a
// wrapper that lost its attributes, a flag that no longer reaches clang), instead of
// passing with nothing analysed. The unmarked functions are correct uses that must stay
// silent (a scoped lock that did not release, or a shared lock taken as exclusive, would
// show up here).
#include "topology/mutex.h"

namespace {

class Account {
 public:
  int read_unlocked() const { return balance_; }  // expect: reading variable 'balance_' requires holding mutex 'mu_'
  void write_unlocked(int v) { balance_ = v; }    // expect: writing variable 'balance_' requires holding mutex 'mu_'
  void call_unlocked() { add_locked(1); }         // expect: calling function 'add_locked' requires holding mutex 'mu_' exclusively

  void write_under_reader_lock(int v) {
    toposched::ReaderLock lock(shared_mu_);
    total_ = v;  // expect: writing variable 'total_' requires holding shared_mutex 'shared_mu_' exclusively
  }
  int read_after_scope() {
    { toposched::MutexLock lock(mu_); }
    return balance_;  // expect: reading variable 'balance_' requires holding mutex 'mu_'
  }
  void wait_unlocked() { cv_.wait(mu_); }  // expect: calling function 'wait' requires holding mutex 'mu_' exclusively
  void lock_twice() {
    toposched::MutexLock first(mu_);
    toposched::MutexLock second(mu_);  // expect: acquiring mutex 'mu_' that is already held
  }

  int read_locked() {
    toposched::MutexLock lock(mu_);
    return balance_;
  }
  void add(int v) {
    toposched::MutexLock lock(mu_);
    add_locked(v);
    while (balance_ < 0) cv_.wait(mu_);
  }
  int read_shared() const {
    toposched::ReaderLock lock(shared_mu_);
    return total_;
  }
  void write_exclusive(int v) {
    toposched::WriterLock lock(shared_mu_);
    total_ = v;
  }

 private:
  void add_locked(int v) REQUIRES(mu_) { balance_ += v; }

  mutable toposched::Mutex mu_;
  toposched::CondVar cv_;
  int balance_ GUARDED_BY(mu_) = 0;
  mutable toposched::SharedMutex shared_mu_;
  int total_ GUARDED_BY(shared_mu_) = 0;
};

}  // namespace

// Referenced so that nothing above is unused.
int thread_safety_violations_used() {
  Account a;
  a.write_unlocked(1);
  a.call_unlocked();
  a.write_under_reader_lock(2);
  a.wait_unlocked();
  a.lock_twice();
  a.add(3);
  a.write_exclusive(4);
  return a.read_unlocked() + a.read_after_scope() + a.read_locked() + a.read_shared();
}
