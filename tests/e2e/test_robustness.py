"""Issue 18's examples end to end: every one gives a clean error with the documented exit
code (1 bad input, 2 usage), never an abort (134), an internal error (70), a silently
dropped value or a file left behind."""

import json
import os
import signal
import subprocess
import time
import unittest

from toposched_cli import BINARY, SOURCE_DIR, temp_dir

PRESET = "preset:dgx-h100?nodes=2"


def run(*args, timeout=120):
    """Runs toposched with str or bytes arguments; stdout/stderr decoded leniently."""
    argv = [BINARY.encode()] + [a if isinstance(a, bytes) else a.encode() for a in args]
    p = subprocess.run(argv, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return path


class Robustness(unittest.TestCase):
    def assertCleanError(self, rc, err, code=1, *needles):
        self.assertEqual(rc, code, err)
        self.assertIn("toposched: error:", err)
        self.assertNotIn("internal error", err)
        for n in needles:
            self.assertIn(n, err)

    # --- invalid UTF-8 reaching JSON output: rejected with where it is (one rule, docs/robustness.md)
    def test_job_id_with_invalid_utf8_in_json_output(self):
        rc, out, err = run("place", "--cluster", PRESET, "--gpus", "1", "--job", b"j\x99", "--format", "json")
        self.assertCleanError(rc, err, 1, "not valid UTF-8", "/job", "0x99")
        self.assertEqual(out, "")

    def test_job_id_with_invalid_utf8_is_not_saved_in_state(self):
        with temp_dir() as d:
            state = os.path.join(d, "state.json")
            rc, _, err = run("place", "--cluster", PRESET, "--gpus", "1", "--job", b"j\x99", "--save-state", state)
            self.assertCleanError(rc, err, 1, "not valid UTF-8")
            self.assertEqual(os.listdir(d), [])

    def test_spec_name_with_invalid_utf8_is_refused_where_it_is_read(self):
        # YAML and JSON files must be UTF-8: the reader stops at the byte (make mutations found
        # a state file whose job id held 0x99 read, then `place` dying as it answered).
        with temp_dir() as d:
            spec = os.path.join(d, "c.yaml")
            text = open(os.path.join(SOURCE_DIR, "examples/cluster-small.yaml"), "rb").read()
            write(spec, text.replace(b"name: example", b"name: ex\x99ample", 1))
            line = text[:text.index(b"name: example")].count(b"\n") + 1
            for fmt in ("json", "text"):
                rc, out, err = run("show", "--cluster", spec, "--format", fmt)
                self.assertCleanError(rc, err, 1, f"c.yaml:{line}:9: expected UTF-8 text", "found byte 0x99")
                self.assertEqual(out, "")

    def test_state_file_job_id_with_invalid_utf8_is_refused(self):
        with temp_dir() as d:
            state = write(os.path.join(d, "state.json"),
                          open(os.path.join(SOURCE_DIR, "tests/data/fuzz-regressions/state-invalid-utf8-job-place.json"), "rb").read())
            rc, out, err = run("place", "--cluster", PRESET, "--gpus", "2", "--state", state)
            self.assertCleanError(rc, err, 1, "state.json:3:14: expected UTF-8 text", "found byte 0x99")
            self.assertEqual(out, "")

    def test_names_with_invalid_utf8_from_other_formats_stop_at_json_output(self):
        # topology.conf is not YAML: its names are read as bytes, and JSON output refuses them.
        with temp_dir() as d:
            conf = write(os.path.join(d, "t.conf"), b"SwitchName=leaf1 Nodes=gp\x99u[1-4]\nSwitchName=spine Switches=leaf1\n")
            rc, out, err = run("show", "--cluster", conf, "--format", "json")
            self.assertCleanError(rc, err, 1, "not valid UTF-8", "0x99")
            rc, out, err = run("show", "--cluster", conf)  # text output is not JSON: fine
            self.assertEqual(rc, 0, err)
            # The cluster is named after its file: c\x99.conf names it 'c\x99', which the report's JSON refuses.
            named = write(os.path.join(os.fsencode(d), b"c\x99.conf"), b"SwitchName=leaf1 Nodes=gpu[1-4]\nSwitchName=spine Switches=leaf1\n")
            report = os.path.join(d, "report")
            rc, _, err = run("simulate", "--cluster", named, "--trace",
                             os.path.join(SOURCE_DIR, "tests/data/traces/native/small.csv"),
                             "--policies", "first-fit", "--report", report, "--quiet")
            self.assertCleanError(rc, err, 1, "not valid UTF-8", "/run/cluster")
            self.assertFalse(os.path.exists(report), "a failed report leaves no directory")

    # --- duplicate keys: an error naming both positions, in every YAML/JSON reader
    def test_duplicate_nodes_key_in_spec(self):
        with temp_dir() as d:
            text = open(os.path.join(SOURCE_DIR, "examples/cluster-small.yaml")).read()
            nodes = text[text.index("\nnodes:"):text.index("\n", text.index("\nnodes:") + 1)]
            spec = write(os.path.join(d, "c.yaml"), text + nodes + "\n  - {names: extra, type: hgx-h100}\n")
            rc, _, err = run("show", "--cluster", spec)
            self.assertCleanError(rc, err, 1, "key 'nodes' repeated, first at line")
            self.assertRegex(err, r"c\.yaml:\d+:1: key 'nodes' repeated, first at line \d+")

    def test_duplicate_keys_in_other_readers(self):
        with temp_dir() as d:
            cases = {
                "topograph.yaml": ("show", "--cluster", "{}", "switches:\n  leaf: {}\nblocks:\n- switch: leaf\n  nodes: [a1]\n  switch: leaf\n"),
                "mix.yaml": ("simulate", "--cluster", PRESET, "--generate", "{}", "--policies", "first-fit", "jobs: 5\nseed: 1\njobs: 7\n"),
                "job.yaml": ("cost", "--cluster", "preset:dgx-h100?nodes=4", "--job", "{}", "--placement",
                             os.path.join(SOURCE_DIR, "tests/data/cost_placement.yaml"), "model: {params: 7e9}\nmodel: {params: 8e9}\n"),
                "nodes.json": ("discover", "--k8s-nodes", "{}", '{"kind": "NodeList", "items": [], "items": []}'),
                "state.json": ("place", "--cluster", PRESET, "--gpus", "1", "--state", "{}",
                               '{"format": "toposched-allocation-state", "version": 1, "version": 1, "cluster": "dgx-h100-2n", "gpus": 16, "jobs": []}'),
                "philly.json": ("simulate", "--cluster", PRESET, "--trace", "{}", "--trace-format", "philly", "--policies", "first-fit",
                                '[{"jobid": "a", "jobid": "b"}]'),
            }
            for name, (*args, content) in cases.items():
                with self.subTest(name):
                    path = write(os.path.join(d, name), content)
                    rc, _, err = run(*[path if a == "{}" else a for a in args])
                    self.assertCleanError(rc, err, 1, "repeated, first at line", name + ":")

    # --- trailing content after the document
    def test_trailing_content(self):
        with temp_dir() as d:
            state = os.path.join(d, "s.json")
            rc, _, err = run("place", "--cluster", PRESET, "--gpus", "1", "--save-state", state)
            self.assertEqual(rc, 0, err)
            with open(state, "a") as f:
                f.write("garbage\n")
            rc, _, err = run("place", "--cluster", PRESET, "--gpus", "1", "--state", state)
            self.assertCleanError(rc, err, 1, "s.json:", "second document")
            text = open(os.path.join(SOURCE_DIR, "examples/cluster-small.yaml")).read()
            spec = write(os.path.join(d, "c.yaml"), text + "---\nname: other\n")
            rc, _, err = run("show", "--cluster", spec)
            self.assertCleanError(rc, err, 1, "c.yaml:", "second document")

    # --- the small inconsistencies
    def test_unknown_gpu_model_in_k8s_label_is_bad_input_with_position(self):
        with temp_dir() as d:
            nodes = write(os.path.join(d, "nodes.json"), json.dumps({"kind": "NodeList", "items": [
                {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "Quantum-Abacus-9000",
                                                        "network.topology.nvidia.com/leaf": "s1"}}}]}, indent=1))
            rc, _, err = run("discover", "--k8s-nodes", nodes)
            self.assertCleanError(rc, err, 1, "unknown GPU model 'Quantum-Abacus-9000'")
            self.assertRegex(err, r"nodes\.json:\d+:\d+: ")

    def test_gpus_zero_message(self):
        rc, _, err = run("place", "--cluster", PRESET, "--gpus", "0")
        self.assertEqual(rc, 2, err)
        self.assertIn("expected a positive whole number, found '0'", err)
        self.assertNotIn("1.79", err)

    def test_empty_job_id(self):
        rc, out, err = run("place", "--cluster", PRESET, "--gpus", "1", "--job", "")
        self.assertEqual(rc, 2, err)
        self.assertIn("--job: needs a non-empty job id", err)
        self.assertEqual(out, "")

    def test_negative_memory_and_huge_submit_time(self):
        with temp_dir() as d:
            text = open(os.path.join(SOURCE_DIR, "examples/cluster-small.yaml")).read()
            spec = write(os.path.join(d, "c.yaml"), text.replace("memory_gb: 80", "memory_gb: -1"))
            rc, _, err = run("show", "--cluster", spec)
            self.assertCleanError(rc, err, 1, "c.yaml:8:", "memory", "-1")
            trace = write(os.path.join(d, "t.csv"), "id,submit_s,gpus,duration_s\nj1,0,1,60\nj2,1e23,1,60\n")
            rc, _, err = run("simulate", "--cluster", PRESET, "--trace", trace, "--policies", "first-fit")
            self.assertCleanError(rc, err, 1, "t.csv:3:", "submit_s")

    def test_sigterm_during_export_leaves_no_temporary_file(self):
        # A large export takes long enough to be interrupted at many points; whatever the
        # moment, the directory holds either nothing or the complete file, never a .tmp-*.
        with temp_dir() as d:
            out = os.path.join(d, "labels.sh")
            cluster = "preset:dgx-h100?nodes=4096"
            for delay in (0.05, 0.2, 0.5, 1.0, 2.0):
                p = subprocess.Popen([BINARY, "export", "--cluster", cluster, "--to", "k8s-labels", "-o", out],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(delay)
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=120)
                self.assertIn(p.returncode, (0, -signal.SIGTERM))
                left = [f for f in os.listdir(d) if f != "labels.sh"]
                self.assertEqual(left, [], f"after SIGTERM at {delay} s")
                if os.path.exists(out):
                    self.assertTrue(open(out).read().endswith("\n"))
                    os.remove(out)


if __name__ == "__main__":
    unittest.main()
