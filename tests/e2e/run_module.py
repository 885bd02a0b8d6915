"""Runs one end-to-end test module for ctest and fails when any of its tests was skipped.

A module that skips itself (Slurm, etcd, Chromium or root missing) used to exit 0, so ctest
counted it as passed and a green run did not mean that every module ran. `make test`
installs what every module needs (scripts/install-deps), so a skip on a machine set up by the
project's own scripts is a failure of that setup and is reported as one.

Set TOPOSCHED_ALLOW_SKIPS=1 to opt out explicitly (a developer machine without Slurm, say):
the skips are still listed, and the module passes.

Usage: python3 run_module.py tests/e2e/test_serve.py [unittest names...]
"""
import importlib.util
import os
import sys
import unittest


def load_module(path):
    directory = os.path.dirname(os.path.abspath(path))
    # The modules import their harnesses (serve_harness, proc_harness, ...) from beside them.
    sys.path.insert(0, directory)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build_suite(module, names):
    loader = unittest.TestLoader()
    if names:
        return loader.loadTestsFromNames(names, module)
    return loader.loadTestsFromModule(module)


def report_skips(result, allowed):
    for test, reason in result.skipped:
        print(f"run_module: skipped {test.id()}: {reason}", file=sys.stderr)
    if allowed:
        print(f"run_module: {len(result.skipped)} skipped, allowed by TOPOSCHED_ALLOW_SKIPS", file=sys.stderr)
        return True
    print(f"run_module: {len(result.skipped)} test(s) skipped; every e2e module must run under make test "
          "(scripts/install-deps installs what they need; TOPOSCHED_ALLOW_SKIPS=1 opts out)", file=sys.stderr)
    return False


def main(argv):
    if len(argv) < 2:
        print("usage: run_module.py MODULE.py [TEST_NAME...]", file=sys.stderr)
        return 2
    module = load_module(argv[1])
    suite = build_suite(module, argv[2:])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if result.testsRun == 0:
        print(f"run_module: {argv[1]} ran no test", file=sys.stderr)
        return 1
    if not result.wasSuccessful():
        return 1
    if result.skipped and not report_skips(result, os.environ.get("TOPOSCHED_ALLOW_SKIPS") == "1"):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
