// toposched command line: one subcommand per file in this folder; see docs/cli.md.
#include <cstdlib>
#include <exception>
#include <iostream>


#include "cli/common.h"
#include "topology/file_io.h"

namespace {
constexpr const char* kDescription =
    "toposched: topology-aware GPU placement.\n"
    "Discovers how a GPU cluster is connected, exports that to Slurm and Kubernetes,\n"
    "places jobs on the GPUs that minimise communication, and simulates the gain.\n\n"
    "A cluster (SPEC) is a file, detected by content (native YAML/JSON spec, Slurm\n"
    "topology.conf, Topograph cluster model), or preset:NAME[?key=value&...];\n"
    "'toposched presets' lists the built-in ones. A GPU is NODE:INDEX.\n"
    "Run 'toposched COMMAND --help' for a command's options.";

// Last resort: an exception that escaped the library's Result discipline (a bug, never
// bad input: docs/robustness.md) ends the run with a message and exit 70 (EX_SOFTWARE)
// instead of SIGABRT. std::terminate covers exceptions thrown on other threads.
constexpr int kExitInternal = 70;

void report_internal_error(const char* what) {
  std::cerr << "toposched: internal error: " << what
            << "\nThis is a bug in toposched; please report it with the command line that caused it.\n";
}

[[noreturn]] void on_terminate() {
  const char* what = "unexpected termination";
  try {
    if (auto e = std::current_exception()) std::rethrow_exception(e);
  } catch (const std::exception& e) {
    report_internal_error(e.what());
    std::_Exit(kExitInternal);
  } catch (...) {
    what = "an exception of unknown type";
  }
  report_internal_error(what);
  std::_Exit(kExitInternal);
}

int run(int argc, char** argv) {
  using namespace toposched::cli;
  CLI::App app{kDescription, "toposched"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "toposched 0.1.0");
  app.footer("Exit status: 0 success, 1 error (bad input, infeasible request), 2 usage error, 70 internal error (a bug).");
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
}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  toposched::install_temporary_file_cleanup();
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    report_internal_error(e.what());
  } catch (...) {
    report_internal_error("an exception of unknown type");
  }
  return kExitInternal;
}
