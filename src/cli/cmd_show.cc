// `toposched show`: summarises a cluster: nodes, GPUs, node types, tiers and domains.
#include <map>

#include <fmt/format.h>

#include "cli/common.h"
#include "formats/cluster_summary.h"
#include "formats/native_spec.h"
#include "topology/file_io.h"
#include "topology/hostlist.h"

namespace toposched::cli {

namespace {
struct ShowOptions {
  std::string cluster;
  OutputFormat format = OutputFormat::kText;
  bool spec = false;
  std::string output = "-";
};

int run_show(const ShowOptions& o) {
  int code = kExitOk;
  if (o.spec && !output_usable_or_report(o.output, code)) return code;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  if (o.spec) {
    const Result<std::string> text =
        o.format == OutputFormat::kJson ? write_native_json(*c) : Result<std::string>(write_native_yaml(*c));
    if (!text) return report(text.error());
    auto written = write_file_atomically(o.output, *text);
    return written ? kExitOk : report(written.error());
  }
  if (o.output != "-") return usage_error("--output is only used with --spec");
  Json s = cluster_summary_json(*c);
  if (o.format == OutputFormat::kJson) {
    return print_json(s);
  }
  fmt::print("cluster      {}\n", c->name());
  fmt::print("nodes        {}  {}\n", c->node_count(), s["hostlist"].get<std::string>());
  fmt::print("gpus         {}\n", c->gpu_count());
  for (const auto& t : s["node_types"]) {
    const std::string host_memory =
        t.contains("host_memory_gb") ? fmt::format(", {} GB host memory", t["host_memory_gb"].get<double>()) : "";
    fmt::print("node type    {}: {} nodes x {} {} ({} GB){}, {} NICs{}\n", t["name"].get<std::string>(),
               t["nodes"].get<std::size_t>(), t["gpus_per_node"].get<int>(), t["gpu_model"].get<std::string>(),
               t["gpu_memory_gb"].get<double>(), t["nvswitch"].get<bool>() ? ", NVSwitch" : "",
               t["nics"].get<std::size_t>(), host_memory);
  }
  if (c->tiers().empty()) fmt::print("fabric       none (no switch data)\n");
  for (const auto& f : s["fabric"])
    fmt::print("tier         {}: {} switches, oversubscription {}:1\n", f["tier"].get<std::string>(), f["switches"].get<std::size_t>(),
               f["oversubscription"].get<double>());
  for (const auto& d : s["accelerator_domains"])
    fmt::print("domain       {}: {} ({} GPUs, {} GB/s per GPU)\n", d["name"].get<std::string>(), d["nodes"].get<std::string>(),
               d["gpus"].get<std::size_t>(), d["bandwidth_GBps"].get<double>());
  if (s["nodes_without_switch"].get<std::size_t>() > 0 && !c->tiers().empty())
    fmt::print("warning      {} nodes are under no switch\n", s["nodes_without_switch"].get<std::size_t>());
  return kExitOk;
}
}  // namespace

void register_show(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ShowOptions>();
  CLI::App* cmd = app.add_subcommand("show", "Summarise a cluster: nodes, GPUs, node types, fabric tiers, NVLink domains");
  cmd->add_option("--cluster,-c", opts->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_flag("--spec", opts->spec, "Print the whole cluster as a native spec (YAML, or JSON with --format json)");
  cmd->add_option("--output,-o", opts->output, "With --spec: write the spec to FILE (atomically) instead of stdout");
  add_format_option(*cmd, opts->format);
  cmd->callback([opts, &exit_code] { exit_code = run_show(*opts); });
}

}  // namespace toposched::cli
