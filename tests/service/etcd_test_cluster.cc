#include "service/etcd_test_cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

extern char** environ;

namespace toposched::service::testing {
namespace {

// Reads one line from `fd` within `timeout_ms`; empty on timeout or EOF.
std::string read_line(int fd, int timeout_ms) {
  std::string line;
  char c = 0;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return {};
    if (read(fd, &c, 1) != 1) return {};
    if (c == '\n') return line;
    line += c;
  }
}

void start(EtcdTestCluster& cluster) {
  if (access("/usr/bin/etcd", X_OK) != 0) {
    cluster.why_not = "etcd not installed (Debian etcd-server; scripts/install-deps)";
    return;
  }
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    cluster.why_not = "pipe failed";
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::string script = std::string(TOPOSCHED_SOURCE_DIR) + "/tests/e2e/etcd_harness.py";
  const char* argv[] = {"python3", script.c_str(), "--until-stdin-eof", nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "python3", &actions, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    cluster.why_not = std::string("cannot run the etcd harness: ") + std::strerror(rc);
    close(in[1]);
    close(out[0]);
    return;
  }
  cluster.harness_pid = pid;
  cluster.stdin_fd = in[1];
  std::string line = read_line(out[0], 60000);
  close(out[0]);
  constexpr std::string_view kTag = "ETCD_ENDPOINTS=";
  if (line.rfind(kTag, 0) != 0) {
    cluster.why_not = "the etcd harness did not start a cluster (see its stderr)";
    return;
  }
  cluster.endpoints = line.substr(kTag.size());
}

}  // namespace

EtcdTestCluster::~EtcdTestCluster() {
  if (stdin_fd >= 0) close(stdin_fd);  // the harness stops its members on EOF
  if (harness_pid > 0) {
    int status = 0;
    waitpid(harness_pid, &status, 0);
  }
}

const EtcdTestCluster& shared_etcd() {
  static EtcdTestCluster cluster;
  static std::once_flag once;
  std::call_once(once, [] { start(cluster); });
  return cluster;
}

std::string unique_prefix() {
  static std::atomic<int> counter{0};
  return "/toposched-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

}  // namespace toposched::service::testing
