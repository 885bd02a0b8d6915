// `toposched state import|export`: move jobs between a --state JSON file and a service
// store (service/state_transfer.h).
#include <fmt/format.h>

#include "cli/common.h"
#include "service/state_transfer.h"
#include "topology/file_io.h"

namespace toposched::cli {

namespace {
struct StateOptions {
  std::string cluster;
  std::string store = "sqlite:./toposched-state.db";
  std::string file;
  std::string output = "-";
};

int run_import(const StateOptions& o) {
  int code = kExitOk;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  auto store = service::open_store(o.store);
  if (!store) return report(store.error());
  auto n = service::import_state_file(*c, **store, o.file);
  if (!n) return report(n.error()) == kExitUsage ? kExitUsage : kExitError;
  fmt::print(stderr, "imported {} jobs from {} into {}\n", *n, o.file, o.store);
  return kExitOk;
}

int run_export(const StateOptions& o) {
  int code = kExitOk;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  auto store = service::open_store(o.store);
  if (!store) return report(store.error());
  auto text = service::export_state(*c, **store);
  if (!text) return report(text.error()) == kExitUsage ? kExitUsage : kExitError;
  auto ok = write_file_atomically(o.output, *text + "\n");
  return ok ? kExitOk : report(ok.error());
}
}  // namespace

void register_state(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<StateOptions>();
  CLI::App* cmd = app.add_subcommand("state", "Import a --state file into a service store, or export a store to one");
  cmd->require_subcommand(1);
  CLI::App* imp = cmd->add_subcommand("import", "Add the jobs of a --state JSON file to the store (all or nothing)");
  CLI::App* exp = cmd->add_subcommand("export", "Write the store's jobs as a --state JSON file");
  for (CLI::App* sub : {imp, exp}) {
    sub->add_option("--cluster,-c", o->cluster, "Cluster SPEC the store belongs to")->required();
    sub->add_option("--store", o->store, "Store URL (default sqlite:./toposched-state.db)");
  }
  imp->add_option("file", o->file, "State file written by place --save-state")->required();
  exp->add_option("--output,-o", o->output, "Write to FILE (atomically) instead of stdout");
  cmd->footer(
      "Examples:\n"
      "  toposched state import -c 'preset:dgx-h100?nodes=64' --store sqlite:s.db s.json\n"
      "  toposched state export -c 'preset:dgx-h100?nodes=64' --store sqlite:s.db -o s.json\n"
      "Stop the server that uses the store first: it reads the store only when it starts.");
  imp->callback([o, &exit_code] { exit_code = run_import(*o); });
  exp->callback([o, &exit_code] { exit_code = run_export(*o); });
}

}  // namespace toposched::cli
