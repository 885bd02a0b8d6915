"""`toposched export` checked by a real Slurm controller (tests/e2e/slurm_harness.py).

- slurm-tree: a private slurmctld (topology/tree) accepts the exported topology.conf, logs no
  topology or gres error, and `scontrol show topology` lists exactly the exported switches,
  levels and nodes; a job that fits under one leaf switch is placed under one leaf switch.
- gres: the gres.conf of an 8x H100 node read from `nvidia-smi topo -m`
  (tests/data/nvidia-smi/h100-hgx-13nic.topo) has Links= 18 to every other GPU; slurmctld
  starts with it and `slurmd -G` reads back the same Links= and Cores=.
- Topograph's models (tests/data/topograph/models, as Topograph ships them): `show` gives
  their nodes, domains and tiers; their tree output (also with --name-shortener) is accepted
  by slurmctld with exactly the exported switches and nodes.
- slurm-block: Debian's Slurm 22.05 has no topology/block plugin (it came in 23.02/23.11), so the
  block output (Topograph's layout: base-size blocks, placeholders, padding) is checked
  against topology.conf(5)'s BlockName/BlockSizes rules here instead; slurm-yaml (Slurm
  25.05) against topology.yaml(5)'s fields.

The H100 nodes come from `toposched discover --topo-m` on the fixture; the expected Links
are read from the fixture's matrix by a small independent parser below.
"""

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_harness import NodeSpec, SlurmCluster, slurm_available  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
SOURCE_DIR = os.environ.get("TOPOSCHED_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
H100_TOPO = os.path.join(SOURCE_DIR, "tests", "data", "nvidia-smi", "h100-hgx-13nic.topo")
TOPOGRAPH_MODELS = os.path.join(SOURCE_DIR, "tests", "data", "topograph", "models")
# file: (nodes, accelerator domains, tiers), from each model's own comments.
MODEL_SHAPES = {
    "small-tree.yaml": (6, 2, 2), "medium.yaml": (8, 4, 3), "nvl72.yaml": (72, 4, 3),
    "large.yaml": (96, 12, 3), "dual-xclr-regular.yaml": (96, 2, 3), "dual-xclr-irregular.yaml": (255, 2, 3),
}


def toposched(*args, check=True):
    r = subprocess.run([TOPOSCHED, *args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


def parse_kv_lines(text, first_key):
    """Lines `Key=Value Key=Value ...` whose first key is `first_key`, comments dropped."""
    records = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        rec = dict(part.split("=", 1) for part in line.split())
        if first_key in rec:
            records.append(rec)
    return records


def show(spec):
    return json.loads(toposched("show", "--cluster", spec, "--format", "json").stdout)


@unittest.skipIf(slurm_available(), slurm_available() or "")
class SlurmTreeTest(unittest.TestCase):
    def check_tree_accepted(self, spec, gpu_type, job_nodes=None):
        info = show(spec)
        conf = toposched("export", "--cluster", spec, "--to", "slurm-tree").stdout
        gres = toposched("export", "--cluster", spec, "--to", "gres").stdout
        exported = {r["SwitchName"]: r for r in parse_kv_lines(conf, "SwitchName")}
        self.assertTrue(exported)
        gpus_per_node = info["gpus"] // info["nodes"]
        nodes = [NodeSpec(info["hostlist"], cpus=64, gpus=gpus_per_node, gpu_type=gpu_type)]
        with SlurmCluster(nodes, topology_conf=conf, gres_conf=gres) as slurm:
            expand = slurm.expand_hostlist
            shown = {s["SwitchName"]: s for s in slurm.show_topology()}
            self.assertEqual(set(shown), set(exported), "scontrol show topology lists other switches")

            # Expected per switch: Slurm's level (leaf 0, parent = highest child + 1) and every
            # node below it, both derived from the exported file alone.
            children = {n: expand(r.get("Switches", "")) for n, r in exported.items()}
            direct = {n: expand(r.get("Nodes", "")) for n, r in exported.items()}
            memo = {}

            def below(name):
                if name not in memo:
                    level, nodes_below = 0, set(direct[name])
                    for k in children[name]:
                        kl, kn = below(k)
                        level, nodes_below = max(level, kl + 1), nodes_below | kn
                    memo[name] = (level, nodes_below)
                return memo[name]

            for name, s in shown.items():
                level, nodes_below = below(name)
                self.assertEqual(int(s["Level"]), level, name)
                self.assertEqual(set(expand(s.get("Nodes", ""))), nodes_below, name)
                self.assertEqual(set(expand(s.get("Switches", ""))), set(children[name]), name)
            # Every node of the cluster hangs under exactly one leaf.
            all_nodes = expand(info["hostlist"])
            leaf_nodes = [n for name in exported for n in direct[name]]
            self.assertEqual(sorted(leaf_nodes), sorted(all_nodes))
            # Levels line up with the model's tiers, switch counts tier by tier.
            per_level = {}
            for name in exported:
                per_level[below(name)[0]] = per_level.get(below(name)[0], 0) + 1
            self.assertEqual([per_level.get(i, 0) for i in range(len(info["fabric"]))],
                             [t["switches"] for t in info["fabric"]])
            self.assertEqual(slurm.log_errors(("topolog", "switch", "gres")), [])

            if job_nodes:
                job = slurm.sbatch(f"--nodes={job_nodes}", f"--gres=gpu:{gpus_per_node}", "--exclusive")
                got = set(expand(slurm.wait_job_nodes(job)))
                self.assertEqual(len(got), job_nodes)
                leaves = [name for name in exported if direct[name]]
                self.assertTrue(any(got <= set(direct[leaf]) for leaf in leaves),
                                f"a {job_nodes}-node job should fit under one leaf switch, got {sorted(got)}")

    def test_dgx_h100_64_nodes_switch_for_switch(self):
        # Acceptance 1: 64 DGX H100 in two scalable units of 32 under one spine.
        self.check_tree_accepted("preset:dgx-h100?nodes=64", "h100-sxm5", job_nodes=32)

    def test_every_preset_at_small_size(self):
        specs = {
            "preset:dgx-a100?nodes=40&su_size=20": "a100-sxm4",
            "preset:hgx-h200?nodes=16&su_size=8": None,
            "preset:gb200-nvl72?racks=4&racks_per_su=2": None,
            "preset:pcie-l40s": None,
            "preset:llama3-24k?pods=2&racks=4": None,
            "preset:synthetic?nodes=48&fanout=8,3": None,
        }
        for spec, gpu_type in specs.items():
            with self.subTest(spec=spec):
                # The gres Type is the GPU model lower-cased, as the gres writer says.
                gres = toposched("export", "--cluster", spec, "--to", "gres").stdout
                m = re.search(r"\bType=(\S+)", gres)
                self.check_tree_accepted(spec, gpu_type or (m.group(1) if m else ""))


class TopographModelsTest(unittest.TestCase):
    """Every file of Topograph's tests/models/ is read as shipped."""

    def test_show_gives_nodes_domains_and_tiers(self):
        self.assertEqual(sorted(f for f in os.listdir(TOPOGRAPH_MODELS) if f.endswith(".yaml")), sorted(MODEL_SHAPES))
        for name, (nodes, domains, tiers) in MODEL_SHAPES.items():
            with self.subTest(model=name):
                info = show(os.path.join(TOPOGRAPH_MODELS, name))
                self.assertEqual(info["nodes"], nodes)
                self.assertEqual(len(info["accelerator_domains"]), domains)
                self.assertEqual(len(info["tiers"]), tiers)


@unittest.skipIf(slurm_available(), slurm_available() or "")
class TopographModelsSlurmTest(unittest.TestCase):
    """The tree output of Topograph's models, as written and with Topograph's name
    shortener, loaded into a real slurmctld."""

    def check(self, model, *extra):
        spec = os.path.join(TOPOGRAPH_MODELS, model)
        info = show(spec)
        conf = toposched("export", "--cluster", spec, "--to", "slurm-tree", *extra).stdout
        exported = {r["SwitchName"]: r for r in parse_kv_lines(conf, "SwitchName")}
        with SlurmCluster([NodeSpec(info["hostlist"], cpus=8)], topology_conf=conf) as slurm:
            expand = slurm.expand_hostlist
            shown = {s["SwitchName"]: s for s in slurm.show_topology()}
            self.assertEqual(set(shown), set(exported))
            direct = {n: set(expand(r.get("Nodes", ""))) for n, r in exported.items()}
            for name, s in shown.items():
                self.assertEqual(set(expand(s.get("Switches", ""))), set(expand(exported[name].get("Switches", ""))), name)
                if direct[name]:
                    self.assertEqual(set(expand(s.get("Nodes", ""))), direct[name], name)
            leaf_nodes = sorted(n for nodes in direct.values() for n in nodes)
            self.assertEqual(leaf_nodes, sorted(expand(info["hostlist"])))
            self.assertEqual(slurm.log_errors(("topolog", "switch")), [])
        return exported

    def test_every_model_tree_is_accepted(self):
        for model in MODEL_SHAPES:
            with self.subTest(model=model):
                self.check(model)

    def test_name_shortener(self):
        exported = self.check("large.yaml", "--name-shortener")
        self.assertEqual(sorted(exported), sorted(["switch.3.1"] + [f"switch.2.{i}" for i in range(1, 7)]
                                                  + [f"switch.1.{i}" for i in range(1, 13)]))


@unittest.skipIf(slurm_available(), slurm_available() or "")
class SlurmNamesTest(unittest.TestCase):
    """Switch names Slurm would misread, a switch with both nodes and child switches, and a
    switch with nothing below it: the export still starts slurmctld cleanly."""

    def test_odd_fabric_is_made_acceptable(self):
        long_name = "S" * 70
        spec = {"version": 1, "name": "odd",
                "node_types": [{"name": "t", "gpu": {"model": "H100", "count": 1}}],
                "nodes": [{"names": "n[01-10]", "type": "t"}],
                "fabric": {"tiers": [{"name": "leaf"}, {"name": "spine"}, {"name": "core"}],
                           "switches": [{"name": "core#1", "tier": "core"},
                                        {"name": long_name, "tier": "spine", "parent": "core#1", "nodes": "n[09-10]"},
                                        {"name": "leaf 1/a", "tier": "leaf", "parent": long_name, "nodes": "n[01-04]"},
                                        {"name": "leaf[2]", "tier": "leaf", "parent": long_name, "nodes": "n[05-08]"},
                                        {"name": "idle", "tier": "leaf", "parent": "core#1"}]}}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "odd.json")
            with open(path, "w") as f:
                json.dump(spec, f)
            r = toposched("export", "--cluster", path, "--to", "slurm-tree")
        self.assertIn("both nodes and child switches", r.stderr)
        self.assertIn("idle", r.stderr)
        exported = {x["SwitchName"]: x for x in parse_kv_lines(r.stdout, "SwitchName")}
        self.assertEqual(len(exported), 5)  # 4 non-empty switches + the split-off leaf
        for name in exported:
            self.assertRegex(name, r"^[A-Za-z0-9_.-]{1,64}$")
        with SlurmCluster([NodeSpec("n[01-10]", cpus=4, gpus=1)], topology_conf=r.stdout) as slurm:
            shown = {s["SwitchName"]: s for s in slurm.show_topology()}
            self.assertEqual(set(shown), set(exported))
            levels = sorted(int(s["Level"]) for s in shown.values())
            self.assertEqual(levels, [0, 0, 0, 1, 2])
            top = [s for s in shown.values() if s["Level"] == "2"][0]
            self.assertEqual(slurm.expand_hostlist(top["Nodes"]), [f"n{i:02}" for i in range(1, 11)])
            self.assertEqual(slurm.log_errors(("topolog", "switch")), [])


def fixture_nvlinks(path):
    """The fixture's GPU x GPU NVLink counts (-1 on the diagonal), read here independently
    of toposched's reader: cells are tab-separated, `NV18` is 18 links, ` X ` is the GPU."""
    with open(path) as f:
        rows = [l.rstrip("\n").split("\t") for l in f if re.match(r"GPU\d+\t", l)]
    counts = []
    for row in rows:
        cells = [c.strip() for c in row[1:len(rows) + 1]]
        counts.append([-1 if c == "X" else int(c[2:]) if c.startswith("NV") else 0 for c in cells])
    return counts


class GresTest(unittest.TestCase):
    """Acceptance 3: nodes read from the H100 `topo -m` fixture by `toposched discover`."""

    NODES = [f"h100-0{i}" for i in range(1, 5)]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        topo_dir = os.path.join(self.tmp.name, "topo")
        os.mkdir(topo_dir)
        with open(H100_TOPO) as f:
            matrix = f.read()
        for node in self.NODES:  # discover names each node after its file
            with open(os.path.join(topo_dir, f"{node}.topo"), "w") as f:
                f.write(matrix)
        self.spec_path = os.path.join(self.tmp.name, "h100.yaml")
        toposched("discover", "--topo-m", topo_dir, "--gpu-model", "NVIDIA H100 80GB HBM3", "-o", self.spec_path)

    def tearDown(self):
        self.tmp.cleanup()

    def gres_lines(self):
        text = toposched("export", "--cluster", self.spec_path, "--to", "gres").stdout
        return text, parse_kv_lines(text, "Name")

    def test_links_are_nvlink_counts_as_nvml_autodetect_writes_them(self):
        _, lines = self.gres_lines()
        want_links = fixture_nvlinks(H100_TOPO)
        self.assertEqual(len(want_links), 8)
        self.assertEqual([l["File"] for l in lines], [f"/dev/nvidia{i}" for i in range(8)])
        for i, l in enumerate(lines):
            self.assertEqual(l["Name"], "gpu")
            self.assertEqual(l["NodeName"], "h100-[01-04]")
            self.assertEqual(l["Type"], "h100-sxm5")
            links = [int(x) for x in l["Links"].split(",")]
            self.assertEqual(links, want_links[i])
            self.assertEqual(links, [-1 if j == i else 18 for j in range(8)])
            # CPUs 0-55,112-167 are cores 0-55 with their hyperthread siblings.
            self.assertEqual(l["Cores"], "0-55" if i < 4 else "56-111")

    @unittest.skipIf(slurm_available(), slurm_available() or "")
    def test_slurm_accepts_it(self):
        # slurmctld starts with the gres.conf, and slurmd reads it back the same.
        text, lines = self.gres_lines()
        node = NodeSpec("h100-[01-04]", cpus=224, gpus=8, gpu_type="h100-sxm5",
                        extra="Sockets=2 CoresPerSocket=56 ThreadsPerCore=2")
        topo = toposched("export", "--cluster", self.spec_path, "--to", "slurm-tree").stdout
        with SlurmCluster([node], topology_conf=topo, gres_conf=text) as slurm:
            self.assertEqual(slurm.log_errors(("gres", "topolog")), [])
            records = slurm.slurmd_gres("h100-03")
            self.assertEqual(len(records), 8)
            for rec, line in zip(records, lines):
                self.assertEqual(rec["File"], line["File"])
                self.assertEqual(rec["Links"], line["Links"])
                self.assertEqual(rec["Type"], "h100-sxm5")
                self.assertEqual(rec["Cores"], line["Cores"])
            job = slurm.sbatch("--nodes=1", "--gres=gpu:h100-sxm5:8")
            self.assertIn(slurm.wait_job_nodes(job), self.NODES)


def check_block_conf(test, text, cluster_nodes):
    """topology.conf(5) for topology/block: BlockName= of [A-Za-z0-9_.-] (with Nodes=, or alone
    for an empty block), each node in at most one block and known to the cluster, one
    BlockSizes= line, sizes strictly increasing, each a power-of-two multiple of the previous."""
    blocks, sizes = [], None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        test.assertRegex(line, r"^(BlockName=[A-Za-z0-9_.-]{1,64}( Nodes=\S+)?|BlockSizes=\d+(,\d+)*)$")
        if line.startswith("BlockSizes="):
            test.assertIsNone(sizes, "exactly one BlockSizes= line")
            sizes = [int(x) for x in line.split("=", 1)[1].split(",")]
            continue
        rec = dict(part.split("=", 1) for part in line.split())
        blocks.append((rec["BlockName"], expand_hostlist(rec.get("Nodes", ""))))
    test.assertIsNotNone(sizes, "a BlockSizes= line")
    test.assertEqual(len({b for b, _ in blocks}), len(blocks), "block names are unique")
    seen = [n for _, nodes in blocks for n in nodes]
    test.assertEqual(len(seen), len(set(seen)), "a node is in at most one block")
    test.assertTrue(set(seen) <= set(cluster_nodes))
    for a, b in zip(sizes, sizes[1:]):
        test.assertGreater(b, a)
        test.assertEqual(b % a, 0)
        test.assertEqual((b // a) & (b // a - 1), 0)
    return blocks, sizes


def expand_hostlist(expr):
    """Slurm hostlists: comma-separated items, several bracket groups per item expanded
    leftmost-slowest, zero padding from each range's first bound."""
    items, depth, cur = [], 0, ""
    for ch in expr:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    out = []
    for item in filter(None, items):
        names = [""]
        for text, body in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", item):
            values = [""]
            if body:
                values = []
                for part in body.split(","):
                    lo, _, hi = part.partition("-")
                    values += [f"{v:0{len(lo)}d}" for v in range(int(lo), int(hi or lo) + 1)]
            names = [n + text + v for n in names for v in values]
        out += names
    return out


class SlurmBlockTest(unittest.TestCase):
    """topology/block is not in Slurm 22.05: check topology.conf(5)'s block rules and
    Topograph's layout on the output instead."""

    def blocks(self, spec, *extra):
        text = toposched("export", "--cluster", spec, "--to", "slurm-block", *extra).stdout
        return check_block_conf(self, text, expand_hostlist(show(spec)["hostlist"]))

    def test_gb200_nvl72_eight_racks(self):
        blocks, sizes = self.blocks("preset:gb200-nvl72?racks=8")
        self.assertEqual(len(blocks), 8)
        for i, (name, nodes) in enumerate(blocks, 1):
            self.assertEqual(name, f"block{i:03d}")
            self.assertEqual(nodes, [f"gb200-r{i:02d}-n{k:02d}" for k in range(1, 19)])
        self.assertEqual(sizes, [18, 36, 72, 144])

    def test_block_sizes_follow_topograph_rules(self):
        for racks in (1, 3, 5, 8, 12):
            with self.subTest(racks=racks):
                blocks, sizes = self.blocks(f"preset:gb200-nvl72?racks={racks}")
                self.assertEqual(len(blocks), racks)
                self.assertEqual(sizes[0], 18)  # the smallest block
                self.assertEqual(len(sizes), int(math.log2(racks)) + 1)
                for a, b in zip(sizes, sizes[1:]):
                    self.assertEqual(b, 2 * a)

    def test_leaf_groups_without_domains(self):
        text = toposched("export", "--cluster", "preset:dgx-h100?nodes=128", "--to", "slurm-block").stdout
        self.assertEqual(re.findall(r"^# block00\d=(\S+)$", text, re.M), [f"leaf-su00{i}" for i in range(1, 5)])
        _, sizes = self.blocks("preset:dgx-h100?nodes=128")
        self.assertEqual(sizes, [32, 64, 128])

    def test_topograph_models_with_block_sizes(self):
        # Topograph's layout on its own models: base-size blocks, empty placeholders, padding
        # to a multiple of the largest size.
        cases = {
            ("large.yaml", "8,16,32"): (12, 0),
            ("nvl72.yaml", "18,36,72"): (4, 0),
            ("nvl72.yaml", "9,18,72"): (8, 0),
            ("dual-xclr-irregular.yaml", "9,144"): (32, 3),
            ("dual-xclr-regular.yaml", ""): (16, 4),  # sizes inferred from the racks: 8,64
            ("medium.yaml", "2,4,16"): (8, 4),
        }
        for (model, sizes_arg), (count, empty) in cases.items():
            with self.subTest(model=model, sizes=sizes_arg):
                extra = ("--block-sizes", sizes_arg) if sizes_arg else ()
                blocks, sizes = self.blocks(os.path.join(TOPOGRAPH_MODELS, model), *extra)
                self.assertEqual(len(blocks), count)
                self.assertEqual(sum(1 for _, nodes in blocks if not nodes), empty)
                self.assertTrue(all(len(nodes) <= sizes[0] for _, nodes in blocks))
                self.assertEqual(len(blocks) * sizes[0] % sizes[-1], 0)

    def test_block_names_and_skeleton(self):
        spec = os.path.join(TOPOGRAPH_MODELS, "large.yaml")
        blocks, _ = self.blocks(spec, "--block-sizes", "8,16,32", "--block-name", r"srv([0-9])([0-9])", "rack$1-$2")
        self.assertEqual([b for b, _ in blocks], [f"rack{s}-{l}" for s in range(1, 7) for l in (1, 2)])
        blocks, _ = self.blocks(spec, "--skeleton-only")
        self.assertEqual(len(blocks), 12)
        self.assertTrue(all(not nodes for _, nodes in blocks))
        r = toposched("export", "--cluster", spec, "--to", "slurm-block", "--block-name", "^srv", "x", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("duplicate block name", r.stderr)

    def test_given_block_sizes_are_validated(self):
        _, sizes = self.blocks("preset:gb200-nvl72?racks=8", "--block-sizes", "9,36")
        self.assertEqual(sizes, [9, 36])
        # Topograph accepts a first size above the smallest block and a last one beyond the blocks.
        _, sizes = self.blocks("preset:gb200-nvl72?racks=8", "--block-sizes", "18,288")
        self.assertEqual(sizes, [18, 288])
        for bad in ("18,30", "18,18", "36,18", "0", "x", ",".join(["1"] * 21)):
            with self.subTest(bad=bad):
                r = toposched("export", "--cluster", "preset:gb200-nvl72?racks=8", "--to", "slurm-block",
                              "--block-sizes", bad, check=False)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--block-sizes", r.stderr)
                self.assertEqual(r.stdout, "")


class RingAndTorusTest(unittest.TestCase):
    """Slurm 26.05's topology/ring and topology/torus3d need node-to-node links the model does
    not have: `--to slurm-ring|slurm-torus3d` is refused saying so, and writes nothing."""

    def test_refused_with_the_reason(self):
        for to, plugin in (("slurm-ring", "topology/ring"), ("slurm-torus3d", "topology/torus3d")):
            with self.subTest(to=to):
                r = toposched("export", "--cluster", "preset:dgx-h100?nodes=8", "--to", to, check=False)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(plugin, r.stderr)
                self.assertIn("switch trees and NVLink domains", r.stderr)
                self.assertEqual(r.stdout, "")


class SlurmYamlTest(unittest.TestCase):
    """topology.yaml is Slurm 25.05+: checked against topology.yaml(5) field by field, and
    against the tree and block topology.conf of the same cluster."""

    def test_fields_and_content_match_the_conf_formats(self):
        import yaml
        for spec in ("preset:gb200-nvl72?racks=4&racks_per_su=2", "preset:dgx-h100?nodes=64", "preset:pcie-l40s"):
            with self.subTest(spec=spec):
                text = toposched("export", "--cluster", spec, "--to", "slurm-yaml").stdout
                doc = yaml.safe_load(text)
                self.assertIsInstance(doc, list)
                self.assertEqual(sum(1 for t in doc if t.get("cluster_default")), 1)
                for t in doc:
                    self.assertEqual(next(iter(t)), "topology")  # "Must be the first attribute"
                    self.assertEqual(len({"block", "flat", "tree"} & set(t)), 1)
                    self.assertTrue(set(t) <= {"topology", "cluster_default", "block", "flat", "tree"})
                    self.assertIsInstance(t["cluster_default"], bool)
                tree = [t["tree"] for t in doc if "tree" in t]
                self.assertEqual(len(tree), 1)
                conf = {r["SwitchName"]: r for r in parse_kv_lines(
                    toposched("export", "--cluster", spec, "--to", "slurm-tree").stdout, "SwitchName")}
                switches = tree[0]["switches"]
                self.assertEqual(sorted(s["switch"] for s in switches), sorted(conf))
                for s in switches:
                    self.assertTrue(set(s) <= {"switch", "children", "nodes"})
                    self.assertLessEqual(len(s["switch"]), 64)
                    for key, conf_key in (("children", "Switches"), ("nodes", "Nodes")):
                        self.assertEqual(sorted(expand_hostlist(s.get(key, ""))),
                                         sorted(expand_hostlist(conf[s["switch"]].get(conf_key, ""))))
                block = [t["block"] for t in doc if "block" in t]
                self.assertEqual(len(block), 1)
                self.assertEqual(set(block[0]), {"block_sizes", "blocks"})
                text_conf = toposched("export", "--cluster", spec, "--to", "slurm-block").stdout
                blocks = parse_kv_lines(text_conf, "BlockName")
                sizes = parse_kv_lines(text_conf, "BlockSizes")[0]["BlockSizes"]
                self.assertEqual(block[0]["block_sizes"], [int(x) for x in sizes.split(",")])
                # Topograph numbers blocks block1... in topology.yaml, block001... in topology.conf.
                self.assertEqual([(b["block"], b["nodes"]) for b in block[0]["blocks"]],
                                 [(f"block{int(b['BlockName'][5:])}", b["Nodes"]) for b in blocks])

    def test_partitions_flat_and_cluster_default(self):
        import yaml
        spec = os.path.join(TOPOGRAPH_MODELS, "large.yaml")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "topologies.yaml")
            with open(path, "w") as f:
                f.write("topologies:\n"
                        "  nvl: {plugin: topology/block, nodes: ['srv[11-12][01-08]'], blockSizes: [4, 8]}\n"
                        "  fabric: {plugin: topology/tree, nodes: ['srv[21-32][01-08]']}\n"
                        "  down: {plugin: topology/tree, nodes: [gone]}\n"
                        "  everything: {plugin: topology/flat, clusterDefault: true}\n")
            for skeleton in ((), ("--skeleton-only",)):
                text = toposched("export", "--cluster", spec, "--to", "slurm-yaml", "--topologies", path, *skeleton).stdout
                doc = yaml.safe_load(text)
                self.assertEqual([t["topology"] for t in doc], ["down", "everything", "fabric", "nvl"])
                self.assertEqual([t["cluster_default"] for t in doc], [False, True, False, False])
                self.assertEqual(doc[0].get("flat"), True)
                self.assertEqual(doc[1].get("flat"), True)
                self.assertEqual(sorted(s["switch"] for s in doc[2]["tree"]["switches"]),
                                 ["core", "leaf-2-1", "leaf-2-2", "leaf-3-1", "leaf-3-2", "spine-2", "spine-3"])
                self.assertEqual(doc[3]["block"]["block_sizes"], [4, 8])
                self.assertEqual([b["block"] for b in doc[3]["block"]["blocks"]], ["block1", "block2", "block3", "block4"])
                if skeleton:
                    self.assertTrue(all("nodes" not in b for b in doc[3]["block"]["blocks"]))
                else:
                    self.assertEqual(doc[3]["block"]["blocks"][0]["nodes"], "srv[1101-1104]")


if __name__ == "__main__":
    unittest.main()
