// Whole-file reading and atomic writing. Output files are written to a temporary file in
// the destination's directory and renamed over it, so a failure never leaves a
// half-written file. The file gets the permissions of any new file (0666 less the umask),
// and the process umask is never changed. Stateless functions; safe from any thread (distinct paths).
#pragma once

#include <string>
#include <string_view>

#include "topology/error.h"

namespace toposched {

Result<std::string> read_text_file(const std::string& path);

// "-" writes to standard output.
Result<void> write_file_atomically(const std::string& path, std::string_view content);

}  // namespace toposched
