#include "topology/file_io.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace toposched {

namespace {

// Registry of live temporary files. A slot goes free -> claimed (path being copied in) ->
// live (the handler may unlink it) -> free. Only atomics and fixed arrays: the signal
// handler reads them without locks or allocation.
constexpr int kTempSlots = 64;
constexpr std::size_t kTempPathMax = 4096;
enum : int { kSlotFree = 0, kSlotClaimed = 1, kSlotLive = 2 };
std::atomic<int> g_slot_state[kTempSlots];
char g_slot_path[kTempSlots][kTempPathMax];

extern "C" void remove_temporary_files_and_reraise(int sig) {
  int saved_errno = errno;
  for (int i = 0; i < kTempSlots; ++i)
    if (g_slot_state[i].load(std::memory_order_acquire) == kSlotLive) ::unlink(g_slot_path[i]);
  errno = saved_errno;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Removes the temporary file and forgets it.
void discard_temporary(const std::string& tmp, int slot) {
  ::unlink(tmp.c_str());
  untrack_temporary_file(slot);
}

}  // namespace

int track_temporary_file(const std::string& path) {
  if (path.size() >= kTempPathMax) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = kSlotFree;
    if (g_slot_state[i].compare_exchange_strong(expected, kSlotClaimed, std::memory_order_acq_rel)) {
      std::memcpy(g_slot_path[i], path.c_str(), path.size() + 1);
      g_slot_state[i].store(kSlotLive, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void untrack_temporary_file(int slot) {
  if (slot >= 0 && slot < kTempSlots) g_slot_state[slot].store(kSlotFree, std::memory_order_release);
}

void install_temporary_file_cleanup() {
  struct sigaction action {};
  action.sa_handler = remove_temporary_files_and_reraise;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction previous {};
    // A signal the parent shell set to "ignore" (nohup, background jobs) stays ignored.
    if (::sigaction(sig, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &action, nullptr);
  }
}

Result<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error(ErrorCode::kIo, fmt::format("{}: is a directory, expected a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::kIo, fmt::format("{}: read error", path));
  return ss.str();
}

Result<void> write_file_atomically(const std::string& path, std::string_view content) {
  if (path == "-") {
    std::cout << content;
    std::cout.flush();
    if (!std::cout) return make_error(ErrorCode::kIo, "cannot write to standard output");
    return {};
  }
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  // Blocking SIGINT/SIGTERM between mkstemp and registration closes the window in which a
  // signal would find the file created but not yet tracked.
  sigset_t block, previous_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &block, &previous_mask);
  int fd = mkstemp(tmpl.data());
  int mkstemp_errno = errno;
  int slot = fd >= 0 ? track_temporary_file(tmpl) : -1;
  ::pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  if (fd < 0)
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot create a temporary file in '{}': {}",
                                                  path, dir.string(), std::strerror(mkstemp_errno)));
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      discard_temporary(tmpl, slot);
      return make_error(ErrorCode::kIo, fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  // Keep the permissions an ordinary new file would get.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    discard_temporary(tmpl, slot);
    return make_error(ErrorCode::kIo, fmt::format("{}: write failed: {}", path, std::strerror(err)));
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    discard_temporary(tmpl, slot);
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot replace the file: {}", path, std::strerror(err)));
  }
  untrack_temporary_file(slot);
  return {};
}

}  // namespace toposched
