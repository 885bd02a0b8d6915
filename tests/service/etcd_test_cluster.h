// A real 3-member etcd cluster on loopback for the service tests, started by running
// tests/e2e/etcd_harness.py --until-stdin-eof as a child with a pipe on its stdin; it stops
// when the EtcdTestCluster is destroyed or the test process exits (the pipe closes, even on
// a crash, and the harness kills every member it started). shared_etcd() is one cluster per
// test process, started on first use; tests keep apart by using their own key prefix
// (unique_prefix()). A test that freezes or kills members starts a private one.
// Thread-safety: shared_etcd() may be called from any thread (function-local static); an
// EtcdTestCluster object belongs to one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace toposched::service::testing {

class EtcdTestCluster {
 public:
  EtcdTestCluster();  // starts the cluster (check endpoints.empty() / why_not)
  ~EtcdTestCluster();
  EtcdTestCluster(const EtcdTestCluster&) = delete;
  EtcdTestCluster& operator=(const EtcdTestCluster&) = delete;

  std::string endpoints;          // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"; empty if unavailable
  std::vector<std::string> member_endpoints;
  std::vector<int> member_pids;   // in endpoint order
  std::string why_not;            // why no cluster could start (for GTEST_SKIP)
  // SIGSTOP / SIGCONT one member (a partition: it keeps its sockets, answers nothing).
  void pause(std::size_t member) const;
  void resume(std::size_t member) const;

 private:
  int harness_pid_ = 0;
  int stdin_fd_ = -1;
};

// The process-wide cluster, started on first call.
const EtcdTestCluster& shared_etcd();
// "/toposched-test-<pid>-<n>": a fresh key prefix per call.
std::string unique_prefix();

}  // namespace toposched::service::testing
