"""End-to-end: presets, show and path through the real binary (issue: Foundation)."""
import json
import os
import unittest

from toposched_cli import SOURCE_DIR, run, run_json, temp_dir


class PresetsTest(unittest.TestCase):
    def test_lists_every_reference_cluster(self):
        text = run("presets").stdout
        first_words = [line.split()[0] for line in text.splitlines() if line and not line.startswith(" ") and not line.startswith("Use")]
        for name in ["dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72", "pcie-l40s", "llama3-24k", "synthetic"]:
            self.assertIn(name, first_words)
        data = run_json("presets")
        by_name = {p["name"]: p for p in data}
        self.assertEqual(by_name["llama3-24k"]["gpus"], 24576)
        self.assertEqual(by_name["gb200-nvl72"]["gpus"], 576)
        for p in data:
            self.assertTrue({"name", "description", "nodes", "gpus"} <= p.keys())


class ShowTest(unittest.TestCase):
    def test_dgx_h100_64_nodes(self):
        data = run_json("show", "--cluster", "preset:dgx-h100?nodes=64")
        self.assertEqual(data["nodes"], 64)
        self.assertEqual(data["gpus"], 512)
        self.assertEqual(data["hostlist"], "dgx-h100-[001-064]")
        self.assertEqual(data["tiers"], ["leaf", "spine"])
        self.assertEqual(data["accelerator_domains"], [])

    def test_spec_file_round_trip_through_the_cli(self):
        with temp_dir() as d:
            spec = os.path.join(d, "nvl72.yaml")
            run("show", "--cluster", "preset:gb200-nvl72?racks=2", "--spec", "-o", spec)
            data = run_json("show", "--cluster", spec)
            self.assertEqual(data["gpus"], 144)
            self.assertEqual([dom["name"] for dom in data["accelerator_domains"]], ["nvl72-r01", "nvl72-r02"])
            as_json = os.path.join(d, "nvl72.json")
            run("show", "--cluster", spec, "--spec", "--format", "json", "-o", as_json)
            with open(as_json) as f:
                json.load(f)
            self.assertEqual(run_json("show", "--cluster", as_json)["hostlist"], data["hostlist"])

    def test_malformed_spec_gives_position_exit_1_and_no_output(self):
        with temp_dir() as d:
            bad = os.path.join(d, "bad.yaml")
            with open(bad, "w") as f:
                f.write("node_types:\n  - name: t\n    gpu: {model: H100, count: 2}\n    nvlink: {links: 18}\n"
                        "nodes:\n  - {names: 'n[1-2]', type: tt}\n")
            out = os.path.join(d, "out.yaml")
            proc = run("show", "--cluster", bad, "--spec", "-o", out, check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn(f"toposched: error: {bad}:6:29: unknown node type 'tt'", proc.stderr)
            self.assertFalse(os.path.exists(out))
            self.assertEqual(os.listdir(d), ["bad.yaml"])

    def test_usage_errors_exit_2(self):
        self.assertEqual(run("show", check=False).returncode, 2)
        self.assertEqual(run("frobnicate", check=False).returncode, 2)
        proc = run("show", "--cluster", "preset:dgx-h100?gpus=3", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("no parameter 'gpus'", proc.stderr)

    def test_help_for_every_command(self):
        for cmd in ["presets", "show", "path"]:
            proc = run(cmd, "--help")
            self.assertIn("--format", proc.stdout)


class PathTest(unittest.TestCase):
    def path(self, cluster, a, b):
        return run_json("path", "--cluster", cluster, a, b)

    def test_gb200_levels_in_order(self):
        cluster = "preset:gb200-nvl72"
        tray = self.path(cluster, "gb200-r01-n01:0", "gb200-r01-n01:1")
        rack = self.path(cluster, "gb200-r01-n01:0", "gb200-r01-n05:2")
        racks = self.path(cluster, "gb200-r01-n01:0", "gb200-r02-n01:0")
        self.assertEqual(tray["level"], "nvlink")
        self.assertEqual(rack["level"], "accel-domain")
        self.assertTrue(racks["level"].startswith("tier:"))
        self.assertGreaterEqual(tray["bandwidth_GBps"], rack["bandwidth_GBps"])
        self.assertGreater(rack["bandwidth_GBps"], racks["bandwidth_GBps"])

    def test_dgx_h100_same_node_is_nvlink(self):
        p = self.path("preset:dgx-h100", "dgx-h100-001:0", "dgx-h100-001:7")
        self.assertEqual(p["level"], "nvlink")
        self.assertEqual(p["bandwidth_GBps"], 450)
        same = self.path("preset:dgx-h100", "dgx-h100-001:3", "dgx-h100-001:3")
        self.assertEqual(same["level"], "same-gpu")
        self.assertIsNone(same["bandwidth_GBps"])

    def test_spec_file_example(self):
        example = os.path.join(SOURCE_DIR, "examples", "cluster-small.yaml")
        p = self.path(example, "v100-01:0", "v100-01:5")
        self.assertEqual(p["level"], "pcie-sys")

    def test_bad_gpu_is_a_usage_error(self):
        proc = run("path", "--cluster", "preset:dgx-h100?nodes=2", "dgx-h100-001:9", "dgx-h100-002:0", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("has GPUs 0..7, not 9", proc.stderr)
        proc = run("path", "--cluster", "preset:dgx-h100?nodes=2", "nosuch:0", "dgx-h100-002:0", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("no node named 'nosuch'", proc.stderr)


if __name__ == "__main__":
    unittest.main()
