"""A seeded sample of random fixture mutations through the real CLI (cli_mutations.py):
0 crashes, 0 hangs, 0 partial outputs. The full 10,000 run is `tests/e2e/cli_mutations.py
--count 10000` (docs/robustness.md)."""

import os
import unittest

import cli_mutations
from toposched_cli import BINARY

COUNT = int(os.environ.get("TOPOSCHED_MUTATIONS", "240"))


class CliMutations(unittest.TestCase):
    def test_seeded_sample(self):
        failures = cli_mutations.run_all(os.path.abspath(BINARY), COUNT, seed=18, jobs=2, timeout=120)
        report = "\n".join(f"case {i} ({fx}): {' '.join(argv)}\n  {problem}" for i, fx, argv, problem in failures)
        self.assertEqual(failures, [], report)


if __name__ == "__main__":
    unittest.main()
