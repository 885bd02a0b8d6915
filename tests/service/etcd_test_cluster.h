// A real 3-member etcd cluster on loopback for the service tests: started on first use by
// running tests/e2e/etcd_harness.py --until-stdin-eof as a child with a pipe on its stdin,
// stopped when the test process exits (the pipe closes, even on a crash, and the harness
// kills every member it started). One cluster per test process; tests keep apart by using
// their own key prefix (unique_prefix()).
// Thread-safety: shared_etcd() may be called from any thread (function-local static).
#pragma once

#include <string>

namespace toposched::service::testing {

struct EtcdTestCluster {
  std::string endpoints;   // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"; empty if unavailable
  std::string why_not;     // why no cluster could start (for GTEST_SKIP)
  int harness_pid = 0;
  int stdin_fd = -1;
  ~EtcdTestCluster();
};

// The process-wide cluster, started on first call.
const EtcdTestCluster& shared_etcd();
// "/toposched-test-<pid>-<n>": a fresh key prefix per call.
std::string unique_prefix();

}  // namespace toposched::service::testing
