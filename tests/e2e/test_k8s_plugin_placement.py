"""Toposched as KEP-5732's placement generator, on the control plane (issue 31; docs/kubernetes.md,
"Topology-aware workload scheduling"): kube-apiserver and toposched-kube-scheduler v1.37.2
with the GenericWorkload and TopologyAwareWorkloadScheduling gates on, scheduling.k8s.io/v1beta1
served, deploy/kubernetes/scheduler-plugin-config.yaml's profile with Toposched in place of
TopologyPlacementGenerator at placementGenerate, `toposched serve --k8s-extender`, 36 fake
GB200 trays in 2 NVL72 racks (`preset:gb200-nvl72?racks=2`).

Four single pods pinned to trays of rack 1 leave it 14 free trays. A PodGroup gang of 16 x 4
GPUs (tp 8, pp 2, dp 4) constrained to one NVLink domain (the node label
accelerator.topograph.run/domain, which serve has no tier for) is bound whole in rack 2, the
one domain where it fits, as Toposched's generator chose it (kube-scheduler's log); then a
gang of 12 x 4 GPUs with the same key fits only in rack 1 and is bound there. Each gang is one
toposched job holding all its GPUs, every member on the node of its rank block. Without the
generator the key reaches serve as a level and is refused: no member would be bound.

Then, with rack 2 holding four busy trays, a gang of 8 trays that predicts the same step in
either rack goes to rack 2, the tighter fit, and a gang of 18 trays finds rack 1 whole (name
order would have put the first gang in rack 1 and left the second nowhere).

build/kube/toposched-kube-scheduler comes from scripts/build-kube: a machine without it fails
this test, it does not skip it.
"""

import json
import os
import sys
import tempfile
import time
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_harness  # noqa: E402
from k8s_harness import ControlPlane, topology_labels  # noqa: E402
from serve_harness import Server  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
CLUSTER = "preset:gb200-nvl72?racks=2"
NAMESPACE = "place"
PREFIX = "/toposched"
DOMAIN = "accelerator.topograph.run/domain"
PODGROUPS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups"
WAIT_S = 120


def pod(name, gpus, annotations=None, node_selector=None, group=None):
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations or {}},
         "spec": {"schedulerName": k8s_harness.SCHEDULER_NAME, "restartPolicy": "Never",
                  "terminationGracePeriodSeconds": 0,
                  "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                  "resources": {"requests": resources, "limits": resources}}]}}
    if node_selector:
        p["spec"]["nodeSelector"] = node_selector
    if group:
        p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


def gang(name, size, key):
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}},
                     "schedulingConstraints": {"topology": [{"key": key}]}}}


class PlacementGenerator(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-k8s-placement-")
        cls.kube = ControlPlane(feature_gates=["GenericWorkload=true", "TopologyAwareWorkloadScheduling=true"],
                                runtime_config=["scheduling.k8s.io/v1beta1=true"])
        cls.kube.start()
        cls.labels = topology_labels(TOPOSCHED, CLUSTER)
        cls.kube.add_nodes(sorted(cls.labels.items()), gpus=4)
        cls.kube.ensure_namespace(NAMESPACE)

    @classmethod
    def tearDownClass(cls):
        cls.kube.stop()
        cls.tmp.cleanup()

    def start_scheduler_with_generator(self, serve_url):
        original = k8s_harness.plugin_scheduler_config

        def with_generator(url, kubeconfig, wait=None):
            cfg = original(url, kubeconfig, wait)
            for profile in cfg["profiles"]:
                profile["plugins"]["placementGenerate"] = {"disabled": [{"name": "TopologyPlacementGenerator"}],
                                                           "enabled": [{"name": "Toposched"}]}
            return cfg

        k8s_harness.plugin_scheduler_config = with_generator
        try:
            self.kube.start_scheduler(serve_url, True, plugin=True)
        finally:
            k8s_harness.plugin_scheduler_config = original
        with open(os.path.join(self.kube.dir, "scheduler-config.yaml")) as f:
            plugins = yaml.safe_load(f)["profiles"][0]["plugins"]
        self.assertEqual(plugins["placementGenerate"]["enabled"], [{"name": "Toposched"}])

    def wait_bound(self, names):
        pods, unbound = self.kube.wait_bound(NAMESPACE, names, WAIT_S)
        if unbound:
            self.fail(f"{len(unbound)} pods not bound after {WAIT_S} s, e.g. {unbound[:5]}:\n"
                      + self.kube.log_tail("kube-scheduler", 40))
        return pods

    def check_gang(self, name, size, rack, pods, jobs):
        """Bound whole in `rack`'s NVLink domain, one job with all its GPUs, ranks in order."""
        job = jobs.get(f"k8s:{NAMESPACE}:{name}")
        self.assertIsNotNone(job, f"{name}: no job in serve; jobs {sorted(jobs)}")
        self.assertEqual(len(job["gpus"]), size * 4, name)
        by_rank = {g["rank"]: g["node"] for g in job["gpus"]}
        for i in range(size):
            p = pods[f"{name}-{i}"]
            node = p["spec"]["nodeName"]
            self.assertEqual(self.labels[node][DOMAIN], rack, f"{name}-{i} on {node}")
            a = p["metadata"]["annotations"]
            self.assertEqual(a["toposched.io/job"], f"k8s:{NAMESPACE}:{name}")
            ranks = [int(r) for r in a["toposched.io/ranks"].split(",")]
            self.assertEqual({by_rank[r] for r in ranks}, {node}, f"{name}-{i}: its ranks are on another node")

    def start(self, db):
        """A fresh serve (its own database) and the plugin build with the generator; the
        namespace's pods are deleted after the test (they would hold GPUs in the next)."""
        self.addCleanup(self.delete_pods)
        server = Server(CLUSTER, f"sqlite:{self.tmp.name}/{db}", self.tmp.name,
                        ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", self.kube.url(),
                         "--k8s-token-file", self.kube.token_file, "--k8s-ca-file", self.kube.ca_file])
        self.addCleanup(server.stop)
        self.start_scheduler_with_generator(f"{server.url()}{PREFIX}")
        self.addCleanup(self.kube.stop_scheduler)
        return server

    def delete_pods(self):
        self.kube.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods")
        deadline = time.monotonic() + WAIT_S
        while self.kube.pods(NAMESPACE) and time.monotonic() < deadline:
            time.sleep(0.5)

    def create_gang(self, name, size, annotations):
        self.kube.api.create(PODGROUPS, gang(name, size, DOMAIN))
        for i in range(size):
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod(f"{name}-{i}", 4, annotations, group=name))
        return [f"{name}-{i}" for i in range(size)]

    def test_domain_constrained_gangs_go_where_they_fit(self):
        server = self.start("place.db")
        singles = [f"single-{i}" for i in range(4)]
        for i, name in enumerate(singles):
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                 pod(name, 4, node_selector={"kubernetes.io/hostname": f"gb200-r01-n{i + 1:02d}"}))
        self.wait_bound(singles)
        shape = {"toposched.io/tp": "8", "toposched.io/pp": "2", "toposched.io/dp": "4"}
        self.kube.api.create(PODGROUPS, gang("big", 16, DOMAIN))
        for i in range(16):
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod(f"big-{i}", 4, shape, group="big"))
        pods = self.wait_bound([f"big-{i}" for i in range(16)])
        self.kube.api.create(PODGROUPS, gang("small", 12, DOMAIN))
        for i in range(12):
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                 pod(f"small-{i}", 4, {"toposched.io/tp": "4", "toposched.io/dp": "12"}, group="small"))
        pods = self.wait_bound([f"small-{i}" for i in range(12)])
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(NAMESPACE)}
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        jobs = {j["job"]: j for j in json.loads(body)["jobs"]}
        self.check_gang("big", 16, "nvl72-r02", pods, jobs)
        self.check_gang("small", 12, "nvl72-r01", pods, jobs)
        with open(os.path.join(self.kube.dir, "kube-scheduler.log"), errors="replace") as f:
            log = f.read()
        for name, rack in (("big", "nvl72-r02"), ("small", "nvl72-r01")):
            self.assertRegex(log, f'toposched chose the pod group\'s placement".*podGroup="{name}" '
                                  f'placement="{rack}"', f"{name}: not placed through Toposched's generator")
        # No node over its 4 GPUs (every pod here takes a whole tray).
        per_node = {}
        for p in pods.values():
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
        self.assertEqual([n for n, c in per_node.items() if c > 1], [])

    def test_a_tie_goes_to_the_fuller_rack_and_keeps_the_other_whole(self):
        """Four trays of rack 2 taken: a gang of 8 trays (tp 8, dp 4) predicts the same step in
        either rack and goes to rack 2, the tighter fit (name order would give rack 1), so a
        later gang of 18 trays finds rack 1 whole. Placement-compare's GB200 queue found it:
        a 16-GPU gang in the emptier rack left a later 32-GPU gang split over two."""
        server = self.start("tie.db")
        singles = [f"busy-{i}" for i in range(4)]
        for i, name in enumerate(singles):
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                 pod(name, 4, node_selector={"kubernetes.io/hostname": f"gb200-r02-n{i + 1:02d}"}))
        self.wait_bound(singles)
        self.wait_bound(self.create_gang("eight", 8, {"toposched.io/tp": "8", "toposched.io/dp": "4"}))
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(NAMESPACE)}
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        self.check_gang("eight", 8, "nvl72-r02", pods, {j["job"]: j for j in json.loads(body)["jobs"]})
        self.wait_bound(self.create_gang("rack", 18, {"toposched.io/tp": "8", "toposched.io/dp": "9"}))
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(NAMESPACE)}
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        self.check_gang("rack", 18, "nvl72-r01", pods, {j["job"]: j for j in json.loads(body)["jobs"]})
        with open(os.path.join(self.kube.dir, "kube-scheduler.log"), errors="replace") as f:
            log = f.read()
        self.assertRegex(log, 'toposched chose the pod group\'s placement".*podGroup="eight" placement="nvl72-r02"')


if __name__ == "__main__":
    unittest.main()
