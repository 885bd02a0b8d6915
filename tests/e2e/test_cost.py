"""End-to-end tests of `toposched cost` (run by ctest with TOPOSCHED and TOPOSCHED_SOURCE_DIR)."""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("TOPOSCHED", "toposched")
SRC = os.environ.get("TOPOSCHED_SOURCE_DIR", ".")
DATA = os.path.join(SRC, "tests", "data")
H100x4 = "preset:dgx-h100?nodes=4"


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)


class CostCollective(unittest.TestCase):
    def test_acceptance_allreduce_8g_on_four_dgx_h100(self):
        r = run("cost", "--cluster", H100x4, "--gpus", "dgx-h100-[001-004]",
                "--collective", "allreduce", "--bytes", "8G", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        for key in ("algorithm", "time_us", "algbw_GBps", "busbw_GBps"):
            self.assertIn(key, out)
        # NCCL over 8x 400G NDR per node (plus NVLink inside) reaches 340-400 GB/s busbw
        # with rings; it cannot exceed the 8 x 50 GB/s the NICs carry.
        self.assertGreaterEqual(out["busbw_GBps"], 340)
        self.assertLessEqual(out["busbw_GBps"], 400)
        self.assertEqual(out["ranks"], 32)
        self.assertAlmostEqual(out["algbw_GBps"], 8 * 2**30 / (out["time_us"] * 1e3), delta=1e-6 * out["algbw_GBps"])
        self.assertAlmostEqual(out["busbw_GBps"], out["algbw_GBps"] * 2 * 31 / 32, delta=1e-6 * out["busbw_GBps"])

    def test_text_output(self):
        r = run("cost", "-c", H100x4, "--gpus", "dgx-h100-001:0-3,dgx-h100-002:0-3", "--bytes", "1M")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("allreduce of 1M on 8 GPUs", r.stdout)
        self.assertIn("busbw", r.stdout)

    def test_sweep_is_an_nccl_tests_like_table(self):
        r = run("cost", "-c", H100x4, "--gpus", "dgx-h100-[001-002]", "--sweep", "8:8G")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [line.split() for line in r.stdout.splitlines() if line and not line.startswith("#")]
        self.assertEqual(len(rows), 31)  # 8 B .. 8 GiB, doubling
        sizes = [int(row[0]) for row in rows]
        self.assertEqual(sizes[0], 8)
        self.assertEqual(sizes[-1], 8 * 2**30)
        times = [float(row[3]) for row in rows]
        self.assertEqual(times, sorted(times))
        j = run("cost", "-c", H100x4, "--gpus", "dgx-h100-[001-002]", "--sweep", "1K:1M",
                "--collective", "allgather", "--format", "json")
        self.assertEqual(j.returncode, 0, j.stderr)
        doc = json.loads(j.stdout)
        self.assertEqual(len(doc["rows"]), 11)
        self.assertEqual(doc["collective"], "allgather")

    def test_every_collective_runs(self):
        for coll in ("allreduce", "allgather", "reduce-scatter", "broadcast", "reduce", "all-to-all", "send-recv"):
            r = run("cost", "-c", H100x4, "--gpus", "dgx-h100-[001-004]", "--collective", coll,
                    "--bytes", "64M", "--format", "json")
            self.assertEqual(r.returncode, 0, coll + ": " + r.stderr)
            self.assertGreater(json.loads(r.stdout)["time_us"], 0)

    def test_usage_errors_exit_2(self):
        for args in (["--gpus", "dgx-h100-001", "--bytes", "8X"],
                     ["--gpus", "dgx-h100-001", "--bytes", "8G", "--collective", "allreduc"],
                     ["--gpus", "dgx-h100-001", "--bytes", "8G", "--algorithm", "magic"],
                     ["--gpus", "dgx-h100-001"],
                     ["--gpus", "dgx-h100-001", "--bytes", "8G", "--sweep", "8:8G"],
                     ["--gpus", "dgx-h100-009", "--bytes", "8G"],
                     ["--job", os.path.join(DATA, "cost_job.yaml")]):
            r = run("cost", "-c", H100x4, *args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertTrue(r.stderr.startswith("toposched: error: "), r.stderr)

    def test_unsupported_algorithm_exits_1(self):
        r = run("cost", "-c", "preset:dgx-a100?nodes=1", "--gpus", "dgx-a100-001", "--bytes", "8G",
                "--algorithm", "nvls")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("NVLS", r.stderr)

    def test_help_explains_the_command(self):
        r = run("cost", "--help")
        self.assertEqual(r.returncode, 0)
        for word in ("--gpus", "--sweep", "--job", "--placement", "busbw", "Examples"):
            self.assertIn(word, r.stdout)


class CostJob(unittest.TestCase):
    def test_job_on_placement(self):
        r = run("cost", "-c", H100x4, "--job", os.path.join(DATA, "cost_job.yaml"),
                "--placement", os.path.join(DATA, "cost_placement.yaml"), "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["job"], "llama-70b-tp8-dp4")
        kinds = {g["kind"]: g for g in out["groups"]}
        self.assertEqual(sorted(kinds), ["dp", "tp"])
        self.assertAlmostEqual(out["slowdown"], 1.0)
        self.assertGreater(out["step_comm_us"], 0)

    def test_scrambled_placement_is_slower(self):
        gpus = [f"dgx-h100-{r % 4 + 1:03}:{r // 4}" for r in range(32)]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"gpus": gpus}, f)
            path = f.name
        try:
            r = run("cost", "-c", H100x4, "--job", os.path.join(DATA, "cost_job.yaml"),
                    "--placement", path, "--format", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertGreater(out["slowdown"], 1.5)
            text = run("cost", "-c", H100x4, "--job", os.path.join(DATA, "cost_job.yaml"), "--placement", path)
            self.assertEqual(text.returncode, 0, text.stderr)
            self.assertIn("slowdown", text.stdout)
        finally:
            os.unlink(path)

    def test_bad_job_file_names_the_position(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("plan:\n  tp: 8\n  tpp: 4\n")
            path = f.name
        try:
            r = run("cost", "-c", H100x4, "--job", path,
                    "--placement", os.path.join(DATA, "cost_placement.yaml"))
            self.assertEqual(r.returncode, 1)
            self.assertIn(f"{path}:3:3:", r.stderr)
            self.assertIn("tpp", r.stderr)
        finally:
            os.unlink(path)

    def test_missing_file_exits_1(self):
        r = run("cost", "-c", H100x4, "--job", "/nonexistent/job.yaml",
                "--placement", os.path.join(DATA, "cost_placement.yaml"))
        self.assertEqual(r.returncode, 1)


if __name__ == "__main__":
    unittest.main()
