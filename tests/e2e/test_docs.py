"""Documentation that runs (issue 23, acceptance 1): every example in README.md and
docs/*.md runs as written, in order, in a scratch folder seeded like a fresh clone, and its
shown output matches the program's. The convention is in tests/e2e/doc_examples.py and
docs/cli.md ("Examples in these docs"); `scripts/doc-outputs --update` rewrites the shown
outputs after an intended change of numbers.

The binary is $TOPOSCHED (ctest passes the build's; under ASan the whole run takes about a
minute); $TOPOSCHED_DOCS_BINARY, when set, is used instead (e.g. build/release/toposched).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doc_examples  # noqa: E402

BINARY = os.environ.get("TOPOSCHED_DOCS_BINARY") or os.environ.get("TOPOSCHED", "toposched")


class DocumentationRuns(unittest.TestCase):
    def test_every_example_runs_and_matches(self):
        for path in doc_examples.documented_files():
            with self.subTest(file=os.path.relpath(path, doc_examples.SOURCE_DIR)):
                failures, _ = doc_examples.run_file(path, BINARY)
                self.assertEqual(failures, [], "\n\n".join(failures) +
                                 "\n\n(if the program's new output is intended: scripts/doc-outputs --update)")


class ConventionIsEnforced(unittest.TestCase):
    """The checker itself: a wrong shown output, an unmarked block, an indented command and a
    failing command are caught; placeholders match what they stand for."""

    def write(self, text):
        import tempfile
        fd, path = tempfile.mkstemp(suffix=".md")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path

    def test_output_mismatch_is_reported(self):
        path = self.write("```console\n$ toposched path -c 'preset:dgx-h100?nodes=2' dgx-h100-001:0 dgx-h100-002:0\n"
                          "dgx-h100-001:0 -> dgx-h100-002:0: tier:leaf, 1.0 GB/s per GPU, 3.50 us\n```\n")
        failures, _ = doc_examples.run_file(path, BINARY)
        self.assertEqual(len(failures), 1)
        self.assertIn("shown output differs", failures[0])

    def test_placeholders_and_update(self):
        path = self.write("```console\n$ toposched presets --format json\n[\n  {\n...\n]\n"
                          "$ toposched show -c 'preset:dgx-h100?nodes=2'\ncluster      dgx-h100-2n\n"
                          "nodes        2  dgx-h100-...\ngpus         99\n...\n```\n")
        failures, _ = doc_examples.run_file(path, BINARY)
        self.assertEqual(len(failures), 1, failures)
        self.assertIn("-gpus         99", failures[0])
        failures, changed = doc_examples.run_file(path, BINARY, update=True)
        self.assertEqual((failures, changed), ([], 1))
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("[\n  {\n...\n]\n", text)                       # a matching output is left alone
        self.assertIn("nodes        2  dgx-h100-...\ngpus         16\n...\n", text)  # placeholders kept, the rest rewritten
        self.assertEqual(doc_examples.run_file(path, BINARY), ([], 0))

    def test_convention_problems(self):
        path = self.write("Text.\n\n    toposched presets\n\n```sh\ntoposched serve -c x.yaml\n```\n\n"
                          "```text\ntoposched show -c preset:dgx-h100\n```\n\n<!-- doc-test: skip -->\n"
                          "```console\n$ toposched presets\n```\n\n```text\ntoposched show --cluster SPEC [--spec]\n```\n")
        _, problems = doc_examples.parse(path)
        self.assertEqual(len(problems), 4, problems)
        for expected in ("indented code block", "```sh block", "a command in a text block", "needs a reason"):
            self.assertTrue(any(expected in p for p in problems), (expected, problems))

    def test_failing_command_and_expected_error(self):
        path = self.write("```console\n$ toposched show -c nothing.yaml\n```\n\n"
                          "```console\n$ toposched show -c nothing.yaml\ntoposched: error: nothing.yaml...\n```\n")
        failures, _ = doc_examples.run_file(path, BINARY)
        self.assertEqual(len(failures), 1, failures)
        self.assertIn("exit status 1", failures[0])

    def test_matcher(self):
        self.assertTrue(doc_examples.output_matches(["a", "...", "d"], ["a", "b", "c", "d"]))
        self.assertTrue(doc_examples.output_matches(["a", "...", "b"], ["a", "b"]))
        self.assertFalse(doc_examples.output_matches(["a", "...", "d"], ["a", "b", "c"]))
        self.assertTrue(doc_examples.output_matches(["x ... z  "], ["x y z", ""]))
        self.assertFalse(doc_examples.output_matches(["x y"], ["x y", "extra"]))
        self.assertEqual(doc_examples.refreshed_output(["h1", "...", "t1"], ["h2", "m", "m", "t2"]),
                         ["h2", "...", "t2"])


if __name__ == "__main__":
    unittest.main()
