// Whole-file reading, and the one routine every output of toposched goes through.
//
// write_file_atomically(path, content) decides by what `path` is now:
//   - "-": standard output;
//   - a character device, FIFO or socket: written directly (opened, never replaced), so
//     `-o /dev/stdout` or a named pipe with a reader gets the bytes and the node survives;
//   - a symbolic link (relative or absolute, chains too): the write goes to the link's final
//     target, atomically beside that target; the link itself stays;
//   - an existing regular file: a temporary file beside it, created with the file's mode and
//     given its owner and group where the process may set them, then renamed over it, so a
//     failure never leaves half a file and protected files (0640, group slurm) stay so;
//   - a new file: the same, with the mode any new file gets (0666 less the umask);
//   - a directory, or a place that cannot be written: a kIo error naming it.
// check_output_path(path) runs the same classification without writing, so a command can
// refuse an unusable output before doing any work; check_output_dir does it for a report
// directory (existing, or creatable in a writable parent).
//
// No process-wide state is touched (no umask changes): every function is safe to call from
// several threads at once on distinct paths.
//
// While a temporary file exists its path is in a process-wide registry (fixed slots,
// lock-free), so the SIGINT/SIGTERM handler that install_temporary_file_cleanup installs
// can remove it before the process dies.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "topology/error.h"

namespace toposched {

Result<std::string> read_text_file(const std::string& path);

// See the header comment for what each kind of `path` gets.
Result<void> write_file_atomically(const std::string& path, std::string_view content);

// kIo error when `path` could not be written as write_file_atomically would write it.
Result<void> check_output_path(const std::string& path);

// kIo error when `dir` is not a directory that exists (or can be created) and is writable.
Result<void> check_output_dir(const std::string& dir);

// A report folder as `simulate`, `route` and `scale` write it: check_output_dir(dir), create
// it (and its parents), then DIR/report.html and DIR/report.json, each with
// write_file_atomically, report.json (what scripts read) last; when report.json cannot be
// written the new report.html is removed again, so a failure never leaves a report.html
// without its report.json. Both texts are rendered by the caller first, so a failed render
// creates nothing. `extra` files (e.g. simulate's jobs.csv) are written after report.html
// and before report.json, and removed with it on failure.
struct ReportFile {
  std::string_view name;  // file name inside the folder
  std::string_view text;
};
Result<void> write_report_dir(const std::string& dir, std::string_view json_text, std::string_view html_text,
                              std::span<const ReportFile> extra = {});

// `dir`/`name` with one separator whatever `dir` ends with ("out//" + "report.html" gives
// "out/report.html"; "/" stays the root): the path of a file a command writes into a folder,
// as it is written and as it is printed.
std::string path_in_dir(const std::string& dir, std::string_view name);

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
