#include "topology/file_io.h"

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
  int fd = mkstemp(tmpl.data());
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
  // Keep the permissions an ordinary new file would get.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
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
