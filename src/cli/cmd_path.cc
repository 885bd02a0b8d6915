// `toposched path`: how two GPUs are joined, with bottleneck bandwidth and latency.
#include <cmath>

#include <fmt/format.h>

#include "cli/common.h"
#include "formats/cluster_summary.h"

namespace toposched::cli {

namespace {
struct PathOptions {
  std::string cluster;
  std::vector<std::string> gpus;
  OutputFormat format = OutputFormat::kText;
};

int run_path(const PathOptions& o) {
  if (o.gpus.size() != 2) return usage_error("path takes exactly two GPUs (NODE:INDEX NODE:INDEX)");
  int code = kExitOk;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  auto a = parse_gpu(*c, o.gpus[0]);
  if (!a) return report(a.error());
  auto b = parse_gpu(*c, o.gpus[1]);
  if (!b) return report(b.error());
  Path p = c->path(*a, *b);
  std::string level = c->level_name(p);
  if (o.format == OutputFormat::kJson) {
    if (int rc = print_json(path_json(*c, *a, *b, o.gpus[0], o.gpus[1])); rc != kExitOk) return rc;
  } else if (std::isfinite(p.bandwidth_GBps)) {
    fmt::print("{} -> {}: {}, {:.1f} GB/s per GPU, {:.2f} us\n", o.gpus[0], o.gpus[1], level, p.bandwidth_GBps, p.latency_us);
  } else {
    fmt::print("{} -> {}: {}\n", o.gpus[0], o.gpus[1], level);
  }
  return kExitOk;
}
}  // namespace

void register_path(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<PathOptions>();
  CLI::App* cmd = app.add_subcommand("path", "Show how two GPUs are joined: level, bandwidth per GPU, latency");
  cmd->add_option("--cluster,-c", opts->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_option("gpus", opts->gpus, "Two GPUs as NODE:INDEX, e.g. dgx-h100-001:0 dgx-h100-002:0")->required()->expected(2);
  add_format_option(*cmd, opts->format);
  cmd->footer("Levels, closest first: same-gpu, nvlink, pcie-pix, pcie-pxb, pcie-phb, pcie-node, pcie-sys,\n"
              "accel-domain, tier:<name> (closest tier first), cross-root. Bandwidth is per GPU and per\n"
              "direction when every GPU of the node uses that level at once.");
  cmd->callback([opts, &exit_code] { exit_code = run_path(*opts); });
}

}  // namespace toposched::cli
