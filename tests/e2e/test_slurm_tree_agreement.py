"""The slurm-tree policy must choose the same nodes as a real slurmctld (topology/tree,
select/cons_tres) on the same cluster, job after job.

Each sequence starts a private Slurm controller (tests/e2e/slurm_harness.py: munged +
slurmctld on loopback, State=CLOUD nodes with Gres=gpu) with the topology.conf and gres.conf
that `toposched export --to slurm-tree|gres` writes for the cluster toposched builds from a
preset, submits jobs with sbatch
(`--exclusive -N n`, `--gpus=g`, `-N n --gpus-per-node=g`), cancels some to make holes, and
reads the nodes Slurm gave each job from squeue. The same sequence runs through
`toposched place --policy slurm-tree --slurm-version 22.05 --state F --save-state F` and
`toposched release`; the
node sets must be equal at every step, and a job Slurm leaves pending for lack of resources
must be refused by toposched too.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_harness import NodeSpec, SlurmCluster, slurm_available  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")

# (name, preset, steps). A step is ("N", n) exclusive whole nodes, ("G", g) a GPU count,
# ("NG", n, g) n nodes with g GPUs each, ("cancel", k) cancels the k-th submitted job (0-based),
# ("pending", op...) a job that must not fit (always last).
SEQUENCES = [
    ("whole-node jobs fill leaves best fit", "synthetic?nodes=16&gpus_per_node=4&fanout=4",
     [("N", 1), ("N", 2), ("N", 3), ("N", 1), ("N", 4), ("N", 2), ("N", 3)]),
    ("GPU-count jobs share nodes", "synthetic?nodes=12&gpus_per_node=4&fanout=4",
     [("G", 6), ("G", 3), ("G", 1), ("G", 8), ("G", 2), ("G", 5), ("G", 4), ("G", 7)]),
    ("holes from cancelled jobs (partial cluster)", "synthetic?nodes=16&gpus_per_node=4&fanout=4",
     [("N", 2), ("N", 3), ("N", 2), ("N", 4), ("cancel", 1), ("cancel", 3), ("N", 2), ("N", 5), ("N", 1)]),
    ("jobs larger than a leaf across a two-level tree", "synthetic?nodes=32&gpus_per_node=8&fanout=4,2",
     [("N", 3), ("N", 6), ("N", 5), ("cancel", 0), ("N", 9), ("N", 2), ("N", 4)]),
    ("mixed whole-node, per-node and GPU-count jobs", "synthetic?nodes=16&gpus_per_node=8&fanout=4",
     [("G", 12), ("N", 2), ("NG", 2, 4), ("G", 3), ("cancel", 1), ("NG", 3, 6), ("G", 20), ("N", 1), ("G", 2)]),
    ("a job that cannot fit stays pending", "synthetic?nodes=8&gpus_per_node=4&fanout=4",
     [("N", 3), ("G", 10), ("N", 2), ("pending", "N", 3)]),
]


def toposched(*args, check=True):
    r = subprocess.run([TOPOSCHED, *args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


def cluster_files(preset):
    """topology.conf and gres.conf for the preset as `toposched export` writes them, the node
    hostlist and the GPUs per node."""
    cluster = "preset:" + preset
    show = json.loads(toposched("show", "--cluster", cluster, "--format", "json").stdout)
    topology = toposched("export", "--cluster", cluster, "--to", "slurm-tree").stdout
    gres = toposched("export", "--cluster", cluster, "--to", "gres").stdout
    types = set(re.findall(r"\bType=(\S+)", gres))
    if len(types) != 1:
        raise AssertionError(f"expected one GPU type in the exported gres.conf, found {types}")
    return topology, gres, show["hostlist"], show["gpus"] // show["nodes"], types.pop()


def sbatch_args(op):
    kind = op[0]
    if kind == "N":
        return ["--exclusive", "-N", str(op[1])]
    if kind == "G":
        return [f"--gpus={op[1]}", f"--ntasks={op[1]}"]
    if kind == "NG":
        return ["-N", str(op[1]), f"--gpus-per-node={op[2]}"]
    raise ValueError(op)


def place_args(op, gpus_per_node):
    kind = op[0]
    if kind == "N":
        return ["--nodes", str(op[1])]
    if kind == "G":
        return ["--gpus", str(op[1])]
    if kind == "NG":
        return ["--gpus", str(op[1] * op[2]), "--gpus-per-node", str(op[2])]
    raise ValueError(op)


@unittest.skipIf(slurm_available(), slurm_available() or "")
class SlurmTreeAgreement(unittest.TestCase):
    def run_sequence(self, name, preset, steps):
        topology, gres, hostlist, gpus_per_node, gpu_type = cluster_files(preset)
        compared = 0
        with tempfile.TemporaryDirectory() as tmp, \
                SlurmCluster([NodeSpec(hostlist, cpus=64, gpus=gpus_per_node, gpu_type=gpu_type)],
                             topology_conf=topology,
                             gres_conf=gres,
                             # Jobs are started by the main scheduling loop; run it every
                             # second rather than every minute so that sequences finish.
                             extra_conf=["SchedulerParameters=sched_interval=1"]) as slurm:
            # The harness's CLOUD nodes start powered down, and Slurm schedules powered-down
            # nodes after powered-up ones (a higher scheduling weight). A real cluster's nodes
            # are all up: power them all up (ResumeProgram does nothing) before the sequence.
            slurm.scontrol("update", f"nodename={hostlist}", "state=power_up")
            state = os.path.join(tmp, "state.json")
            cluster = "preset:" + preset
            submitted = []  # (slurm job id, toposched job id)
            first = True
            for op in steps:
                if op[0] == "cancel":
                    slurm_id, job = submitted[op[1]]
                    slurm.cancel(slurm_id)
                    self.wait_gone(slurm, slurm_id)
                    toposched("release", "--cluster", cluster, "--state", state, "--job", job)
                    continue
                pending = op[0] == "pending"
                job_op = op[1:] if pending else op
                slurm_id = slurm.sbatch(*sbatch_args(job_op))
                job = f"j{len(submitted)}"
                submitted.append((slurm_id, job))
                # Debian 12's slurmctld is 22.05: its leaf rule (the default is the newest, 26.05).
                args = ["place", "--cluster", cluster, "--policy", "slurm-tree", "--slurm-version", "22.05",
                        "--job", job,
                        "--save-state", state, "--format", "json", *place_args(job_op, gpus_per_node)]
                if not first:
                    args += ["--state", state]
                if pending:
                    self.assertTrue(self.stays_pending(slurm, slurm_id), f"{name}: Slurm started {op}")
                    r = toposched(*args, check=False)
                    self.assertEqual(r.returncode, 1, f"{name}: toposched placed {op} that Slurm could not: {r.stdout}")
                    self.assertIn("cannot place", r.stderr)
                    continue
                slurm_nodes = set(slurm.run("scontrol", "show", "hostnames", slurm.wait_job_nodes(slurm_id, timeout_s=90)).stdout.split())
                placed = json.loads(toposched(*args).stdout)
                first = False
                ours = {g["node"] for g in placed["gpus"]}
                self.assertEqual(ours, slurm_nodes, f"{name}: step {op}: slurm-tree chose {sorted(ours)}, "
                                                    f"slurmctld chose {sorted(slurm_nodes)}")
                compared += 1
        return compared

    @staticmethod
    def wait_gone(slurm, slurm_id, timeout_s=30):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if slurm.job_state(slurm_id) in ("", "CANCELLED", "COMPLETED"):
                return
            time.sleep(0.2)
        raise AssertionError(f"job {slurm_id} still {slurm.job_state(slurm_id)} after scancel")

    @staticmethod
    def stays_pending(slurm, slurm_id, wait_s=4):
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if slurm.job_state(slurm_id) != "PENDING":
                return False
            time.sleep(0.3)
        return True

    def test_sequences(self):
        self.assertGreaterEqual(len(SEQUENCES), 5)
        total = 0
        for name, preset, steps in SEQUENCES:
            with self.subTest(sequence=name):
                total += self.run_sequence(name, preset, steps)
        self.assertGreater(total, 30)


if __name__ == "__main__":
    unittest.main()
