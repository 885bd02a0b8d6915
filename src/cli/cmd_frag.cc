// `toposched frag`: fragmentation metrics of an allocation state.
#include <fmt/format.h>

#include "cli/common.h"
#include "placement/fragmentation.h"
#include "placement/state_file.h"

namespace toposched::cli {

namespace {
struct FragOptions {
  std::string cluster;
  std::string state;
  std::string sizes;
  OutputFormat format = OutputFormat::kText;
};

int run_frag(const FragOptions& o) {
  std::vector<JobSizeWeight> sizes = default_job_sizes();
  if (!o.sizes.empty()) {
    auto parsed = parse_job_sizes(o.sizes);
    if (!parsed) return report(parsed.error());
    sizes = std::move(*parsed);
  }
  int code = kExitOk;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  auto loaded_state = load_state_or_report(*c, o.state, code);
  if (!loaded_state) return code;
  AllocationState& state = *loaded_state;
  FragmentationReport f = fragmentation(state, sizes);
  if (o.format == OutputFormat::kJson) {
    return print_json(fragmentation_to_json(f, sizes));
  }
  fmt::print("free GPUs: {} of {}\n", f.free_gpus, f.total_gpus);
  fmt::print("whole free nodes: {} of {} ({} partly used)\n", f.free_whole_nodes, f.total_nodes,
             f.partially_used_nodes);
  fmt::print("whole free leaves: {} of {}\n", f.free_whole_leaves, f.total_leaves);
  if (f.total_domains) fmt::print("whole free accelerator domains: {} of {}\n", f.free_whole_domains, f.total_domains);
  fmt::print("largest job placeable inside one:\n");
  for (const auto& l : f.levels)
    fmt::print("  {:<14} {} GPUs ({} whole nodes)\n", l.level, l.largest_free_gpus, l.largest_free_nodes);
  fmt::print("expected unusable free GPUs for the job-size mix: {:.1f} ({:.1f}% of free)\n", f.expected_unusable_gpus,
             100 * f.unusable_fraction);
  return kExitOk;
}
}  // namespace

void register_frag(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<FragOptions>();
  CLI::App* cmd = app.add_subcommand("frag", "Fragmentation metrics of an allocation state");
  cmd->add_option("--cluster,-c", o->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_option("--state", o->state, "Allocation state (JSON written by place --save-state); default: empty cluster");
  cmd->add_option("--sizes", o->sizes,
                  "Job-size mix as GPUS:WEIGHT,... (default 1:.25,2:.1,4:.15,8:.25,16:.1,32:.1,64:.05)");
  add_format_option(*cmd, o->format);
  cmd->footer(
      "Reports wholly free nodes, leaves and accelerator domains, the largest job that fits under one\n"
      "node / switch of each tier / domain, and the expected number of free GPUs a job drawn from the\n"
      "size mix could not use (a node's free GPUs are unusable for a size that fits a node but not\n"
      "them, or for a multi-node size when the node is not wholly free).");
  cmd->callback([o, &exit_code] { exit_code = run_frag(*o); });
}

}  // namespace toposched::cli
