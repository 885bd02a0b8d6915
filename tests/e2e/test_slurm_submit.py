"""`toposched slurm submit` against a real Slurm: slurmctld and six real slurmd daemons on
loopback (tests/e2e/slurm_harness.py, SlurmCluster(slurmd=True)), GPUs as gres backed by
device files, topology.conf from `toposched export`. Checks (issue 13, acceptance 1, 2, 4):

1. jobs submitted through the wrapper, some with TP/PP plans, run `srun` printing
   SLURM_PROCID, hostname and CUDA_VISIBLE_DEVICES; every rank ran on the node and GPU the
   plan named for it, in the plan's rank order;
2. jobs submitted directly with sbatch occupy GPUs; the wrapper never plans onto them, and
   refuses (submitting nothing) when what is left cannot hold the job;
4. truncated JSON from squeue, a Slurm job or node the cluster spec does not know: a clear
   error, exit 1, and sbatch is never run.
Every daemon and job process is stopped by the harness, also when a check fails.
"""

import json
import os
import re
import stat
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_harness import NodeSpec, SlurmCluster, slurm_available  # noqa: E402
from toposched_cli import BINARY, SOURCE_DIR  # noqa: E402
import subprocess  # noqa: E402

SPEC = os.path.join(SOURCE_DIR, "tests", "data", "slurm", "cluster.yaml")
# Each rank prints one line; the job then holds its GPUs until it is cancelled.
REPORT = "srun bash -c 'echo RANK $SLURM_PROCID $(hostname) $CUDA_VISIBLE_DEVICES'; sleep 600"


def toposched(*args, env=None, check=True):
    r = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=120, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
    return r


@unittest.skipIf(slurm_available(), slurm_available() or "")
class SlurmSubmit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        topology = toposched("export", "--cluster", SPEC, "--to", "slurm-tree").stdout
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-slurm-submit-")
        os.chmod(cls.tmp.name, 0o755)
        cls.slurm = SlurmCluster([NodeSpec("gpu[01-06]", cpus=8, gpus=4)], topology_conf=topology, slurmd=True,
                                 extra_conf=["SchedulerParameters=sched_interval=1"])
        cls.slurm.start()

    @classmethod
    def tearDownClass(cls):
        cls.slurm.stop()
        cls.tmp.cleanup()

    # ---- helpers -------------------------------------------------------------------------

    def submit(self, *wrapper_args, sbatch=(), env=None, check=True):
        out = os.path.join(self.tmp.name, f"job-{time.monotonic_ns()}.out")
        hostfile = out + ".hosts"
        r = toposched("slurm", "submit", "--cluster", SPEC, "--format", "json", "--hostfile", hostfile,
                      *wrapper_args, "--", f"--output={out}", *sbatch, f"--wrap={REPORT}",
                      env=env or self.slurm.env(), check=check)
        if not check:
            return r, out
        return json.loads(r.stdout), out

    def rank_lines(self, out, ranks, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        lines = []
        while time.monotonic() < deadline:
            if os.path.exists(out):
                with open(out) as f:
                    lines = [l.split() for l in f if l.startswith("RANK ")]
                if len(lines) >= ranks:
                    return lines
            time.sleep(0.3)
        raise AssertionError(f"{out}: {len(lines)} of {ranks} ranks reported within {timeout_s}s; "
                             f"squeue: {self.slurm.squeue().stdout}")

    def check_ran_as_planned(self, result, out):
        """Every rank on the planned node and GPU; the hostfile in rank order."""
        plan = result["plan"]
        gpus = plan["gpus"]
        lines = self.rank_lines(out, len(gpus))
        self.assertEqual(len(lines), len(gpus))
        ran = {int(l[1]): (l[2], l[3] if len(l) > 3 else "") for l in lines}
        self.assertEqual(sorted(ran), list(range(len(gpus))))
        for g in gpus:
            self.assertEqual(ran[g["rank"]], (g["node"], str(g["gpu"])),
                             f"job {result['job_id']} rank {g['rank']}: planned {g['node']}:{g['gpu']}, "
                             f"ran on {ran[g['rank']]}")
        with open(result["hostfile"]) as f:
            self.assertEqual(f.read().split(), [g["node"] for g in sorted(gpus, key=lambda g: g["rank"])])

    def busy_gpus(self):
        """(node, index) of every GPU a running Slurm job holds, read from scontrol -d."""
        busy = {}
        text = self.slurm.scontrol("-o", "-d", "show", "job").stdout
        for line in text.splitlines():
            job = re.search(r"JobId=(\d+)", line).group(1)
            if "JobState=RUNNING" not in line:
                continue
            for nodes, idx in re.findall(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=gpu:\d+\(IDX:([\d,\-]+)\)", line):
                for node in self.slurm.expand_hostlist(nodes):
                    for part in idx.split(","):
                        lo, _, hi = part.partition("-")
                        for i in range(int(lo), int(hi or lo) + 1):
                            busy[(node, i)] = job
        return busy

    def wait_running(self, job_id, timeout_s=30):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.slurm.job_state(str(job_id)) == "RUNNING":
                return
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} not running: {self.slurm.job_state(str(job_id))} "
                             f"{self.slurm.job_reason(str(job_id))}")

    def fake_bin(self, name, script):
        d = tempfile.mkdtemp(dir=self.tmp.name, prefix="bin-")
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + script)
        os.chmod(path, 0o755)
        return d

    def env_with_path(self, *dirs):
        env = self.slurm.env()
        env["PATH"] = os.pathsep.join([*dirs, env.get("PATH", "")])
        return env

    def job_count(self):
        return len(self.slurm.squeue("-h", "-o", "%i").stdout.split())

    # ---- the checks (run in name order on one cluster) -----------------------------------

    def test_1_planned_ranks_run_where_planned(self):
        jobs = []
        # TP4 x PP2 on two whole nodes; TP2 x PP2 on four GPUs; a two-GPU job sharing a node.
        # Each is submitted once the previous one runs: the wrapper plans on the GPUs Slurm
        # reports in use, and a job still pending holds none yet (docs/slurm.md, "Limits").
        for wrapper_args, sbatch in ((("--tp", "4", "--pp", "2"), ["-N", "2", "--gpus-per-node=4"]),
                                     (("--tp", "2", "--pp", "2"), ["--gpus=4"]),
                                     (("--tp", "2"), ["--gpus=2"])):
            jobs.append(self.submit(*wrapper_args, sbatch=sbatch))
            self.wait_running(jobs[-1][0]["job_id"])
        seen = {}
        for result, out in jobs:
            self.assertTrue(result["job_id"].isdigit(), result)
            self.check_ran_as_planned(result, out)
            for g in result["plan"]["gpus"]:
                key = (g["node"], g["gpu"])
                self.assertNotIn(key, seen, f"GPU {key} planned for jobs {seen.get(key)} and {result['job_id']}")
                seen[key] = result["job_id"]
        first = jobs[0][0]["plan"]
        self.assertEqual(first["node_count"], 2)
        self.assertEqual(first["leaf_switches"], 1, "a TP4xPP2 job on two nodes belongs under one leaf")
        # Slurm's own record agrees: each job holds exactly the GPUs of its plan.
        busy = self.busy_gpus()
        for key, job in seen.items():
            self.assertEqual(busy.get(key), job, f"Slurm says GPU {key} belongs to {busy.get(key)}")

    def test_2_direct_sbatch_jobs_are_never_planned_onto(self):
        free_before = [k for k in ((f"gpu0{n}", i) for n in range(1, 7) for i in range(4)) if k not in self.busy_gpus()]
        self.assertGreaterEqual(len(free_before), 10)
        # Outside toposched: a whole node and half of another, wherever Slurm puts them.
        outside = [self.slurm.sbatch("-N", "1", "--gres=gpu:4", "--exclusive", wrap="sleep 600"),
                   self.slurm.sbatch("-N", "1", "--gres=gpu:2", wrap="sleep 600")]
        for job in outside:
            self.wait_running(job)
        busy = self.busy_gpus()
        outside_gpus = {k for k, j in busy.items() if j in {str(o) for o in outside}}
        self.assertEqual(len(outside_gpus), 6)
        result, out = self.submit(sbatch=["--gpus=2"])
        self.wait_running(result["job_id"])
        planned = {(g["node"], g["gpu"]) for g in result["plan"]["gpus"]}
        self.assertFalse(planned & set(busy), f"planned onto busy GPUs: {planned & set(busy)}")
        self.check_ran_as_planned(result, out)
        # What is left cannot hold two whole nodes: refused, nothing submitted.
        before = self.job_count()
        r, _ = self.submit(sbatch=["-N", "2", "--gpus-per-node=4"], check=False)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("nothing was submitted", r.stderr)
        self.assertEqual(self.job_count(), before)

    def test_3_dry_run_prints_command_and_hostfile(self):
        before = self.job_count()
        hostfile = os.path.join(self.tmp.name, "dry.hosts")
        r = toposched("slurm", "submit", "--cluster", SPEC, "--dry-run", "--hostfile", hostfile, "--tp", "2",
                      "--", "--gpus=2", "--wrap=true", env=self.slurm.env())
        self.assertRegex(r.stdout, r"^SLURM_HOSTFILE=\S+dry\.hosts sbatch --parsable --nodes=1 --nodelist=gpu0\d ")
        self.assertIn("--distribution=arbitrary", r.stdout)
        self.assertRegex(r.stdout, r"# hostfile .*\n(gpu0\d)\n\1\n$")
        self.assertFalse(os.path.exists(hostfile))
        self.assertEqual(self.job_count(), before)

    def test_4_bad_slurm_output_submits_nothing(self):
        marker = os.path.join(self.tmp.name, "sbatch-was-run")
        fake_sbatch = self.fake_bin("sbatch", f"touch {marker}\nexit 1\n")
        real_json = self.slurm.squeue("--json").stdout
        truncated = os.path.join(self.tmp.name, "squeue-truncated.json")
        with open(truncated, "w") as f:
            f.write(real_json[: len(real_json) // 2])
        ghost_job = os.path.join(self.tmp.name, "squeue-ghost.json")
        with open(ghost_job, "w") as f:
            f.write(re.sub(r"\bgpu0(\d)\b", r"ghost\1", real_json))
        sinfo_json = self.slurm.run("sinfo", "--json").stdout
        doc = json.loads(sinfo_json)
        extra = dict(doc["nodes"][0], name="ghost7")
        doc["nodes"].append(extra)
        ghost_node = os.path.join(self.tmp.name, "sinfo-ghost.json")
        with open(ghost_node, "w") as f:
            json.dump(doc, f)
        cases = [
            ("squeue", truncated, r"squeue --json:\d+:\d+: the JSON ends early \(truncated output\?\)"),
            ("squeue", ghost_job, r"holds GPUs on node 'ghost\d', which the cluster spec does not know"),
            ("sinfo", ghost_node, r"Slurm has GPU nodes that the cluster spec does not describe: ghost7"),
        ]
        for tool, canned, expected in cases:
            with self.subTest(tool=tool, canned=os.path.basename(canned)):
                fake = self.fake_bin(tool, f"cat {canned}\n")
                before = self.job_count()
                r, _ = self.submit(sbatch=["--gpus=1"], env=self.env_with_path(fake, fake_sbatch), check=False)
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertRegex(r.stderr, r"^toposched: error: ")
                self.assertRegex(r.stderr, expected)
                self.assertIn("nothing was submitted", r.stderr)
                self.assertEqual(r.stdout, "")
                self.assertFalse(os.path.exists(marker), "sbatch was run")
                self.assertEqual(self.job_count(), before)
        # The same ghost node, accepted on request: planned around, with a warning.
        fake = self.fake_bin("sinfo", f"cat {ghost_node}\n")
        r = toposched("slurm", "submit", "--cluster", SPEC, "--dry-run", "--ignore-unknown-nodes", "--",
                      "--gpus=1", "--wrap=true", env=self.env_with_path(fake))
        self.assertIn("never planned on): ghost7", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
