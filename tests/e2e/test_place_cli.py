"""`toposched place`, `release` and `frag` end to end: the JSON contract, the shape of `topo`'s
placement of a 3-D-parallel training job, first-fit doing worse on a fragmented cluster,
state files shared between calls, and errors (exit 1 with the reason, exit 2 for usage,
no half-written or clobbered state)."""

import json
import os
import subprocess
import tempfile
import unittest

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
CLUSTER = "preset:dgx-h100?nodes=64"  # 2 leaves of 32 nodes x 8 GPUs


def run(*args):
    return subprocess.run([TOPOSCHED, *args], capture_output=True, text=True, timeout=120)


def ok_json(*args):
    r = run(*args, "--format", "json")
    if r.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def leaf_of_nodes():
    spec = ok_json("show", "--cluster", CLUSTER, "--spec")
    leaf = {}
    for sw in spec["fabric"]["switches"]:
        if sw.get("nodes"):
            for n in expand(sw["nodes"]):
                leaf[n] = sw["name"]
    return leaf


def expand(hostlist):
    """Expands the simple hostlists of the dgx-h100 preset: prefix[a-b] or a single name."""
    out = []
    for item in hostlist.split(","):
        if "[" not in item:
            out.append(item)
            continue
        prefix, rng = item[:-1].split("[")
        for part in rng.split(","):
            lo, _, hi = part.partition("-")
            hi = hi or lo
            out += [f"{prefix}{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1)]
    return out


def fragmented_state(path):
    """Every node of the first leaf runs a 2-GPU job."""
    jobs = [{"id": f"small-{n}", "gpus": [f"dgx-h100-{n:03d}:0", f"dgx-h100-{n:03d}:1"]} for n in range(1, 33)]
    with open(path, "w") as f:
        json.dump({"format": "toposched-allocation-state", "version": 1, "cluster": "dgx-h100-64n",
                   "gpus": 512, "jobs": jobs}, f)


class PlaceCli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_topo_keeps_tp_groups_on_nodes_and_stages_under_one_leaf(self):
        out = ok_json("place", "--cluster", CLUSTER, "--gpus", "256", "--tp", "8", "--pp", "4", "--policy", "topo")
        for key in ("job", "policy", "gpus", "nodes", "predicted_comm_us"):
            self.assertIn(key, out)
        self.assertEqual(out["policy"], "topo")
        gpus = sorted(out["gpus"], key=lambda g: g["rank"])
        self.assertEqual([g["rank"] for g in gpus], list(range(256)))
        self.assertEqual(len({(g["node"], g["gpu"]) for g in gpus}), 256)
        leaf = leaf_of_nodes()
        for start in range(0, 256, 8):  # TP groups: 8 consecutive ranks
            self.assertEqual(len({g["node"] for g in gpus[start:start + 8]}), 1, f"TP group at rank {start} split")
        for stage in range(4):  # PP stages: 64 consecutive ranks (tp x dp) fit one leaf of 256 GPUs
            self.assertEqual(len({leaf[g["node"]] for g in gpus[stage * 64:(stage + 1) * 64]}), 1)
        self.assertGreater(out["predicted_comm_us"], 0)
        # CUDA_VISIBLE_DEVICES lists each node's GPUs in rank order.
        first = gpus[0]["node"]
        self.assertEqual(out["cuda_visible_devices"][first],
                         ",".join(str(g["gpu"]) for g in gpus if g["node"] == first))
        self.assertEqual(set(expand(out["nodes"])), {g["node"] for g in gpus})

    def test_first_fit_is_visibly_worse_on_a_fragmented_cluster(self):
        state = self.path("frag.json")
        fragmented_state(state)
        args = ["place", "--cluster", CLUSTER, "--gpus", "256", "--tp", "8", "--pp", "4", "--state", state]
        topo = ok_json(*args, "--policy", "topo")
        first = ok_json(*args, "--policy", "first-fit")
        self.assertEqual(topo["tp_groups_split"], 0)
        self.assertGreater(first["tp_groups_split"], 0)
        self.assertGreater(first["predicted_comm_us"], 1.5 * topo["predicted_comm_us"],
                           f"first-fit {first['predicted_comm_us']} vs topo {topo['predicted_comm_us']}")
        busy = {f"dgx-h100-{n:03d}" for n in range(1, 33)}
        self.assertFalse({g["node"] for g in topo["gpus"]} & busy)

    def test_state_file_round_trip_place_release_frag(self):
        state = self.path("s.json")
        a = ok_json("place", "-c", CLUSTER, "--nodes", "4", "--policy", "slurm-tree", "--job", "a", "--save-state", state)
        self.assertEqual(len(a["gpus"]), 32)
        b = ok_json("place", "-c", CLUSTER, "--gpus", "12", "--policy", "first-fit", "--job", "b",
                    "--state", state, "--save-state", state)
        self.assertFalse({g["node"] for g in a["gpus"]} & {g["node"] for g in b["gpus"]})
        frag = ok_json("frag", "-c", CLUSTER, "--state", state)
        self.assertEqual(frag["free_gpus"], 512 - 44)
        self.assertEqual(frag["free_whole_nodes"], 64 - 4 - 2)
        # A third job without --job gets a fresh id.
        c = ok_json("place", "-c", CLUSTER, "--gpus", "1", "--state", state, "--save-state", state)
        self.assertNotIn(c["job"], ("a", "b"))
        rel = ok_json("release", "-c", CLUSTER, "--state", state, "--job", "a")
        self.assertEqual(rel["released_gpus"], 32)
        frag = ok_json("frag", "-c", CLUSTER, "--state", state)
        self.assertEqual(frag["free_gpus"], 512 - 13)
        r = run("release", "-c", CLUSTER, "--state", state, "--job", "a")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no job 'a'", r.stderr)

    def test_infeasible_request_exits_1_with_the_reason(self):
        r = run("place", "-c", CLUSTER, "--gpus", "600", "--policy", "topo")
        self.assertEqual(r.returncode, 1)
        self.assertIn("512", r.stderr)
        state = self.path("frag.json")
        fragmented_state(state)
        r = run("place", "-c", CLUSTER, "--gpus", "64", "--required-tier", "node", "--state", state)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot place", r.stderr)
        r = run("place", "-c", "preset:gb200-nvl72?racks=2", "--gpus", "144", "--tp", "144")
        self.assertEqual(r.returncode, 1)
        self.assertIn("needs 144 GPUs in one NVLink domain; the largest free one has 72", r.stderr)

    def test_usage_errors_exit_2(self):
        for args in (["place", "-c", CLUSTER, "--gpus", "8", "--nodes", "1"],
                     ["place", "-c", CLUSTER, "--gpus", "8", "--policy", "best"],
                     ["place", "-c", CLUSTER, "--gpus", "24", "--tp", "8", "--pp", "2"],
                     ["place", "-c", CLUSTER],
                     ["frag", "-c", CLUSTER, "--sizes", "8:x"]):
            with self.subTest(args=args):
                r = run(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("error", r.stderr)

    def test_bad_state_file_is_reported_and_left_alone(self):
        state = self.path("bad.json")
        text = '{"format": "toposched-allocation-state", "version": 1,\n "cluster": "dgx-h100-64n",\n "jobs": [{"id": "x", "gpus": ["nope:1"]}]}\n'
        with open(state, "w") as f:
            f.write(text)
        r = run("place", "-c", CLUSTER, "--gpus", "8", "--state", state, "--save-state", state)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"bad\.json:3:\d+: .*no node named 'nope'")
        with open(state) as f:
            self.assertEqual(f.read(), text)
        r = run("place", "-c", CLUSTER, "--gpus", "8", "--state", self.path("missing.json"))
        self.assertEqual(r.returncode, 1)

    def test_kueue_slices_and_unconstrained(self):
        # 12 pods (one per GPU) in slices of 4, each slice on one node, all under one leaf:
        # Kueue's BestFit gives the first node two slices and the next one the last slice.
        out = ok_json("place", "-c", CLUSTER, "--gpus", "12", "--policy", "kueue-bestfit", "--required-tier", "leaf",
                      "--slice-size", "4", "--slice-tier", "node")
        per_node = {}
        for g in out["gpus"]:
            per_node[g["node"]] = per_node.get(g["node"], 0) + 1
        self.assertEqual(sorted(per_node.values()), [4, 8])
        leaf = leaf_of_nodes()
        self.assertEqual(len({leaf[n] for n in per_node}), 1)
        # The same request with the levels named by node label, as Kueue's annotations do.
        by_label = ok_json("place", "-c", CLUSTER, "--gpus", "12", "--policy", "kueue-bestfit", "--required-tier",
                           "fabric.topograph.run/tier-0", "--slice-size", "4", "--slice-tier", "kubernetes.io/hostname")
        self.assertEqual(by_label["gpus"], out["gpus"])
        r = run("place", "-c", CLUSTER, "--gpus", "8", "--required-tier", "accelerator.topograph.run/domain")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("NVLink-domain level", r.stderr)
        # Unconstrained: the node with the least free capacity that holds the job.
        state = self.path("s.json")
        fragmented_state(state)  # every node of the first leaf has 6 GPUs free
        out = ok_json("place", "-c", CLUSTER, "--gpus", "5", "--policy", "kueue-bestfit", "--unconstrained",
                      "--state", state)
        self.assertEqual(out["nodes"], "dgx-h100-001")
        # Slices are Kueue's: another policy refuses them (exit 1), a half-given slice is a usage error.
        r = run("place", "-c", CLUSTER, "--gpus", "8", "--policy", "topo", "--slice-size", "4", "--slice-tier", "node")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("does not implement Kueue slices", r.stderr)
        r = run("place", "-c", CLUSTER, "--gpus", "8", "--policy", "kueue-bestfit", "--slice-size", "4")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--slice-size needs --slice-tier", r.stderr)
        r = run("place", "-c", CLUSTER, "--gpus", "8", "--policy", "kueue-bestfit", "--unconstrained",
                "--required-tier", "leaf")
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_help_explains_the_options(self):
        r = run("place", "--help")
        self.assertEqual(r.returncode, 0)
        for word in ("--tp", "--pp", "--policy", "--state", "--save-state", "--explain", "slurm-tree", "Example",
                     "--slice-size", "--slice-tier", "--unconstrained"):
            self.assertIn(word, r.stdout)
        r = run("place", "-c", CLUSTER, "--gpus", "16", "--tp", "8", "--explain")
        self.assertEqual(r.returncode, 0)
        self.assertIn("TP group", r.stdout)


if __name__ == "__main__":
    unittest.main()
