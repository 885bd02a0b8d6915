// Whole-file reading and atomic writing. Output files are written to a temporary file in
// the destination's directory and renamed over it, so a failure never leaves a
// half-written file. While a temporary file exists its path is in a process-wide registry
// (fixed slots, lock-free), so install_temporary_file_cleanup's SIGINT/SIGTERM handler can
// remove it before the process dies. Functions are safe from any thread (distinct paths).
#pragma once

#include <string>
#include <string_view>

#include "topology/error.h"

namespace toposched {

Result<std::string> read_text_file(const std::string& path);

// "-" writes to standard output.
Result<void> write_file_atomically(const std::string& path, std::string_view content);

// Installs handlers for SIGINT and SIGTERM that unlink every registered temporary file and
// then re-raise the signal with its default action (so the exit status still says which
// signal ended the process). Call once, early in main. The handler is async-signal-safe.
void install_temporary_file_cleanup();

// The registry behind it, for code that creates its own temporary files: track() returns a
// slot (or -1 when the path is too long or all slots are busy: the file is then simply not
// cleaned up on a signal) and untrack(slot) forgets it once renamed or removed.
int track_temporary_file(const std::string& path);
void untrack_temporary_file(int slot);

}  // namespace toposched
