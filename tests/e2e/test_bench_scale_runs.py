"""End-to-end: bench/scale-runs.py, the script `make bench` runs for issue 34's simulations
at 100,000 GPUs (every policy, 100,000 and 1,000,000 jobs), kept working by a short seeded
run here: the mix cut to 1,500 jobs, two policies, through the real binary (the debug build
in `make test`). It must print one table row per policy with its CPU time, wall time, peak
memory and ratio to first-fit, and exit 1 naming a policy that fails. Times are printed,
never asserted."""
import os
import re
import subprocess
import sys
import unittest

from toposched_cli import BINARY, SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "scale-runs.py")
ROW = re.compile(r"^\| (?P<policy>[a-z-]+) \| (?P<cpu>[0-9.]+) s \| (?P<wall>[0-9.]+) s \| (?P<peak>[0-9,]+) MB \| (?P<ratio>[0-9.]+x) \|$")


def scale_runs(*args):
    return subprocess.run([sys.executable, SCRIPT, BINARY, *args], capture_output=True, text=True, timeout=600)


class ScaleRuns(unittest.TestCase):
    def test_each_policy_gets_a_row_with_its_figures(self):
        r = scale_runs("--jobs", "1500", "--policies", "topo,first-fit")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1,500 jobs on preset:dgx-h100?nodes=12500 (easy-backfill)", r.stdout)
        rows = [m.groupdict() for m in map(ROW.match, r.stdout.splitlines()) if m]
        # first-fit runs first whatever the order given: the ratios are to it
        self.assertEqual([row["policy"] for row in rows], ["first-fit", "topo"], r.stdout)
        self.assertEqual(rows[0]["ratio"], "1.00x")
        for row in rows:
            self.assertGreater(float(row["cpu"]), 0, row)
            self.assertGreater(int(row["peak"].replace(",", "")), 0, row)

    def test_every_policy_is_the_binarys_list(self):
        help_text = subprocess.run([BINARY, "simulate", "--help"], capture_output=True, text=True, check=True).stdout
        listed = re.search(r"'all' \(default\): ([a-z,-]+)", help_text).group(1).split(",")
        sys.path.insert(0, os.path.dirname(SCRIPT))
        try:
            import importlib.util
            spec = importlib.util.spec_from_file_location("scale_runs", SCRIPT)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        finally:
            sys.path.pop(0)
        self.assertEqual(module.policies(BINARY), listed)
        self.assertIn("slurm-block", listed)

    def test_a_failing_policy_fails_the_run(self):
        r = scale_runs("--jobs", "200", "--policies", "first-fit,no-such-policy")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("no-such-policy: exit", r.stderr)
        self.assertIn("| first-fit |", r.stdout)


if __name__ == "__main__":
    unittest.main()
