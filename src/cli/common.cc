#include "cli/common.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "formats/cluster_source.h"
#include "formats/json_output.h"
#include "placement/state_file.h"

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

Result<GpuId> parse_gpu(const Cluster& cluster, std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("expected a GPU as NODE:INDEX (e.g. dgx-h100-001:3), found '{}'", text));
  std::string_view node_name = text.substr(0, colon);
  std::string_view index_text = text.substr(colon + 1);
  auto node = cluster.find_node(node_name);
  if (!node) return make_error(ErrorCode::kInvalidArgument, fmt::format("no node named '{}' in cluster '{}'", node_name, cluster.name()));
  int index = 0;
  auto [ptr, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  if (ec != std::errc() || ptr != index_text.data() + index_text.size())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("expected a GPU index after '{}:', found '{}'", node_name, index_text));
  int count = cluster.node_gpu_count(*node);
  if (index < 0 || index >= count)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("node '{}' has GPUs 0..{}, not {}", node_name, count - 1, index));
  return cluster.node_gpu(*node, index);
}

}  // namespace toposched::cli
