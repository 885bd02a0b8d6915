"""End-to-end: `toposched scale` through the real binary (issue 17): the GPT-3-175B-like
curve on a 512-node DGX H100 cluster (64 .. 4,096 GPUs, `--policies all` = every
deterministic policy: efficiency starts at 1 and never rises, and topo's is the highest at
every size, ties allowed: on the empty cluster the policies choose the same GPUs), the same
on a loaded, oversubscribed cluster where topo must be strictly highest at 4,096 GPUs,
`random` only when named and then marked as one draw per size, the JSON contract, the
report folder (report.json + report.html, rendered in headless Chromium with every chart
drawn), a given state, the output-file rules for --report, and usage errors."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from toposched_cli import SOURCE_DIR, run, temp_dir

JOB = os.path.join(SOURCE_DIR, "examples", "gpt3-175b-tp8-pp8.yaml")
BIG = "preset:dgx-h100?nodes=512"
SIZES = "64,128,256,512,1024,2048,4096"
DETERMINISTIC = ["first-fit", "slurm-tree", "slurm-block", "kueue-bestfit", "topo"]
# slurm-block follows Slurm 26.05 (docs/placement.md): on the cluster with every fifth server
# busy no block of the job's level has room, and Slurm pends the job rather than widen.
FRAGMENTED_POLICIES = [p for p in DETERMINISTIC if p != "slurm-block"]


def check_curves(test, result, sizes):
    """Each curve: every size placed, efficiency 1 at the smallest and never rising; topo's
    efficiency at every size >= every other policy's. Returns {policy: [efficiency]}."""
    policies = result["policies"]
    curves = {}
    for name, points in policies.items():
        test.assertEqual([p["gpus"] for p in points], sizes, name)
        for p in points:
            test.assertTrue(p["placed"], f"{name} at {p['gpus']}: {p.get('error')}")
            for key in ("gpus", "step_time_s", "speedup", "efficiency"):
                test.assertIn(key, p, name)
        eff = [p["efficiency"] for p in points]
        test.assertEqual(eff[0], 1.0, name)
        for a, b in zip(eff, eff[1:]):
            test.assertLessEqual(b, a, f"{name}: efficiency rises {a} -> {b}")
        test.assertLess(eff[-1], 1.0, name)
        test.assertIsInstance(result["breaks"][name], str)
        curves[name] = eff
    for name, eff in curves.items():
        for size, e, t in zip(sizes, eff, curves["topo"]):
            test.assertLessEqual(e, t, f"{name} beats topo at {size} GPUs: {e} > {t}")
    return curves


def chromium_dom(path, timeout=240):
    with tempfile.TemporaryDirectory(prefix="toposched-chromium-") as profile:
        cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               "--virtual-time-budget=30000", "--dump-dom", "file://" + path]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


class ScaleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = temp_dir()
        cls.report = os.path.join(cls.tmp.name, "out")
        cls.proc = run("scale", "--cluster", BIG, "--job", JOB, "--gpus", SIZES, "--policies", "all", "--report", cls.report,
                       "--format", "json", timeout=1800)
        cls.result = json.loads(cls.proc.stdout)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_curve_per_policy_falls_from_one_and_topo_ends_highest(self):
        # `all` is the deterministic scheduler models; random is computed only when named.
        self.assertEqual(list(self.result["policies"]), DETERMINISTIC)
        self.assertNotIn("notes", self.result)
        sizes = [int(s) for s in SIZES.split(",")]
        curves = check_curves(self, self.result, sizes)
        # On the empty cluster every policy packs the job into consecutive nodes: a tie, and at
        # 4,096 GPUs (the whole cluster) a forced one.
        for name, eff in curves.items():
            self.assertEqual(eff[-1], curves["topo"][-1], name)
        self.assertIn("leaves tier:leaf at 4096 GPUs", self.result["breaks"]["topo"])

    def test_report_folder_holds_the_same_json_and_a_page_that_renders(self):
        with open(os.path.join(self.report, "report.json")) as f:
            self.assertEqual(json.load(f), self.result)
        html = os.path.join(self.report, "report.html")
        self.assertTrue(os.path.exists(html))
        if not shutil.which("chromium"):
            self.skipTest("chromium is not installed (scripts/install-deps installs it)")
        proc = chromium_dom(html)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        body = re.search(r"<body data-charts=[^>]*>", proc.stdout).group(0)
        self.assertIn('data-charts="ok"', body, body)
        self.assertIn('data-charts-count="2"', body)
        for chart in ("chart-efficiency", "chart-step-time"):
            m = re.search(r'<div class="chart[^"]*" id="' + chart + r'"[^>]*>(.*?)</svg>', proc.stdout, re.S)
            self.assertIsNotNone(m, f"{chart}: no svg")
            self.assertRegex(m.group(1), r"<path|<rect|<line", chart)

    def test_text_table_names_where_efficiency_breaks(self):
        proc = run("scale", "--cluster", "preset:dgx-h100?nodes=64", "--job", JOB, "--gpus", "64,128,256,512", "--policies",
                   "first-fit,topo")
        self.assertIn("where efficiency breaks:", proc.stdout)
        self.assertIn("dp allreduce", proc.stdout)
        self.assertEqual(proc.stdout.count("where efficiency breaks:"), 2)


class ScaleWhereChoiceMattersTest(unittest.TestCase):
    """Two Llama 3 pods (768 servers, 7:1 oversubscribed above the pod) with every fifth
    server busy with a one-node job (written as a state file): 4,096 GPUs still fit (614
    servers free, 512 needed) but must span both pods, and the policies choose among
    fragmented free servers. topo keeps each DP group inside a pod; the others cut one PP
    stage across the pod boundary. topo must be strictly the highest at 4,096 GPUs."""

    def test_topo_is_strictly_highest_at_the_largest_size(self):
        servers = [f"p{pod}-r{rack:03d}-s{s}" for pod in (1, 2) for rack in range(1, 193) for s in (1, 2)]
        busy = [{"id": f"busy-{i}", "gpus": [f"{n}:{g}" for g in range(8)]} for i, n in enumerate(servers) if i % 5 == 0]
        with temp_dir() as tmp:
            state = os.path.join(tmp, "state.json")
            with open(state, "w") as f:
                json.dump({"format": "toposched-allocation-state", "version": 1, "cluster": "llama3-2p",
                           "gpus": 8 * len(servers), "jobs": busy}, f)
            result = json.loads(run("scale", "--cluster", "preset:llama3-24k?pods=2", "--job", JOB, "--gpus", SIZES,
                                    "--policies", ",".join(FRAGMENTED_POLICIES), "--state", state, "--format", "json",
                                    timeout=1800).stdout)
        self.assertEqual(list(result["policies"]), FRAGMENTED_POLICIES)
        sizes = [int(s) for s in SIZES.split(",")]
        curves = check_curves(self, result, sizes)
        topo_last = curves["topo"][-1]
        for name, eff in curves.items():
            if name != "topo":
                self.assertLess(eff[-1], topo_last, f"{name} ties or beats topo at 4096 GPUs: {curves}")
        self.assertNotIn("leaves tier:pod", result["breaks"]["topo"])  # its DP groups never cross the 7:1 uplink
        self.assertIn("leaves tier:pod at 4096 GPUs", result["breaks"]["first-fit"])


class ScaleRandomTest(unittest.TestCase):
    def test_random_only_when_named_and_marked_as_one_draw_per_size(self):
        args = ["scale", "--cluster", "preset:dgx-h100?nodes=64", "--job", JOB, "--gpus", "64,256,512", "--policies",
                "random,topo", "--seed", "5"]
        with temp_dir() as tmp:
            report = os.path.join(tmp, "out")
            text = run(*args, "--report", report).stdout
            self.assertIn("note: one random draw per size (seed 5), not a scaling curve", text)
            self.assertEqual(text.count("note: "), 1)  # topo's curve has none
            result = json.loads(run(*args, "--format", "json").stdout)
            self.assertEqual(list(result["notes"]), ["random"])
            self.assertIn("efficiency above 1", result["notes"]["random"])
            with open(os.path.join(report, "report.json")) as f:
                self.assertEqual(json.load(f)["notes"], result["notes"])
            with open(os.path.join(report, "report.html")) as f:
                self.assertIn("one random draw per size", f.read())
        help_text = run("scale", "--help").stdout
        self.assertIn("'random' only when named", help_text)


class ScaleInputsTest(unittest.TestCase):
    def test_state_leaves_less_room(self):
        with temp_dir() as tmp:
            state = os.path.join(tmp, "state.json")
            run("place", "--cluster", "preset:dgx-h100?nodes=16", "--gpus", "64", "--job", "other", "--policy", "first-fit",
                "--save-state", state)
            out = json.loads(run("scale", "--cluster", "preset:dgx-h100?nodes=16", "--job", JOB, "--gpus", "64,128",
                                 "--policies", "first-fit", "--state", state, "--format", "json").stdout)
            points = out["policies"]["first-fit"]
            self.assertTrue(points[0]["placed"])
            self.assertFalse(points[1]["placed"])
            self.assertIsNone(points[1]["efficiency"])

    def test_usage_errors_exit_2_and_bad_files_exit_1(self):
        r = run("scale", "--cluster", "preset:dgx-h100?nodes=16", "--job", JOB, "--gpus", "64,96", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("not a multiple", r.stderr)
        r = run("scale", "--cluster", "preset:dgx-h100?nodes=16", "--job", JOB, "--gpus", "64", "--policies", "nope", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        with temp_dir() as tmp:
            bad = os.path.join(tmp, "job.yaml")
            with open(bad, "w") as f:
                f.write("plan:\n  tp: 8\n  pipeline: 2\n")
            r = run("scale", "--cluster", "preset:dgx-h100?nodes=16", "--job", bad, "--gpus", "64", check=False)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertRegex(r.stderr, r"job\.yaml:\d+:\d+")
            not_dir = os.path.join(tmp, "report")
            with open(not_dir, "w") as f:
                f.write("keep")
            r = run("scale", "--cluster", "preset:dgx-h100?nodes=16", "--job", JOB, "--gpus", "64", "--report", not_dir,
                    check=False)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("not a folder", r.stderr)
            with open(not_dir) as f:
                self.assertEqual(f.read(), "keep")


class ScaleReportFolderTest(unittest.TestCase):
    """--report DIR follows docs/cli.md "Output files": a link inside the folder is written
    through (the link stays), and nothing is half-written."""

    def test_report_folder_keeps_links_inside(self):
        with temp_dir() as tmp:
            report = os.path.join(tmp, "report")
            os.mkdir(report)
            os.mkdir(os.path.join(tmp, "kept"))
            os.symlink(os.path.join("..", "kept", "r.json"), os.path.join(report, "report.json"))
            proc = run("scale", "--cluster", "preset:dgx-h100?nodes=16", "--job", JOB, "--gpus", "64,128", "--policies", "topo",
                       "--report", report + "/")
            self.assertIn(f"report: {report}/report.html", proc.stdout)
            self.assertTrue(os.path.islink(os.path.join(report, "report.json")))
            with open(os.path.join(tmp, "kept", "r.json")) as f:
                self.assertIn('"policies"', f.read())
            self.assertEqual([n for n in os.listdir(report) if ".tmp-" in n], [])


if __name__ == "__main__":
    unittest.main()
