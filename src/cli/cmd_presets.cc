// `toposched presets`: lists the built-in reference clusters and their parameters.
#include <fmt/format.h>

#include "cli/common.h"
#include "topology/presets.h"

namespace toposched::cli {

namespace {
struct PresetsOptions {
  OutputFormat format = OutputFormat::kText;
};

int run_presets(const PresetsOptions& o) {
  if (o.format == OutputFormat::kJson) {
    Json out = Json::array();
    for (const auto& p : preset_catalog()) {
      auto c = build_preset(p.name);
      if (!c) return report(c.error());
      Json params = Json::object();
      for (const auto& param : p.params) params[param.name] = {{"default", param.default_value}, {"help", param.help}};
      out.push_back({{"name", p.name}, {"description", p.description}, {"nodes", c->node_count()},
                     {"gpus", c->gpu_count()}, {"parameters", params}});
    }
    return print_json(out);
  }
  for (const auto& p : preset_catalog()) {
    auto c = build_preset(p.name);
    if (!c) return report(c.error());
    fmt::print("{:<12} {} ({} nodes, {} GPUs at the defaults)\n", p.name, p.description, c->node_count(), c->gpu_count());
    for (const auto& param : p.params)
      fmt::print("  {:<18} {} (default {})\n", param.name, param.help, param.default_value);
  }
  fmt::print("\nUse one as --cluster 'preset:NAME?key=value&key=value'.\n");
  return kExitOk;
}
}  // namespace

void register_presets(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<PresetsOptions>();
  CLI::App* cmd = app.add_subcommand("presets", "List the built-in reference clusters and their parameters");
  add_format_option(*cmd, opts->format);
  cmd->callback([opts, &exit_code] { exit_code = run_presets(*opts); });
}

}  // namespace toposched::cli
