"""The job_submit.lua path and `toposched serve --slurm` against a real Slurm (issue 13,
acceptance 3): slurmctld with JobSubmitPlugins=lua running the script `toposched slurm
job-submit-lua` wrote, real slurmd daemons, and `toposched serve --slurm` on a loopback port.

- a plain `sbatch --comment=toposched:tp=2,pp=2 ...` job lands on the nodes the service chose
  (the service's job, named by the job's admin_comment, has Slurm's nodes), and the rest of
  the comment is untouched;
- serve --slurm accounts for a job started outside toposched (its real GPUs appear as
  slurm-job:ID) and releases jobs that end (the outside one and the plugin's);
- with the service stopped, the same submission succeeds unchanged and slurmctld logs why.
Every daemon (Slurm's and toposched serve) is stopped by PID, also when a check fails.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_harness import die_with_parent, free_ports  # noqa: E402
from slurm_harness import NodeSpec, SlurmCluster, slurm_available  # noqa: E402
from toposched_cli import BINARY, SOURCE_DIR  # noqa: E402

SPEC = os.path.join(SOURCE_DIR, "tests", "data", "slurm", "cluster.yaml")


def toposched(*args, env=None):
    r = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=120, env=env)
    if r.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
    return r.stdout


@unittest.skipIf(slurm_available(), slurm_available() or "")
class SlurmJobSubmitLua(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-slurm-lua-")
        cls.port = free_ports(1)[0]
        cls.url = f"http://127.0.0.1:{cls.port}"
        lua = toposched("slurm", "job-submit-lua", "--url", cls.url, "--timeout", "3")
        topology = toposched("export", "--cluster", SPEC, "--to", "slurm-tree")
        cls.slurm = SlurmCluster([NodeSpec("gpu[01-06]", cpus=8, gpus=4)], topology_conf=topology, slurmd=True,
                                 extra_conf=["JobSubmitPlugins=lua", "SchedulerParameters=sched_interval=1"],
                                 extra_files={"job_submit.lua": lua})
        cls.serve = None
        cls.slurm.start()
        try:
            cls.start_serve()
        except BaseException:
            cls.slurm.stop()
            raise

    @classmethod
    def start_serve(cls):
        cls.serve_log = open(os.path.join(cls.tmp.name, "serve.log"), "w")
        cls.serve = subprocess.Popen(
            [BINARY, "serve", "--cluster", SPEC, "--listen", f"127.0.0.1:{cls.port}",
             "--store", f"sqlite:{os.path.join(cls.tmp.name, 'state.db')}", "--slurm", "--slurm-poll-interval", "0.5"],
            stdout=cls.serve_log, stderr=subprocess.STDOUT, env=cls.slurm.env(), preexec_fn=die_with_parent)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if cls.serve.poll() is not None:
                raise AssertionError(f"toposched serve exited {cls.serve.returncode}: {cls.read_serve_log()}")
            try:
                with urllib.request.urlopen(cls.url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("toposched serve did not answer /healthz within 60s")

    @classmethod
    def stop_serve(cls):
        if cls.serve is not None and cls.serve.poll() is None:
            cls.serve.send_signal(signal.SIGTERM)
            try:
                cls.serve.wait(timeout=20)
            except subprocess.TimeoutExpired:
                cls.serve.kill()
                cls.serve.wait(timeout=10)
        cls.serve = None

    @classmethod
    def read_serve_log(cls):
        with open(os.path.join(cls.tmp.name, "serve.log"), errors="replace") as f:
            return f.read()[-4000:]

    @classmethod
    def tearDownClass(cls):
        cls.stop_serve()
        cls.slurm.stop()
        cls.serve_log.close()
        cls.tmp.cleanup()

    # ---- helpers -------------------------------------------------------------------------

    def service_jobs(self):
        with urllib.request.urlopen(self.url + "/v1/jobs", timeout=5) as r:
            return {j["job"]: j for j in json.load(r)["jobs"]}

    def wait_for(self, predicate, what, timeout_s=30):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError(f"{what} within {timeout_s}s; service jobs: {sorted(self.service_jobs())}; "
                             f"serve log: {self.read_serve_log()}")

    def job_record(self, job_id):
        text = self.slurm.scontrol("-o", "show", "job", str(job_id)).stdout
        return text

    def slurm_gpus(self, job_id):
        """{(node, index)} Slurm gave the job (scontrol -d)."""
        text = self.slurm.scontrol("-o", "-d", "show", "job", str(job_id)).stdout
        out = set()
        for nodes, idx in re.findall(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=gpu:\d+\(IDX:([\d,\-]+)\)", text):
            for node in self.slurm.expand_hostlist(nodes):
                for part in idx.split(","):
                    lo, _, hi = part.partition("-")
                    out.update((node, i) for i in range(int(lo), int(hi or lo) + 1))
        return out

    # ---- checks (in name order, on one cluster) ------------------------------------------

    def test_1_comment_jobs_land_where_the_service_chose(self):
        job = self.slurm.sbatch("--gpus=4", "--comment=toposched:tp=2,pp=2 nightly run", wrap="sleep 600")
        nodes = self.slurm.expand_hostlist(self.slurm.wait_job_nodes(job))
        record = self.job_record(job)
        tag = re.search(r"AdminComment=toposched-job=(\S+)", record)
        self.assertIsNotNone(tag, record)
        self.assertIn("Comment=toposched:tp=2,pp=2 nightly run", record)
        planned = self.service_jobs().get(tag.group(1))
        self.assertIsNotNone(planned, f"service has no job {tag.group(1)}")
        self.assertEqual(sorted({g["node"] for g in planned["gpus"]}), sorted(nodes))
        # serve --slurm follows the GPUs Slurm really gave it.
        self.wait_for(lambda: {(g["node"], g["gpu"]) for g in self.service_jobs()[tag.group(1)]["gpus"]}
                      == self.slurm_gpus(job), "the service to hold the job's real GPUs")
        type(self).lua_job = (job, tag.group(1))

    def test_2_outside_jobs_are_accounted_and_ended_jobs_released(self):
        outside = self.slurm.sbatch("-N", "1", "--gres=gpu:3", wrap="sleep 600")
        self.slurm.wait_job_nodes(outside)
        name = f"slurm-job:{outside}"
        held = self.wait_for(lambda: self.service_jobs().get(name), f"{name} in the service")
        self.assertEqual({(g["node"], g["gpu"]) for g in held["gpus"]}, self.slurm_gpus(outside))
        # The service no longer offers those GPUs: a what-if placement of one whole node avoids them.
        body = json.dumps({"job": "what-if", "gpus": 4}).encode()
        req = urllib.request.Request(self.url + "/v1/jobs?dry_run=1", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            what_if = {(g["node"], g["gpu"]) for g in json.load(r)["gpus"]}
        self.assertFalse(what_if & self.slurm_gpus(outside))
        self.slurm.cancel(outside)
        self.wait_for(lambda: name not in self.service_jobs(), f"{name} released after scancel")
        job, tag = getattr(type(self), "lua_job", (None, None))
        if job is not None:
            self.slurm.cancel(job)
            self.wait_for(lambda: tag not in self.service_jobs(), f"plugin job {tag} released after scancel")

    def test_3_service_stopped_submission_passes_unchanged(self):
        self.stop_serve()
        job = self.slurm.sbatch("--gpus=2", "--comment=toposched:tp=2", wrap="sleep 600")
        self.slurm.wait_job_nodes(job)
        record = self.job_record(job)
        self.assertNotIn("AdminComment=toposched-job", record)
        self.assertIn("ReqNodeList=(null)", record)
        self.assertIn("Comment=toposched:tp=2", record)
        log = self.slurm.read_log()
        self.assertRegex(log, r"toposched: job wrap of uid 0 passes unchanged: http://127\.0\.0\.1:\d+ unreachable")


if __name__ == "__main__":
    unittest.main(verbosity=2)
