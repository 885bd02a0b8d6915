"""`toposched discover --slurm-nodes` on what a real Slurm controller prints
(tests/e2e/slurm_harness.py: a private slurmctld with 16 GPU nodes and a login node).

The same cluster read three ways, `scontrol -o show node`, the multi-line `scontrol show
node` (indented continuation lines, blank lines between records) and `sinfo --json`, beside
the topology.conf slurmctld runs with, gives one cluster spec: each GPU node's count and
product from its gres (gpu:h100:8), its RealMemory (2,063,937 MiB, a DGX H100's) as
host_memory_gb 2,164, the login node skipped with a warning, the switches from
topology.conf.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_harness import NodeSpec, SlurmCluster, slurm_available  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
TOPOLOGY = "SwitchName=leaf1 Nodes=dgx[01-08]\nSwitchName=leaf2 Nodes=dgx[09-16]\nSwitchName=spine Switches=leaf[1-2]\n"
DGX_H100_REAL_MEMORY_MB = 2063937  # MemTotal 2,113,442,596 KiB / 1024


def toposched(*args, check=True):
    r = subprocess.run([TOPOSCHED, *args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


class SlurmNodeListDiscovery(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # scripts/install-deps installs Slurm and munge and make test runs as root: without
        # them this test fails rather than skips (a skip would count as passed).
        reason = slurm_available()
        if reason:
            raise AssertionError(f"a private Slurm cluster cannot run here: {reason}")
    def test_scontrol_show_topology_reads_as_the_topology_conf(self):
        """`scontrol show topology` from the real controller (Level=, LinkSpeed=, the spine
        listing every node below it) gives the spec topology.conf gives: the tree a user can
        read from any Slurm cluster without access to its topology.conf."""
        nodes = [NodeSpec("dgx[01-16]", cpus=224, gpus=8, gpu_type="h100", real_memory_mb=DGX_H100_REAL_MEMORY_MB)]
        with SlurmCluster(nodes, topology_conf=TOPOLOGY, extra_conf=["PrivateData=cloud"]) as slurm, \
                tempfile.TemporaryDirectory() as d:
            shown = slurm.scontrol("show", "topology").stdout
            self.assertIn("Level=1", shown)  # the controller's own print, not topology.conf
            self.assertRegex(shown, r"SwitchName=spine .*Nodes=dgx\[01-16\]")
            paths = {}
            for name, text in (("shown.txt", shown), ("topology.conf", TOPOLOGY)):
                paths[name] = os.path.join(d, name)
                with open(paths[name], "w") as f:
                    f.write(text)
            specs = {name: toposched("discover", "--slurm-topology", path, "--format", "json") for name, path in paths.items()}
            self.assertEqual(specs["shown.txt"].stderr, "")  # no "already under" warnings
            self.assertEqual(json.loads(specs["shown.txt"].stdout), json.loads(specs["topology.conf"].stdout))

    def test_three_outputs_of_a_real_controller_give_one_spec(self):
        nodes = [NodeSpec("dgx[01-16]", cpus=224, gpus=8, gpu_type="h100", real_memory_mb=DGX_H100_REAL_MEMORY_MB),
                 NodeSpec("login1", cpus=8)]
        # The harness's nodes are State=CLOUD (no slurmd); PrivateData=cloud shows them while
        # powered down, as slurm.conf(5) says, so the clients list all 17.
        with SlurmCluster(nodes, topology_conf=TOPOLOGY, extra_conf=["PrivateData=cloud"]) as slurm, \
                tempfile.TemporaryDirectory() as d:
            outputs = {
                "scontrol-o.txt": slurm.scontrol("-o", "show", "node").stdout,
                "scontrol.txt": slurm.scontrol("show", "node").stdout,
                "sinfo.json": slurm.run("sinfo", "--json").stdout,
            }
            topology = os.path.join(d, "topology.conf")
            with open(topology, "w") as f:
                f.write(TOPOLOGY)
            # The multi-line form is what this test is for: records of several lines.
            self.assertIn("\n   ", outputs["scontrol.txt"])
            specs = {}
            for name, text in outputs.items():
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(text)
                r = toposched("discover", "--slurm-topology", topology, "--slurm-nodes", path, "--format", "json")
                self.assertIn("login1", r.stderr, name)  # skipped: no gpu gres
                specs[name] = json.loads(r.stdout)
            spec = specs["scontrol-o.txt"]
            self.assertEqual(len(spec["node_types"]), 1)
            node_type = spec["node_types"][0]
            self.assertEqual(node_type["host_memory_gb"], 2164)
            self.assertEqual(node_type["gpu"]["count"], 8)
            self.assertIn("H100", node_type["gpu"]["model"])
            self.assertEqual(sorted(s["name"] for s in spec["fabric"]["switches"]), ["leaf1", "leaf2", "spine"])
            for name in ("scontrol.txt", "sinfo.json"):
                self.assertEqual(specs[name], spec, name)


if __name__ == "__main__":
    unittest.main()
