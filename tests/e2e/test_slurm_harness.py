"""Checks the private Slurm test cluster itself (tests/e2e/slurm_harness.py), which the
export and placement tests rely on: it starts, schedules onto CLOUD nodes without slurmd,
validates gres.conf through `slurmd -G`, and leaves no daemon or directory behind, also
when slurmctld rejects its configuration."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_harness import NodeSpec, SlurmCluster, SlurmHarnessError, slurm_available  # noqa: E402


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes: it was reaped by Popen.wait in stop().
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


TOPOLOGY = ("SwitchName=leaf1 Nodes=gpu[01-04]\n"
            "SwitchName=leaf2 Nodes=gpu[05-08]\n"
            "SwitchName=spine Switches=leaf[1-2]\n")


def links_line(i: int, n: int) -> str:
    return ",".join("-1" if j == i else "12" for j in range(n))


GRES = "".join(f"NodeName=gpu[01-08] Name=gpu Type=a100 File=/dev/nvidia{i} Cores={i // 2} "
               f"Links={links_line(i, 4)}\n" for i in range(4))


@unittest.skipIf(slurm_available(), slurm_available() or "")
class SlurmHarnessTest(unittest.TestCase):
    def test_schedules_onto_cloud_nodes_and_stops_by_pid(self):
        nodes = [NodeSpec("gpu[01-08]", cpus=8, gpus=4, gpu_type="a100")]
        with SlurmCluster(nodes, topology_conf=TOPOLOGY, gres_conf=GRES) as slurm:
            pids = slurm.started_pids
            self.assertEqual(sorted(pids), sorted(slurm.pids()))
            directory = slurm.dir
            self.assertEqual(len(pids), 2)
            switches = {s["SwitchName"]: s for s in slurm.show_topology()}
            self.assertEqual(set(switches), {"leaf1", "leaf2", "spine"})
            self.assertEqual(switches["spine"]["Level"], "1")
            self.assertEqual(switches["leaf2"]["Nodes"], "gpu[05-08]")
            # topology/tree keeps a 4-node job under one leaf when it can.
            job = slurm.sbatch("--nodes=4", "--gres=gpu:4")
            self.assertIn(slurm.wait_job_nodes(job), ("gpu[01-04]", "gpu[05-08]"))
            records = slurm.slurmd_gres("gpu03")
            self.assertEqual([r["File"] for r in records], [f"/dev/nvidia{i}" for i in range(4)])
            self.assertEqual(records[1]["Links"], "12,-1,12,12")
            self.assertEqual(records[3]["Cores"], "1")
            self.assertEqual(slurm.log_errors(("topology", "gres")), [])
        for pid in pids:
            self.assertFalse(_alive(pid), f"daemon {pid} still runs after stop()")
        self.assertFalse(os.path.exists(directory))

    def test_rejected_config_raises_and_cleans_up(self):
        for gres, complaint in (("this is not gres.conf\n", "gres.conf"),
                                ("NodeName=gpu01 Name=gpu File=/dev/nvidia0 Cores=99\n", "Cores=99")):
            with self.subTest(gres=gres):
                cluster = SlurmCluster([NodeSpec("gpu01", cpus=8, gpus=1)], gres_conf=gres,
                                       start_timeout_s=20)
                with self.assertRaises(SlurmHarnessError) as ctx:
                    cluster.start()
                self.assertIn(complaint, str(ctx.exception))
                self.assertGreaterEqual(len(cluster.started_pids), 2)
                for pid in cluster.started_pids:
                    self.assertFalse(_alive(pid), f"daemon {pid} left running after a failed start")
                self.assertIsNone(cluster.dir)

    def test_slurmd_gres_reports_what_slurmd_rejects(self):
        bad = "NodeName=gpu01 Name=gpu File=/dev/nvidia0 Links=x\n"
        with SlurmCluster([NodeSpec("gpu01", cpus=4, gpus=1)], gres_conf=bad) as slurm:
            with self.assertRaises(SlurmHarnessError) as ctx:
                slurm.slurmd_gres("gpu01")
            self.assertIn("Links=x", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
