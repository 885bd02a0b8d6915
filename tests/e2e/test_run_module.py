"""run_module.py, the runner ctest starts every e2e module with: a module with a skipped test
fails unless TOPOSCHED_ALLOW_SKIPS=1, a module that runs no test fails, a failing test fails,
and a module whose tests all ran and passed passes."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_module.py")

MODULES = {
    "all_pass": """
        import unittest
        class T(unittest.TestCase):
            def test_a(self): self.assertEqual(1 + 1, 2)
    """,
    "one_skipped": """
        import unittest
        class T(unittest.TestCase):
            def test_a(self): pass
            @unittest.skip("etcd is not installed")
            def test_b(self): pass
    """,
    "skips_whole_class": """
        import unittest
        @unittest.skipIf(True, "slurmctld not found")
        class T(unittest.TestCase):
            def test_a(self): pass
    """,
    "one_failing": """
        import unittest
        class T(unittest.TestCase):
            def test_a(self): self.assertEqual(1, 2)
    """,
    "no_tests": """
        X = 1
    """,
}


def run_runner(source, allow_skips):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "test_sample.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(source))
        env = dict(os.environ)
        env.pop("TOPOSCHED_ALLOW_SKIPS", None)
        if allow_skips:
            env["TOPOSCHED_ALLOW_SKIPS"] = "1"
        return subprocess.run([sys.executable, RUNNER, path], env=env, capture_output=True, text=True, timeout=60)


class RunModule(unittest.TestCase):
    def test_passing_module_passes(self):
        self.assertEqual(run_runner(MODULES["all_pass"], False).returncode, 0)

    def test_a_skipped_test_fails_the_module(self):
        proc = run_runner(MODULES["one_skipped"], False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("etcd is not installed", proc.stderr)

    def test_a_skipped_class_fails_the_module(self):
        proc = run_runner(MODULES["skips_whole_class"], False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("slurmctld not found", proc.stderr)

    def test_explicit_opt_out_lets_skips_pass_and_still_lists_them(self):
        proc = run_runner(MODULES["one_skipped"], True)
        self.assertEqual(proc.returncode, 0)
        self.assertIn("allowed by TOPOSCHED_ALLOW_SKIPS", proc.stderr)

    def test_failing_test_fails_the_module(self):
        self.assertEqual(run_runner(MODULES["one_failing"], True).returncode, 1)

    def test_module_without_tests_fails(self):
        proc = run_runner(MODULES["no_tests"], True)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("ran no test", proc.stderr)


if __name__ == "__main__":
    unittest.main()
