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
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace toposched {

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

namespace {
// Creates a new temporary file beside the target with mode 0666, which the kernel narrows
// by the umask: the permissions an ordinary new file gets, without reading the umask
// (umask(2) can only be read by setting it, which races with other threads of a server).
int create_temporary(const std::filesystem::path& dir, const std::string& name, std::string& path_out) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    path_out = (dir / fmt::format(".{}.tmp-{}-{}", name, ::getpid(), counter.fetch_add(1))).string();
    int fd = ::open(path_out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}
}  // namespace

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
  std::string tmpl;
  int fd = create_temporary(dir, target.filename().string(), tmpl);
  if (fd < 0)
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot create a temporary file in '{}': {}",
                                                  path, dir.string(), std::strerror(errno)));
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      return make_error(ErrorCode::kIo, fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return make_error(ErrorCode::kIo, fmt::format("{}: write failed: {}", path, std::strerror(err)));
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot replace the file: {}", path, std::strerror(err)));
  }
  return {};
}

}  // namespace toposched
