"""Kubernetes-facing exports and deploy/kubernetes/ judged by a real kube-apiserver (issue 30,
acceptance 4), built from k8s.io/kubernetes by scripts/install-k8s-test-binaries.

The CRDs installed: Kueue's Topology and ResourceFlavor from Kueue's own module (v0.17.0,
copied into the binaries' cache folder by the install script), Volcano's HyperNode CRD and
its ValidatingAdmissionPolicy, KAI's Topology (tests/data/k8s-crds/, from those projects).
Every export of every preset, of the specs discovered from the real-format fixtures and of
the awkward spec of test_k8s_crd_validation.py is applied with `kubectl apply
--server-side`, so the API server's own OpenAPI schema, CEL rules and admission policy
judge it; each object is read back and must hold what was applied. The `k8s-labels` kubectl
script runs against fake nodes and the labels are read back. A spec whose node names
Kubernetes refuses is refused by the exporter, and the API server refuses a Node of that
name for the same reason. deploy/kubernetes/ is applied server-side in its README's order.

The binaries must be there (make test builds them): without them this test fails.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_k8s_crd_validation as crdv  # noqa: E402
from k8s_harness import ControlPlane, bin_dir, topology_labels  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
SOURCE_DIR = crdv.SOURCE_DIR
KUEUE_CRDS = os.path.join(os.path.dirname(bin_dir()), "crds", "kueue")
OTHER_CRDS = [os.path.join(crdv.CRDS, f) for f in ("volcano-hypernodes.yaml", "kai-topologies.yaml",
                                                  "volcano-hypernodes-validating.yaml")]
NFD_CRDS = [os.path.join(crdv.CRDS, f) for f in ("nfd-nodefeatures.yaml", "nfd-nodefeaturegroups.yaml")]
NFD_NAMESPACE = "node-feature-discovery"
DEPLOY_ORDER = ["namespace.yaml", "rbac.yaml", "configmap-cluster.yaml", "toposched.yaml", "networkpolicy.yaml",
                "lifecycle.yaml", "scheduler-config.yaml", "kube-scheduler.yaml",
                "scheduler-plugin-config.yaml", "kube-scheduler-plugin.yaml"]
# The resource (plural.group) of each kind an export writes, for deleting them all at once.
RESOURCES = {"HyperNode": "hypernodes", "Topology": "topologies", "ResourceFlavor": "resourceflavors",
             "NodeFeature": "nodefeatures", "NodeFeatureGroup": "nodefeaturegroups"}


def contains(applied, server):
    """Every field of `applied` is in `server` with the same value (the server adds defaults,
    managedFields, uid...)."""
    if isinstance(applied, dict):
        return isinstance(server, dict) and all(k in server and contains(v, server[k]) for k, v in applied.items())
    if isinstance(applied, list):
        return isinstance(server, list) and len(applied) == len(server) and all(
            contains(a, s) for a, s in zip(applied, server))
    return applied == server


class ApiServerJudgesExports(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-k8s-exports-")
        cls.kube = ControlPlane()  # no kube-scheduler; raises (fails) without the binaries
        cls.kube.start()
        kueue = sorted(os.path.join(KUEUE_CRDS, f) for f in os.listdir(KUEUE_CRDS)
                       if f.endswith(("_topologies.yaml", "_resourceflavors.yaml")))
        assert len(kueue) == 2, f"Kueue's Topology and ResourceFlavor CRDs not found in {KUEUE_CRDS}"
        args = ["apply", "--server-side"]
        for f in kueue + OTHER_CRDS[:2] + NFD_CRDS:
            args += ["-f", f]
        cls.kube.kubectl(*args)
        cls.kube.kubectl("wait", "--for=condition=Established", "--timeout=120s",
                         "crd/topologies.kueue.x-k8s.io", "crd/resourceflavors.kueue.x-k8s.io",
                         "crd/hypernodes.topology.volcano.sh", "crd/topologies.kai.scheduler",
                         "crd/nodefeatures.nfd.k8s-sigs.io", "crd/nodefeaturegroups.nfd.k8s-sigs.io")
        cls.kube.kubectl("create", "namespace", NFD_NAMESPACE)
        cls.kube.kubectl("apply", "--server-side", "-f", OTHER_CRDS[2])
        cls.specs = cls.cluster_specs()

    @classmethod
    def cluster_specs(cls):
        d = cls.tmp.name
        with open(os.path.join(d, "awkward.yaml"), "w") as f:
            f.write(crdv.AWKWARD_SPEC)
        specs = crdv.presets() + [os.path.join(SOURCE_DIR, "examples", "cluster-small.yaml"),
                                  os.path.join(d, "awkward.yaml")]
        for name, flag, fixture in (("ibnet", "--ibnetdiscover", "two-su-rails-storage.ibnet"),
                                    ("slurm", "--slurm-topology", "slurm-tree.conf"),
                                    ("topograph", "--topograph-model", "topograph-model.yaml"),
                                    ("k8s-nodes", "--k8s-nodes", "k8s-nodes.json")):
            out = os.path.join(d, f"discovered-{name}.yaml")
            r = crdv.toposched("discover", flag, os.path.join(crdv.DISCOVERY, fixture), "-o", out)
            assert r.returncode == 0, f"discover {name}: {r.stderr}"
            specs.append(out)
        return specs

    @classmethod
    def tearDownClass(cls):
        cls.kube.stop()
        cls.tmp.cleanup()

    def apply_and_read_back(self, text, what):
        docs = [d for d in yaml.safe_load_all(text) if d]
        self.assertTrue(docs, what)
        r = self.kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=text, check=False)
        self.assertEqual(r.returncode, 0, f"{what}: the API server refused it: {r.stderr}")
        got = json.loads(self.kube.kubectl("get", "-f", "-", "-o", "json", input=text).stdout)
        items = got["items"] if got.get("kind") == "List" else [got]
        by_name = {(i["kind"], i["metadata"]["name"]): i for i in items}
        for doc in docs:
            server = by_name.get((doc["kind"], doc["metadata"]["name"]))
            self.assertIsNotNone(server, f"{what}: {doc['kind']} {doc['metadata']['name']} not read back")
            self.assertTrue(contains(doc.get("spec", {}), server.get("spec", {})),
                            f"{what}: {doc['metadata']['name']}: the server holds another spec")
        return docs

    def apply_read_back_delete(self, text, what):
        """As apply_and_read_back, then deletes the objects: the next cluster's objects of the
        same name are creates (Kueue's and KAI's Topology levels are immutable)."""
        docs = self.apply_and_read_back(text, what)
        # One DeleteCollection request per kind, then a wait until the list is empty: kubectl
        # deletes one object per request (`delete -f` or `--all`), and the 1,545 HyperNodes of
        # llama3-24k took more than two minutes that way.
        for kind, api_version, ns in sorted({(d["kind"], d["apiVersion"], d["metadata"].get("namespace", ""))
                                              for d in docs}):
            path = f"/apis/{api_version}/{f'namespaces/{ns}/' if ns else ''}{RESOURCES[kind]}"
            self.kube.api.ok("DELETE", path)
            deadline = time.monotonic() + 120
            while self.kube.api.get(path)["items"]:
                self.assertLess(time.monotonic(), deadline, f"{what}: {path} not empty 120 s after DeleteCollection")
                time.sleep(0.2)
        return docs

    def export(self, spec, fmt, *extra):
        r = crdv.toposched("export", "--cluster", spec, "--to", fmt, *extra)
        self.assertEqual(r.returncode, 0, f"export {spec} --to {fmt}: {r.stderr}")
        return r.stdout

    def test_every_export_applies_server_side(self):
        exports = [("kueue",), ("kueue", "--kueue-version", "v1beta1"), ("kai",),
                   ("volcano", "--members", "exact"), ("volcano", "--members", "regex")]
        applied = 0
        for spec in self.specs:
            for fmt in exports:
                with self.subTest(spec=spec, export=" ".join(fmt)):
                    applied += len(self.apply_read_back_delete(self.export(spec, *fmt), f"{spec} {fmt}"))
        self.assertGreater(applied, 5 * len(self.specs))

    def test_nfd_objects_apply_server_side(self):
        """`export --to nfd` (Node Feature Discovery's NodeFeature and NodeFeatureGroup, as
        Topograph's nfd engine writes them) is accepted by the API server with NFD's own
        CRDs, in NFD's namespace, and read back whole: the presets with NVLink domains and
        plain switch trees, and every discovered spec (the awkward spec's 70-character node
        name cannot be NFD's node-name label and is refused by the exporter, tested in
        test_k8s_crd_validation.py)."""
        specs = ["preset:gb200-nvl72?racks=4", "preset:dgx-h100?nodes=32", "preset:pcie-l40s"]
        specs += [s for s in self.specs if "discovered-" in s or s.endswith("cluster-small.yaml")]
        applied = 0
        for spec in specs:
            with self.subTest(spec=spec):
                docs = self.apply_read_back_delete(self.export(spec, "nfd"), f"{spec} nfd")
                self.assertEqual({d["metadata"]["namespace"] for d in docs}, {NFD_NAMESPACE})
                applied += len(docs)
        self.assertGreater(applied, 4 * 18 + 32 + 16)

    def test_admission_policy_refuses_what_volcano_refuses(self):
        """The ValidatingAdmissionPolicy is live: a HyperNode whose member regex has an
        unmatched parenthesis, which the CRD's schema admits, is refused with Volcano's message
        (so the accepted exports above were judged by it). (A HyperNode without members no
        longer reaches the policy: the CRD's schema has minItems 1.)"""
        bad = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
               "metadata": {"name": "unmatched"},
               "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "rack-(1"}}}]}}
        deadline = time.monotonic() + 30  # the policy's type checking runs asynchronously
        while True:
            r = self.kube.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(bad), check=False)
            if r.returncode != 0 or time.monotonic() > deadline:
                break
            self.kube.kubectl("delete", "hypernode", "unmatched", check=False)
            time.sleep(1)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("member regexMatch pattern is invalid: unmatched parentheses", r.stderr)

    def test_k8s_labels_script_against_fake_nodes(self):
        for spec in ("preset:gb200-nvl72?racks=2", os.path.join(self.tmp.name, "awkward.yaml")):
            with self.subTest(spec=spec):
                want = topology_labels(TOPOSCHED, spec)
                self.kube.add_nodes([(n, {}) for n in sorted(want)], gpus=4)
                script = self.export(spec, "k8s-labels")
                path = os.path.join(self.tmp.name, "labels.sh")
                with open(path, "w") as f:
                    f.write(script)
                env = dict(os.environ, KUBECONFIG=self.kube.kubeconfig, PATH=f"{bin_dir()}:{os.environ['PATH']}")
                r = subprocess.run(["sh", path], capture_output=True, text=True, env=env, timeout=600)
                self.assertEqual(r.returncode, 0, r.stderr)
                for node, labels in want.items():
                    got = self.kube.api.get(f"/api/v1/nodes/{node}")["metadata"]["labels"]
                    self.assertEqual({k: got.get(k) for k in labels}, labels, node)
                    # The harness gives a node its name as hostname label where a label value
                    # can hold it (63 bytes), as a kubelet does; the script leaves it alone.
                    self.assertEqual(got.get("kubernetes.io/hostname"), node if len(node) <= 63 else None)
                for node in want:
                    self.kube.api.delete(f"/api/v1/nodes/{node}")

    def test_discover_reads_nodes_as_the_api_server_serves_them(self):
        """`kubectl get nodes -o json` from the real API server (server-filled defaults,
        conditions, the status subresource as a kubelet patches it): discover takes the GPU count from
        status.capacity's nvidia.com/gpu where no GPU Feature Discovery label gives it, the
        host memory from status.capacity.memory (one type for the three alike GPU nodes, with
        the smallest memory), and skips a node without GPUs."""
        leaf = {"network.topology.nvidia.com/leaf": "leaf-1"}
        self.kube.add_nodes([("disc-a", leaf), ("disc-b", leaf)], gpus=4, memory="2113442596Ki")
        self.kube.add_nodes([("disc-c", leaf)], gpus=4, memory="1056721298Ki")
        self.kube.add_nodes([("disc-cpu", {})], gpus=0, memory="512Gi")
        try:
            listed = self.kube.kubectl("get", "nodes", "-o", "json").stdout
            path = os.path.join(self.tmp.name, "nodes.json")
            with open(path, "w") as f:
                f.write(listed)
            # The API server's own shape, not a hand-written one: it fills defaults such as
            # status.nodeInfo and daemonEndpoints, and kubectl lists the Nodes as a List.
            self.assertIn('"nodeInfo"', listed)
            self.assertIn('"resourceVersion"', listed)
            r = crdv.toposched("discover", "--k8s-nodes", path, "--format", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("disc-cpu", r.stderr)  # skipped, named in a warning
            spec = json.loads(r.stdout)
            types = {t["name"]: t for t in spec["node_types"]}
            by_node = {}
            for group in spec["nodes"]:
                for name in group["names"].split(","):  # letters, not numbers: no [a-b] ranges
                    by_node[name] = types[group["type"]]
            self.assertEqual({n: (t["gpu"]["count"], t["host_memory_gb"]) for n, t in by_node.items()
                              if n.startswith("disc-")},
                             {"disc-a": (4, 1082), "disc-b": (4, 1082), "disc-c": (4, 1082)})
        finally:
            for node in ("disc-a", "disc-b", "disc-c", "disc-cpu"):
                self.kube.api.delete(f"/api/v1/nodes/{node}")

    def test_node_names_refused_by_both(self):
        spec = os.path.join(self.tmp.name, "bad-names.yaml")
        with open(spec, "w") as f:
            f.write(crdv.BAD_NODE_NAMES_SPEC)
        r = crdv.toposched("export", "--cluster", spec, "--to", "k8s-labels")
        self.assertEqual(r.returncode, 1)
        self.assertIn("'GPU-A01' is not a valid Kubernetes node name", r.stderr)
        status, out = self.kube.api.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "GPU-A01"}})
        self.assertEqual(status, 422, out)
        self.assertIn("RFC 1123 subdomain", out["message"])

    def test_deploy_manifests_apply_server_side(self):
        deploy = os.path.join(SOURCE_DIR, "deploy", "kubernetes")
        self.assertEqual(sorted(DEPLOY_ORDER), sorted(f for f in os.listdir(deploy) if f.endswith(".yaml")))
        for name in DEPLOY_ORDER:
            with open(os.path.join(deploy, name)) as f:
                self.apply_and_read_back(f.read(), name)
        # toposched's service account may do what the extender and the lifecycle controller
        # need, and not more (it may not delete nodes).
        # Asked as SubjectAccessReviews (what `kubectl auth can-i` sends), so that a resource
        # whose CRD is not installed here (PodGroups) is judged by the RBAC rules alone.
        for verb, group, resource, sub, allowed in (
                ("create", "", "pods", "binding", True), ("watch", "", "pods", "", True),
                ("watch", "", "nodes", "", True), ("list", "scheduling.x-k8s.io", "podgroups", "", True),
                ("list", "scheduling.volcano.sh", "podgroups", "", True), ("delete", "", "nodes", "", False)):
            review = self.kube.api.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "system:serviceaccount:toposched:toposched",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:toposched"],
                         "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                                "subresource": sub}}})
            self.assertEqual(review["status"].get("allowed", False), allowed,
                             f"{verb} {group}/{resource} {sub}: {review['status']}")


if __name__ == "__main__":
    unittest.main()
