// Shared plumbing of the toposched command line: output format option, error reporting
// with the exit codes of DESIGN.md (0 ok, 1 error, 2 usage), and the registration hook each
// subcommand file provides. No scheduling logic lives in cli/. Single-threaded.
#pragma once

#include <functional>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "placement/allocation_state.h"
#include "placement/engine.h"
#include "placement/state_file.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched::cli {

using Json = nlohmann::ordered_json;

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

enum class OutputFormat { kText, kJson };

// Adds `--format text|json` to a subcommand.
void add_format_option(CLI::App& cmd, OutputFormat& format);

// Prints "toposched: error: <file:line:col: message>" and returns the exit code (1, or 2
// for kInvalidArgument, which means the command line was wrong).
int report(const Error& e);
int usage_error(const std::string& message);

// Loads the --cluster SPEC, reporting failures; nullopt after an error was printed.
std::optional<Cluster> load_cluster_or_report(const std::string& spec, int& exit_code);

// Loads an allocation state file (an empty path means an empty cluster), reporting
// failures; nullopt after an error was printed.
std::optional<AllocationState> load_state_or_report(const Cluster& cluster, const std::string& path, int& exit_code);

// Takes the exclusive lock of the named state files (empty names skipped) for a
// read-decide-write cycle; nullopt after an error was printed.
std::optional<StateFileLock> lock_state_files_or_report(std::vector<std::string> paths, int& exit_code);

// Refuses an output (a FILE, or "-" for stdout) that could not be written, before any work
// is done (topology/file_io.h says what each kind of path gets); false after the error was
// printed. An empty path means "no output". `dir` checks a report folder instead of a file.
bool output_usable_or_report(const std::string& path, int& exit_code);
bool output_dir_usable_or_report(const std::string& dir, int& exit_code);

// Prints JSON to stdout followed by a newline and returns kExitOk; a string that is not
// valid UTF-8 prints nothing and reports the error instead (exit 1, formats/json_output.h).
[[nodiscard]] int print_json(const Json& j);

// Validator for counts given on the command line: a whole number of at least 1, with a
// message a newcomer can act on ("expected a positive whole number, found '0'").
extern const CLI::Validator kPositiveCount;
// The same for quantities: a finite number above 0 ("expected a number above 0, found '-1'").
extern const CLI::Validator kPositiveNumber;

// Each subcommand file defines one of these; main() calls them all.
// The callback stores the command's exit code in `exit_code`.
using Registrar = void (*)(CLI::App& app, int& exit_code);
void register_presets(CLI::App& app, int& exit_code);
void register_show(CLI::App& app, int& exit_code);
void register_path(CLI::App& app, int& exit_code);
void register_discover(CLI::App& app, int& exit_code);
void register_export(CLI::App& app, int& exit_code);
void register_cost(CLI::App& app, int& exit_code);
void register_place(CLI::App& app, int& exit_code);
void register_release(CLI::App& app, int& exit_code);
void register_frag(CLI::App& app, int& exit_code);
void register_simulate(CLI::App& app, int& exit_code);
void register_serve(CLI::App& app, int& exit_code);
void register_state(CLI::App& app, int& exit_code);
void register_route(CLI::App& app, int& exit_code);
void register_slurm(CLI::App& app, int& exit_code);
void register_scale(CLI::App& app, int& exit_code);

}  // namespace toposched::cli
