"""`toposched export` to Kubernetes-side formats, checked against each tool's documented
schema (field names as in the upstream API types), and to DOT and the native spec.

Schemas checked (docs/export.md cites them):
- Topograph node labels: fabric.topograph.run/tier-N, accelerator.topograph.run/domain,
  accelerator.topograph.run/sub-domain; values valid label values, longer ones hashed
  "x" + hex FNV-1a 64 as Topograph's labeler does.
- Kueue: Topology kueue.x-k8s.io/v1beta2 (the default; v1alpha1 with --kueue-version)
  spec.levels[].nodeLabel (1..16 levels, kubernetes.io/hostname only last); ResourceFlavor
  kueue.x-k8s.io/v1beta2 (v1beta1 for the older APIs) spec.nodeLabels (1..8) +
  spec.topologyName. test_k8s_crd_validation.py validates against the CRDs themselves.
- Volcano: HyperNode topology.volcano.sh/v1alpha1 spec.tier / tierName / members[].type
  (Node|HyperNode) / members[].selector.exactMatch.name | regexMatch.pattern.
- KAI-Scheduler: Topology kai.scheduler/v1alpha1 spec.levels[].nodeLabel.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

import yaml

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Kueue's TopologyLevel.nodeLabel pattern.
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
TOPOGRAPH_KEY = re.compile(r"^(fabric\.topograph\.run/tier-\d+|accelerator\.topograph\.run/(domain|sub-domain)|toposched\.io/node-type)$")

GB200 = "preset:gb200-nvl72?racks=4&trays=3&racks_per_su=2"
DGX = "preset:dgx-h100?nodes=10&su_size=4"


def toposched(*args, check=True):
    r = subprocess.run([TOPOSCHED, *args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


def export(spec, fmt, *extra):
    return toposched("export", "--cluster", spec, "--to", fmt, *extra).stdout


def native(spec):
    return json.loads(toposched("show", "--cluster", spec, "--spec", "--format", "json").stdout)


def fnv1a64(data: bytes) -> int:
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def expected_labels(spec):
    """Each node's Topograph labels, derived from the native spec (not from the writer)."""
    doc = native(spec)
    tiers = [t["name"] for t in doc.get("fabric", {}).get("tiers", [])]
    switches = {s["name"]: s for s in doc.get("fabric", {}).get("switches", [])}
    nodes = _expand_nodes(doc)
    labels = {n: {} for n in nodes}
    for s in switches.values():
        for n in _expand(s.get("nodes", "")):
            sw = s
            while sw is not None:
                labels[n][f"fabric.topograph.run/tier-{tiers.index(sw['tier'])}"] = sw["name"]
                sw = switches.get(sw.get("parent")) if sw.get("parent") else None
    for d in doc.get("accelerator_domains", []):
        for n in _expand(d["nodes"]):
            labels[n]["accelerator.topograph.run/domain"] = d["name"]
    return labels


_EXPAND_CACHE = {}


def _expand(expr):
    """Expands a hostlist with toposched itself through a one-node-type native spec."""
    if not expr:
        return []
    if expr not in _EXPAND_CACHE:
        spec = {"version": 1, "name": "x",
                "node_types": [{"name": "t", "gpu": {"model": "H100", "count": 1}}],
                "nodes": [{"names": expr, "type": "t"}]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        try:
            out = toposched("export", "--cluster", f.name, "--to", "k8s-labels", "--style", "patch").stdout
            _EXPAND_CACHE[expr] = list(json.loads(out))
        finally:
            os.unlink(f.name)
    return _EXPAND_CACHE[expr]


def _expand_nodes(doc):
    return [n for group in doc["nodes"] for n in _expand(group["names"])]


class K8sLabelsTest(unittest.TestCase):
    def kubectl_labels(self, spec):
        labels = {}
        for line in export(spec, "k8s-labels").splitlines():
            if line.startswith("#") or not line.strip() or line == "set -e":
                continue
            words = shlex.split(line)
            self.assertEqual(words[:3], ["kubectl", "label", "node"])
            self.assertEqual(words[4], "--overwrite")
            labels[words[3]] = dict(w.split("=", 1) for w in words[5:])
        return labels

    def test_topograph_keys_and_values(self):
        for spec in (GB200, DGX, "preset:llama3-24k?pods=2&racks=3"):
            with self.subTest(spec=spec):
                got = self.kubectl_labels(spec)
                want = expected_labels(spec)
                self.assertEqual(set(got), set(want))
                for node, kv in got.items():
                    for k, v in kv.items():
                        self.assertRegex(k, TOPOGRAPH_KEY)
                        self.assertRegex(v, LABEL_VALUE)
                    topo = {k: v for k, v in kv.items() if k != "toposched.io/node-type"}
                    self.assertEqual(topo, want[node], node)

    def test_patch_style_is_the_same_labels_as_json_merge_patches(self):
        patches = json.loads(export(GB200, "k8s-labels", "--style", "patch"))
        kubectl = self.kubectl_labels(GB200)
        self.assertEqual(set(patches), set(kubectl))
        for node, patch in patches.items():
            self.assertEqual(list(patch), ["metadata"])
            self.assertEqual(list(patch["metadata"]), ["labels"])
            self.assertEqual(patch["metadata"]["labels"], kubectl[node])

    def test_long_and_odd_names_hashed_or_repaired_like_topograph(self):
        long_switch = "S3very-very-long-id-to-check-label-value-limits-of-63-characters"
        spec = {"version": 1, "name": "odd",
                "node_types": [{"name": "t", "gpu": {"model": "H100", "count": 1}}],
                "nodes": [{"names": "n[1-2]", "type": "t"}],
                "fabric": {"tiers": [{"name": "leaf"}, {"name": "spine"}],
                           "switches": [{"name": long_switch, "tier": "spine"},
                                        {"name": "leaf 1/a", "tier": "leaf", "parent": long_switch, "nodes": "n[1-2]"}]}}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        try:
            labels = json.loads(export(f.name, "k8s-labels", "--style", "patch"))
        finally:
            os.unlink(f.name)
        kv = labels["n1"]["metadata"]["labels"]
        self.assertGreater(len(long_switch), 63)
        self.assertEqual(kv["fabric.topograph.run/tier-1"], "x%x" % fnv1a64(long_switch.encode()))
        self.assertEqual(kv["fabric.topograph.run/tier-0"], "leaf-1-a")


class KueueKaiTest(unittest.TestCase):
    def levels_are_valid(self, levels, spec):
        self.assertGreaterEqual(len(levels), 1)
        self.assertLessEqual(len(levels), 16)
        labels = [l["nodeLabel"] for l in levels]
        for l in levels:
            self.assertEqual(list(l), ["nodeLabel"])
            self.assertRegex(l["nodeLabel"], LABEL_KEY)
        self.assertEqual(labels[-1], "kubernetes.io/hostname")
        self.assertNotIn("kubernetes.io/hostname", labels[:-1])
        self.assertEqual(len(set(labels)), len(labels))
        # Every level but the hostname is a label every node gets from k8s-labels.
        node_labels = json.loads(export(spec, "k8s-labels", "--style", "patch"))
        for node, patch in node_labels.items():
            for l in labels[:-1]:
                self.assertIn(l, patch["metadata"]["labels"], node)
        return labels

    def test_kueue_topology_and_resource_flavor(self):
        for spec, want in ((GB200, ["fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0", "accelerator.topograph.run/domain"]),
                           (DGX, ["fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0"])):
            with self.subTest(spec=spec):
                docs = list(yaml.safe_load_all(export(spec, "kueue")))
                self.assertEqual(len(docs), 2)
                topo, flavor = docs
                for d in docs:
                    self.assertEqual(set(d), {"apiVersion", "kind", "metadata", "spec"})
                    self.assertRegex(d["metadata"]["name"], DNS1123)
                self.assertEqual((topo["apiVersion"], topo["kind"]), ("kueue.x-k8s.io/v1beta2", "Topology"))
                self.assertEqual(set(topo["spec"]), {"levels"})
                labels = self.levels_are_valid(topo["spec"]["levels"], spec)
                self.assertEqual(labels, want + ["kubernetes.io/hostname"])
                self.assertEqual((flavor["apiVersion"], flavor["kind"]), ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"))
                self.assertEqual(set(flavor["spec"]), {"nodeLabels", "topologyName"})
                self.assertEqual(flavor["spec"]["topologyName"], topo["metadata"]["name"])
                self.assertTrue(1 <= len(flavor["spec"]["nodeLabels"]) <= 8)

    def test_kai_topology(self):
        docs = list(yaml.safe_load_all(export(GB200, "kai", "--name", "My Cluster")))
        self.assertEqual(len(docs), 1)
        topo = docs[0]
        self.assertEqual(set(topo), {"apiVersion", "kind", "metadata", "spec"})
        self.assertEqual((topo["apiVersion"], topo["kind"]), ("kai.scheduler/v1alpha1", "Topology"))
        self.assertEqual(topo["metadata"], {"name": "my-cluster"})
        self.assertEqual(set(topo["spec"]), {"levels"})
        self.levels_are_valid(topo["spec"]["levels"], GB200)


class VolcanoTest(unittest.TestCase):
    def hypernodes(self, spec, members):
        docs = list(yaml.safe_load_all(export(spec, "volcano", "--members", members)))
        by_name = {}
        for d in docs:
            self.assertEqual(set(d), {"apiVersion", "kind", "metadata", "spec"})
            self.assertEqual((d["apiVersion"], d["kind"]), ("topology.volcano.sh/v1alpha1", "HyperNode"))
            self.assertRegex(d["metadata"]["name"], DNS1123)
            self.assertTrue(set(d["spec"]) <= {"tier", "tierName", "members"})
            self.assertIsInstance(d["spec"]["tier"], int)
            self.assertGreaterEqual(d["spec"]["tier"], 0)
            for m in d["spec"]["members"]:
                self.assertEqual(set(m), {"type", "selector"})
                self.assertIn(m["type"], ("Node", "HyperNode"))
                self.assertEqual(len(m["selector"]), 1)
                (kind, sel), = m["selector"].items()
                self.assertIn(kind, ("exactMatch", "regexMatch"))
                self.assertEqual(list(sel), ["name"] if kind == "exactMatch" else ["pattern"])
            by_name[d["metadata"]["name"]] = d
        return by_name

    def nodes_below(self, by_name, name, all_nodes):
        out = set()
        for m in by_name[name]["spec"]["members"]:
            (kind, sel), = m["selector"].items()
            if m["type"] == "HyperNode":
                child = sel["name"]
                self.assertIn(child, by_name)
                self.assertLess(by_name[child]["spec"]["tier"], by_name[name]["spec"]["tier"])
                out |= self.nodes_below(by_name, child, all_nodes)
            elif kind == "exactMatch":
                out.add(sel["name"])
            else:
                out |= {n for n in all_nodes if re.fullmatch(sel["pattern"], n)}
        return out

    def test_tree_of_hypernodes_exact_and_regex_agree(self):
        for spec in (GB200, DGX, "preset:llama3-24k?pods=2&racks=12&servers_per_rack=2"):
            with self.subTest(spec=spec):
                all_nodes = list(json.loads(export(spec, "k8s-labels", "--style", "patch")))
                exact = self.hypernodes(spec, "exact")
                regex = self.hypernodes(spec, "regex")
                self.assertEqual(set(exact), set(regex))
                for name in exact:
                    self.assertEqual(self.nodes_below(exact, name, all_nodes),
                                     self.nodes_below(regex, name, all_nodes), name)
                tops = [n for n, d in exact.items() if d["spec"]["tier"] == max(x["spec"]["tier"] for x in exact.values())]
                covered = set().union(*(self.nodes_below(exact, t, all_nodes) for t in tops))
                self.assertEqual(covered, set(all_nodes))
        gb = self.hypernodes(GB200, "exact")
        domains = [d for d in gb.values() if d["spec"]["tierName"] == "accelerator-domain"]
        self.assertEqual(len(domains), 4)
        self.assertTrue(all(d["spec"]["tier"] == 1 for d in domains))


    def test_each_tier_has_one_tier_name_listed_in_the_header(self):
        """Volcano resolves a job's networkTopology.highestTierName through the HyperNodes'
        spec.tierName (one name -> tier map, scheduler framework/session.go): every tier must
        carry one name and every name one tier. The header lists them for users, and the
        extender reads volcano.sh/network-topology-highest-tier with the same numbering."""
        r = toposched("presets", "--format", "json")
        specs = ["preset:" + p["name"] for p in json.loads(r.stdout)] + [GB200, DGX]
        for spec in specs:
            with self.subTest(spec=spec):
                text = export(spec, "volcano")
                header = re.search(r"^# Tiers for networkTopology\.highestTierAllowed = highestTierName: (.*)$", text, re.M)
                written = {(d["spec"]["tier"], d["spec"]["tierName"]) for d in yaml.safe_load_all(text) if d}
                model_tiers = json.loads(toposched("show", "--cluster", spec, "--format", "json").stdout)["tiers"]
                if header is None:  # no tier and no NVLink-domain level: nothing to name
                    self.assertEqual((model_tiers, written), ([], set()))
                    continue
                listed = [tuple(x.strip().split(" = ", 1)) for x in header.group(1).split(",")]
                listed = [(int(t), name) for t, name in listed]
                self.assertEqual([t for t, _ in listed], list(range(1, len(listed) + 1)))
                self.assertEqual(len({name for _, name in listed}), len(listed))
                self.assertTrue(written <= set(listed), (written, listed))
                with_domains = any(name == "accelerator-domain" for _, name in written)
                self.assertEqual([name for _, name in listed], (["accelerator-domain"] if with_domains else []) + model_tiers)


class DotAndNativeTest(unittest.TestCase):
    def test_dot_nests_switches_and_labels_gpus(self):
        text = export(DGX, "dot")
        self.assertEqual(text.count("{"), text.count("}"))
        self.assertRegex(text, re.compile(r'^graph "dgx-h100-10n" \{$', re.M))
        nodes = re.findall(r'^\s*"(dgx-h100-\d+)" \[label="([^"]*)"\];$', text, re.M)
        self.assertEqual(len(nodes), 10)
        self.assertTrue(all(label.endswith("\\n8 GPUs") for _, label in nodes))
        self.assertEqual(len(re.findall(r'subgraph "cluster_\d+"', text)), 4)  # 3 leaves + spine
        # Nodes 1-4 sit inside the first leaf's cluster.
        first_leaf = text[text.index('label="leaf-su001 (leaf)"'):]
        first_leaf = first_leaf[:first_leaf.index("}")]
        self.assertEqual(re.findall(r'"(dgx-h100-\d+)" \[', first_leaf), [f"dgx-h100-00{i}" for i in range(1, 5)])

    @unittest.skipUnless(shutil.which("dot"), "Graphviz's dot is not installed (scripts/install-deps installs it)")
    def test_graphviz_reads_it(self):
        for spec in (DGX, GB200, "preset:llama3-24k?pods=2&racks=3"):
            with self.subTest(spec=spec):
                dot = export(spec, "dot")
                # `dot -Tcanon` re-emits the parsed graph: every node and cluster survives.
                r = subprocess.run(["dot", "-Tcanon"], input=dot, capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stderr, "")
                nodes = set(json.loads(export(spec, "k8s-labels", "--style", "patch")))
                for n in nodes:
                    self.assertIn(f'"{n}"' if "-" in n else n, r.stdout)
                self.assertEqual(len(re.findall(r"subgraph\s+\S*cluster_", r.stdout)),
                                 len(re.findall(r"subgraph \"cluster_", dot)))

    def test_native_json_and_yaml_read_back_into_the_same_cluster(self):
        want = json.loads(toposched("show", "--cluster", GB200, "--format", "json").stdout)
        for fmt in ("json", "yaml"):
            with self.subTest(fmt=fmt), tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, f"c.{fmt}")
                toposched("export", "--cluster", GB200, "--to", fmt, "-o", path)
                got = json.loads(toposched("show", "--cluster", path, "--format", "json").stdout)
                self.assertEqual(got, want)

    def test_json_envelope_and_errors(self):
        out = json.loads(toposched("export", "--cluster", DGX, "--to", "kai", "--format", "json").stdout)
        self.assertEqual(set(out), {"format", "cluster", "content", "warnings"})
        self.assertIn("kind: \"Topology\"", out["content"])
        r = toposched("export", "--cluster", DGX, "--to", "nope", check=False)
        self.assertEqual(r.returncode, 2)
        r = toposched("export", "--cluster", "/nonexistent/spec.yaml", "--to", "kai", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("toposched: error:", r.stderr)
        # An option of another format is a usage error, not silently ignored.
        r = toposched("export", "--cluster", DGX, "--to", "slurm-tree", "--members", "regex", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--members applies to --to volcano", r.stderr)
        with tempfile.TemporaryDirectory() as d:
            r = toposched("export", "--cluster", DGX, "--to", "kai", "-o", os.path.join(d, "missing", "x.yaml"), check=False)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(os.listdir(d), [])


class RoundTripCliTest(unittest.TestCase):
    """Exports read back by the command line: a topology.conf is a valid --cluster SPEC, and
    node labels go through `toposched discover --k8s-nodes`."""

    def fabric_summary(self, spec):
        s = json.loads(toposched("show", "--cluster", spec, "--format", "json").stdout)
        return s["hostlist"], [f["switches"] for f in s["fabric"]], [d["nodes"] for d in s["accelerator_domains"]]

    def test_slurm_tree_and_block_read_back(self):
        for spec in (DGX, GB200, "preset:llama3-24k?pods=2&racks=3"):
            with self.subTest(spec=spec), tempfile.TemporaryDirectory() as d:
                hostlist, switches, domains = self.fabric_summary(spec)
                tree = os.path.join(d, "topology.conf")
                toposched("export", "--cluster", spec, "--to", "slurm-tree", "-o", tree)
                got_hosts, got_switches, _ = self.fabric_summary(tree)
                self.assertEqual(sorted(_expand(got_hosts)), sorted(_expand(hostlist)))
                self.assertEqual(got_switches, switches)
                if domains:
                    blocks = os.path.join(d, "blocks.conf")
                    toposched("export", "--cluster", spec, "--to", "slurm-block", "-o", blocks)
                    _, _, got_domains = self.fabric_summary(blocks)
                    self.assertEqual(sorted(got_domains), sorted(domains))

    def test_k8s_labels_read_back_by_discover(self):
        for spec in (DGX, GB200):
            with self.subTest(spec=spec), tempfile.TemporaryDirectory() as d:
                patches = json.loads(export(spec, "k8s-labels", "--style", "patch"))
                nodes = {"apiVersion": "v1", "kind": "List",
                         "items": [{"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": n, "labels": p["metadata"]["labels"]}}
                                   for n, p in patches.items()]}
                path = os.path.join(d, "nodes.json")
                with open(path, "w") as f:
                    json.dump(nodes, f)
                out = os.path.join(d, "back.yaml")
                toposched("discover", "--k8s-nodes", path, "-o", out)
                hostlist, switches, domains = self.fabric_summary(spec)
                got_hosts, got_switches, got_domains = self.fabric_summary(out)
                self.assertEqual(sorted(_expand(got_hosts)), sorted(_expand(hostlist)))
                self.assertEqual(got_switches, switches)
                self.assertEqual(sorted(got_domains), sorted(domains))
                # The same labels again, from the discovered cluster.
                again = json.loads(export(out, "k8s-labels", "--style", "patch"))
                strip = lambda p: {n: {k: v for k, v in x["metadata"]["labels"].items() if k != "toposched.io/node-type"}
                                   for n, x in p.items()}
                self.assertEqual(strip(again), strip(patches))


if __name__ == "__main__":
    unittest.main()
