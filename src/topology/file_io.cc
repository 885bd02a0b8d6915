#include "topology/file_io.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>

namespace toposched {

namespace fs = std::filesystem;

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

// Blocks SIGINT/SIGTERM for its lifetime: between creating a temporary file and tracking
// it (and between renaming it and untracking it) a signal must not slip in.
class TerminationSignalsBlocked {
 public:
  TerminationSignalsBlocked() {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &block, &previous_);
  }
  ~TerminationSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  TerminationSignalsBlocked(const TerminationSignalsBlocked&) = delete;
  TerminationSignalsBlocked& operator=(const TerminationSignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};


tl::unexpected<Error> io_error(const std::string& path, std::string_view what, int err) {
  return make_error(ErrorCode::kIo, fmt::format("{}: {}: {}", path, what, std::strerror(err)));
}

// Follows a chain of symbolic links to the path a write should go to (the last link's
// target, which may not exist yet). Relative targets are resolved against the link's folder.
Result<std::string> resolve_links(const std::string& path) {
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current;
    std::string target(PATH_MAX, '\0');
    ssize_t n = ::readlink(current.c_str(), target.data(), target.size());
    if (n < 0) return io_error(path, "cannot read the symbolic link", errno);
    target.resize(static_cast<std::size_t>(n));
    fs::path t(target);
    current = t.is_absolute() ? t.string() : (fs::path(current).parent_path() / t).string();
  }
  return io_error(path, "cannot follow the symbolic link", ELOOP);
}

fs::path folder_of(const std::string& path) {
  fs::path p(path);
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

Result<void> check_writable_folder(const std::string& path, const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return io_error(path, fmt::format("folder '{}' does not exist", dir.string()), errno);
  if (!S_ISDIR(st.st_mode))
    return make_error(ErrorCode::kIo, fmt::format("{}: '{}' is not a folder", path, dir.string()));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return io_error(path, fmt::format("cannot create files in '{}'", dir.string()), errno);
  return {};
}

bool is_stream_node(mode_t mode) { return S_ISCHR(mode) || S_ISFIFO(mode) || S_ISSOCK(mode); }

Result<void> write_all(int fd, std::string_view content, const std::string& path) {
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(path, "write failed", errno);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

// Character devices and FIFOs are opened and written; sockets are connected to.
Result<void> write_stream_node(const std::string& path, mode_t mode, std::string_view content) {
  int fd = -1;
  if (S_ISSOCK(mode)) {
    sockaddr_un addr{};
    if (path.size() >= sizeof(addr.sun_path)) return io_error(path, "socket path too long", ENAMETOOLONG);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      int err = errno;
      ::close(fd);
      return io_error(path, "cannot connect to the socket", err);
    }
  } else {
    fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  }
  if (fd < 0) return io_error(path, "cannot open for writing", errno);
  auto written = write_all(fd, content, path);
  if (::close(fd) != 0 && written) return io_error(path, "write failed", errno);
  return written;
}

// Creates ".NAME.tmp-XXXXXX" beside `target` with `mode` exactly (new files: 0666 less the
// umask, which open() applies itself). Returns the descriptor and fills `tmp_path`.
Result<int> create_temporary(const std::string& target, bool keep_mode, mode_t mode, std::string& tmp_path) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  fs::path t(target);
  fs::path dir = folder_of(target);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string suffix;
    for (int i = 0; i < 6; ++i) suffix += kChars[rng() % (sizeof(kChars) - 1)];
    tmp_path = (dir / ("." + t.filename().string() + ".tmp-" + suffix)).string();
    int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, keep_mode ? (mode & 07777) : 0666);
    if (fd >= 0) {
      // open() masks the mode with the umask; an existing file's mode is restored exactly.
      if (keep_mode) ::fchmod(fd, mode & 07777);
      return fd;
    }
    if (errno != EEXIST)
      return io_error(target, fmt::format("cannot create a temporary file in '{}'", dir.string()), errno);
  }
  return io_error(target, "cannot create a temporary file", EEXIST);
}

Result<void> replace_regular_file(const std::string& user_path, const std::string& target,
                                  const struct stat* existing, std::string_view content) {
  std::string tmp;
  Result<int> fd = make_error(ErrorCode::kIo, "");
  int slot = -1;
  {
    TerminationSignalsBlocked blocked;
    fd = create_temporary(target, existing != nullptr, existing ? existing->st_mode : 0, tmp);
    if (fd) slot = track_temporary_file(tmp);
  }
  if (!fd) return tl::unexpected(fd.error());
  if (existing && ::fchown(*fd, existing->st_uid, existing->st_gid) != 0) {
    // Not permitted (not root, not the owner's group): keep our own owner, as cp does.
    (void)::fchown(*fd, static_cast<uid_t>(-1), existing->st_gid);
  }
  auto written = write_all(*fd, content, user_path);
  if (written && ::fsync(*fd) != 0) written = io_error(user_path, "write failed", errno);
  if (::close(*fd) != 0 && written) written = io_error(user_path, "write failed", errno);
  if (written && std::rename(tmp.c_str(), target.c_str()) != 0)
    written = io_error(user_path, "cannot replace the file", errno);
  if (!written) ::unlink(tmp.c_str());
  untrack_temporary_file(slot);
  return written;
}

// What a write to `path` would do, after following links.
struct OutputTarget {
  std::string path;       // where the bytes go
  bool exists = false;
  struct stat st {};
};

Result<OutputTarget> classify(const std::string& path) {
  if (path.empty()) return make_error(ErrorCode::kIo, "empty output path");
  auto resolved = resolve_links(path);
  if (!resolved) return tl::unexpected(resolved.error());
  OutputTarget t;
  t.path = *resolved;
  if (::stat(t.path.c_str(), &t.st) == 0) {
    t.exists = true;
    if (S_ISDIR(t.st.st_mode))
      return make_error(ErrorCode::kIo, fmt::format("{}: is a directory, expected a file", path));
    if (!S_ISREG(t.st.st_mode) && !is_stream_node(t.st.st_mode))
      return make_error(ErrorCode::kIo, fmt::format("{}: is neither a file nor a device, FIFO or socket", path));
  } else if (errno != ENOENT) {
    return io_error(path, "cannot write", errno);
  }
  return t;
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
  if (!in) return io_error(path, "cannot open", errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::kIo, fmt::format("{}: read error", path));
  return ss.str();
}

Result<void> check_output_path(const std::string& path) {
  if (path == "-") return {};
  auto t = classify(path);
  if (!t) return tl::unexpected(t.error());
  if (t->exists && is_stream_node(t->st.st_mode)) {
    if (!S_ISSOCK(t->st.st_mode) && ::access(t->path.c_str(), W_OK) != 0) return io_error(path, "cannot write", errno);
    return {};
  }
  return check_writable_folder(path, folder_of(t->path));
}

Result<void> check_output_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return make_error(ErrorCode::kIo, fmt::format("{}: exists and is not a folder", dir));
    if (::access(dir.c_str(), W_OK | X_OK) != 0) return io_error(dir, "cannot create files in the folder", errno);
    return {};
  }
  // Missing: its nearest existing ancestor must let us create it.
  fs::path p = fs::path(dir).lexically_normal();
  if (p.has_filename() == false) p = p.parent_path();
  fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  while (::stat(parent.c_str(), &st) != 0 && parent.has_parent_path() && parent != parent.parent_path())
    parent = parent.parent_path();
  return check_writable_folder(dir, parent);
}

std::string path_in_dir(const std::string& dir, std::string_view name) {
  std::string joined = dir;
  while (joined.size() > 1 && joined.back() == '/') joined.pop_back();
  if (!joined.empty() && joined.back() != '/') joined += '/';
  return joined + std::string(name);
}

Result<void> write_report_dir(const std::string& dir, std::string_view json_text, std::string_view html_text,
                              std::span<const ReportFile> extra) {
  if (auto usable = check_output_dir(dir); !usable) return usable;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::kIo, fmt::format("cannot create report directory '{}': {}", dir, ec.message()));
  std::vector<std::string> written;
  auto remove_written = [&] {
    for (const std::string& path : written) fs::remove(path, ec);
  };
  auto write = [&](std::string_view name, std::string_view text) -> Result<void> {
    std::string path = path_in_dir(dir, name);
    if (auto w = write_file_atomically(path, text); !w) {
      remove_written();
      return w;
    }
    written.push_back(std::move(path));
    return {};
  };
  TOPOSCHED_CHECK(write("report.html", html_text));
  for (const ReportFile& f : extra) TOPOSCHED_CHECK(write(f.name, f.text));
  return write("report.json", json_text);
}

Result<void> write_file_atomically(const std::string& path, std::string_view content) {
  if (path == "-") {
    std::cout << content;
    std::cout.flush();
    if (!std::cout) return make_error(ErrorCode::kIo, "cannot write to standard output");
    return {};
  }
  auto t = classify(path);
  if (!t) return tl::unexpected(t.error());
  if (t->exists && is_stream_node(t->st.st_mode)) return write_stream_node(t->path, t->st.st_mode, content);
  if (auto ok = check_writable_folder(path, folder_of(t->path)); !ok) return ok;
  return replace_regular_file(path, t->path, t->exists ? &t->st : nullptr, content);
}

}  // namespace toposched
