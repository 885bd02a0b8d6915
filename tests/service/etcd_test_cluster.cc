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

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    out.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

EtcdTestCluster::EtcdTestCluster() {
  if (access("/usr/bin/etcd", X_OK) != 0) {
    why_not = "etcd not installed (Debian etcd-server; scripts/install-deps)";
    return;
  }
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    why_not = "pipe failed";
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
    why_not = std::string("cannot run the etcd harness: ") + std::strerror(rc);
    close(in[1]);
    close(out[0]);
    return;
  }
  harness_pid_ = pid;
  stdin_fd_ = in[1];
  std::string line = read_line(out[0], 60000), pids = read_line(out[0], 5000);
  close(out[0]);
  constexpr std::string_view kEndpoints = "ETCD_ENDPOINTS=", kPids = "ETCD_PIDS=";
  if (line.rfind(kEndpoints, 0) != 0 || pids.rfind(kPids, 0) != 0) {
    why_not = "the etcd harness did not start a cluster (see its stderr)";
    return;
  }
  endpoints = line.substr(kEndpoints.size());
  member_endpoints = split(endpoints);
  for (const auto& p : split(pids.substr(kPids.size()))) member_pids.push_back(std::stoi(p));
}

EtcdTestCluster::~EtcdTestCluster() {
  for (std::size_t i = 0; i < member_pids.size(); ++i) resume(i);
  if (stdin_fd_ >= 0) close(stdin_fd_);  // the harness stops its members on EOF
  if (harness_pid_ > 0) {
    int status = 0;
    waitpid(harness_pid_, &status, 0);
  }
}

void EtcdTestCluster::pause(std::size_t member) const { kill(member_pids.at(member), SIGSTOP); }
void EtcdTestCluster::resume(std::size_t member) const { kill(member_pids.at(member), SIGCONT); }

const EtcdTestCluster& shared_etcd() {
  static EtcdTestCluster cluster;
  return cluster;
}

std::string unique_prefix() {
  static std::atomic<int> counter{0};
  return "/toposched-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

}  // namespace toposched::service::testing
