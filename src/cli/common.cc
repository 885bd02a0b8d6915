#include "cli/common.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "formats/cluster_source.h"
#include "formats/json_output.h"
#include "placement/state_file.h"
#include "topology/file_io.h"

namespace toposched::cli {

void add_format_option(CLI::App& cmd, OutputFormat& format) {
  static const std::map<std::string, OutputFormat> kFormats = {{"text", OutputFormat::kText},
                                                               {"json", OutputFormat::kJson}};
  cmd.add_option("--format", format, "Output format: text (default) or json")
      ->transform(CLI::CheckedTransformer(kFormats, CLI::ignore_case))
      ->option_text("text|json");
}

int report(const Error& e) {
  std::cerr << "toposched: error: " << e.to_string() << "\n";
  return e.code == ErrorCode::kInvalidArgument ? kExitUsage : kExitError;
}

int usage_error(const std::string& message) {
  std::cerr << "toposched: error: " << message << "\n";
  return kExitUsage;
}

std::optional<Cluster> load_cluster_or_report(const std::string& spec, int& exit_code) {
  auto c = load_cluster(spec);
  if (!c) {
    exit_code = report(c.error());
    // A bad preset parameter is a usage error; a bad file is an input error.
    if (c.error().code == ErrorCode::kInvalidArgument && !spec.starts_with("preset:")) exit_code = kExitError;
    return std::nullopt;
  }
  return std::move(*c);
}

std::optional<AllocationState> load_state_or_report(const Cluster& cluster, const std::string& path, int& exit_code) {
  if (path.empty()) return AllocationState(cluster);
  auto loaded = load_state_file(cluster, path);
  if (!loaded) {
    report(loaded.error());
    exit_code = kExitError;
    return std::nullopt;
  }
  return std::move(*loaded);
}

bool output_usable_or_report(const std::string& path, int& exit_code) {
  if (path.empty()) return true;
  auto ok = check_output_path(path);
  if (!ok) exit_code = report(ok.error());
  return bool(ok);
}

bool output_dir_usable_or_report(const std::string& dir, int& exit_code) {
  if (dir.empty()) return true;
  auto ok = check_output_dir(dir);
  if (!ok) exit_code = report(ok.error());
  return bool(ok);
}


int print_json(const Json& j) {
  auto text = dump_json(j, 2);
  if (!text) return report(text.error());
  std::cout << *text << "\n";
  return kExitOk;
}

const CLI::Validator kPositiveCount(
    [](const std::string& value) -> std::string {
      long long n = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || ptr != value.data() + value.size() || n < 1)
        return fmt::format("expected a positive whole number, found '{}'", value);
      return std::string();
    },
    "POSITIVE");

const CLI::Validator kPositiveNumber(
    [](const std::string& value) -> std::string {
      double x = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
      if (ec != std::errc() || ptr != value.data() + value.size() || !std::isfinite(x) || x <= 0)
        return fmt::format("expected a number above 0, found '{}'", value);
      return std::string();
    },
    "POSITIVE");

std::optional<StateFileLock> lock_state_files_or_report(std::vector<std::string> paths, int& exit_code) {
  auto lock = StateFileLock::acquire(std::move(paths));
  if (!lock) {
    report(lock.error());
    exit_code = kExitError;
    return std::nullopt;
  }
  return std::move(*lock);
}

}  // namespace toposched::cli
