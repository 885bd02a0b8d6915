// toposched command line: one subcommand per file in this folder; see docs/cli.md.
#include <iostream>

#include "cli/common.h"

namespace {
constexpr const char* kDescription =
    "toposched: topology-aware GPU placement.\n"
    "Discovers how a GPU cluster is connected, exports that to Slurm and Kubernetes,\n"
    "places jobs on the GPUs that minimise communication, and simulates the gain.\n\n"
    "A cluster (SPEC) is a file, detected by content (native YAML/JSON spec, Slurm\n"
    "topology.conf, Topograph cluster model), or preset:NAME[?key=value&...];\n"
    "'toposched presets' lists the built-in ones. A GPU is NODE:INDEX.\n"
    "Run 'toposched COMMAND --help' for a command's options.";
}

int main(int argc, char** argv) {
  using namespace toposched::cli;
  CLI::App app{kDescription, "toposched"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "toposched 0.1.0");
  app.footer("Exit status: 0 success, 1 error (bad input, infeasible request), 2 usage error.");
  int exit_code = kExitOk;
  for (Registrar r : {register_presets, register_show, register_path, register_discover, register_export, register_cost, register_place, register_release, register_frag, register_simulate, register_serve, register_state, register_route, register_slurm, register_scale}) r(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "toposched: error: " << e.what() << "\n";
    std::cerr << "Run 'toposched --help' or 'toposched COMMAND --help' for usage.\n";
    return kExitUsage;
  }
  return exit_code;
}
