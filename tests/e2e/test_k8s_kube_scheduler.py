"""The extender end to end with a real control plane (issue 30, acceptance 1, 2 and the
kill -9 part of 3):
kube-apiserver and kube-scheduler built from k8s.io/kubernetes (k8s_harness.py), 64 fake
DGX H100 nodes in 2 leaves (32 nodes each) with the labels `toposched export --to
k8s-labels` writes, and `toposched serve --k8s-extender` binding through the API server.

Real Pod objects are created through the API, interleaved by a seeded shuffle: Kueue pod
groups (some with Kueue's TAS annotations: a required leaf, a preferred leaf with multi-layer
slices, placed by kueue-bestfit), scheduler-plugins coscheduling groups, Volcano groups, KAI
groups (`pod-group-name`) and single pods (200+ pods in 30+ groups), plus one group larger
than the cluster. kube-scheduler runs
deploy/kubernetes/scheduler-config.yaml's profile, once with nodeCacheCapable: true (node
names) and once with false (full Node objects). The assertions read the pods back from the
API server:
- every pod that fits has spec.nodeName and the toposched.io/gpus|ranks|rank|job
  annotations; every group is whole, and in one leaf;
- no node holds more GPUs than it has, and no GPU index twice;
- the oversized group has no member bound, and toposched holds nothing for it;
- each job's GPUs are the ones POST /v1/jobs?dry_run=1 chooses for the same request on the
  same state (a second `toposched serve` replays the jobs in placement order: dry run,
  compare, then place), and each pod sits on the node of its rank block.

A third run kills toposched with SIGKILL three times while the pods arrive (restarted on the
same address and store): nothing answered before a kill is lost, and the end state passes the
capacity and group checks.

The binaries come from scripts/install-k8s-test-binaries (make test builds them): a machine
without them fails this test, it does not skip it.
"""

import json
import os
import random
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k8s_harness import SCHEDULER_NAME, ControlPlane, topology_labels  # noqa: E402
from proc_harness import free_ports  # noqa: E402
from serve_harness import Server  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
CLUSTER = "preset:dgx-h100?nodes=64"
PREFIX = "/toposched"
NAMESPACE = "ml"
LEAF_LABEL = "fabric.topograph.run/tier-0"
SEED = int(os.environ.get("K8S_E2E_SEED", "30"))
WAIT_S = 600


class Group:
    """One job: `size` pods of `gpus` GPUs, keyed the way `family` keys its pods."""

    def __init__(self, family, name, size, gpus, shape=None, kueue_tas=None):
        self.family, self.name, self.size, self.gpus = family, name, size, gpus
        self.shape = shape or {}
        # Kueue's TAS annotations on the pods, and the POST /v1/jobs fields they stand for.
        self.kueue_tas = kueue_tas or ({}, {})

    def job_id(self):
        return f"k8s:{NAMESPACE}:pod:{self.name}-0" if self.family == "single" else f"k8s:{NAMESPACE}:{self.name}"

    def request(self):
        """The POST /v1/jobs body the extender's plan must equal (docs/kubernetes.md)."""
        # A group: pods of `gpus` GPUs, several to a node allowed; a single pod: one node.
        per = "gpus_per_pod" if self.size > 1 else "gpus_per_node"
        body = {"job": self.job_id(), "gpus": self.size * self.gpus, per: self.gpus, "policy": "topo"}
        body.update(self.shape)
        body.update(self.kueue_tas[1])
        return body

    def pod_names(self):
        return [f"{self.name}-{i}" for i in range(self.size)]

    def pod(self, index):
        labels, annotations = {}, {}
        if self.family == "coscheduling":
            labels["scheduling.x-k8s.io/pod-group"] = self.name
            annotations["scheduling.x-k8s.io/min-member"] = str(self.size)
            labels["batch.kubernetes.io/job-completion-index"] = str(index)
        elif self.family == "kueue":
            labels["kueue.x-k8s.io/pod-group-name"] = self.name
            annotations["kueue.x-k8s.io/pod-group-total-count"] = str(self.size)
            # rank from the name's trailing ordinal (NAME-INDEX)
        elif self.family == "volcano":
            annotations["scheduling.k8s.io/group-name"] = self.name
            annotations["toposched.io/group-size"] = str(self.size)
            annotations["toposched.io/rank"] = str(index)
        elif self.family == "kai":  # KAI's pod-grouper names the PodGroup in this annotation
            annotations["pod-group-name"] = self.name
            annotations["toposched.io/group-size"] = str(self.size)
            annotations["toposched.io/rank"] = str(index)
        for k, v in self.shape.items():
            annotations[f"toposched.io/{k}"] = str(v)
        annotations.update(self.kueue_tas[0])
        resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(self.gpus)}
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{self.name}-{index}", "namespace": NAMESPACE, "labels": labels,
                         "annotations": annotations},
            "spec": {"schedulerName": SCHEDULER_NAME, "restartPolicy": "Never",
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": resources, "limits": resources}}]},
        }


def kueue_tas(i):
    """What Kueue would put on a PodSet's pods, by group: a required leaf (as Kueue's Topology
    from `export --to kueue` names it), a preferred leaf with one pod per node as multi-layer
    slices, or nothing; with kueue-bestfit, which implements them."""
    if i % 3 == 0:
        return ({"kueue.x-k8s.io/podset-required-topology": LEAF_LABEL, "toposched.io/policy": "kueue-bestfit"},
                {"required_tier": LEAF_LABEL, "policy": "kueue-bestfit"})
    if i % 3 == 1:
        constraints = json.dumps([{"topology": "kubernetes.io/hostname", "size": 1}])
        return ({"kueue.x-k8s.io/podset-preferred-topology": LEAF_LABEL,
                 "kueue.x-k8s.io/podset-slice-required-topology-constraints": constraints,
                 "toposched.io/policy": "kueue-bestfit"},
                {"preferred_tier": LEAF_LABEL, "slice_tier": "kubernetes.io/hostname", "slice_size": 1,
                 "policy": "kueue-bestfit"})
    return None


def seeded_mix(seed):
    """30+ groups and 200+ pods, about 80% of the 512 GPUs, in a seeded order; plus a group
    of 70 x 8 GPUs (560 > 512) that never fits."""
    rng = random.Random(seed)
    groups = []
    for i in range(6):  # TP8 x PP(size) training jobs, one 8-GPU pod per node
        size = rng.choice([2, 3])
        groups.append(Group("coscheduling", f"train{i}", size, 8, {"tp": 8, "pp": size}))
    for i in range(8):
        groups.append(Group("kueue", f"kq{i}", rng.choice([2, 3]), 4, kueue_tas=kueue_tas(i)))
    for i in range(8):
        groups.append(Group("volcano", f"vc{i}", rng.choice([2, 3, 4]), 2))
    for i in range(8):
        family = "kueue" if i % 2 else "coscheduling"
        groups.append(Group(family, f"one{i}", rng.choice([6, 8, 10]), 1))
    for i in range(3):
        groups.append(Group("kai", f"kai{i}", rng.choice([2, 3]), 4))
    singles = [Group("single", f"solo{i}", 1, rng.choice([1, 1, 1, 2])) for i in range(80)]
    oversized = Group("coscheduling", "huge", 70, 8, {"tp": 8, "pp": 70})
    pods = [(g, i) for g in groups + singles + [oversized] for i in range(g.size)]
    rng.shuffle(pods)
    return groups + singles, oversized, pods


class KubeSchedulerEndToEnd(unittest.TestCase):
    PLUGIN = False  # test_k8s_plugin.py: the same tests through the plugin build

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-k8s-e2e-")
        cls.kube = ControlPlane()  # raises (the test fails) when the binaries are missing
        cls.kube.start()
        cls.labels = topology_labels(TOPOSCHED, CLUSTER)
        cls.kube.add_nodes(sorted(cls.labels.items()), gpus=8)
        cls.kube.ensure_namespace(NAMESPACE)

    @classmethod
    def tearDownClass(cls):
        cls.kube.stop()
        cls.tmp.cleanup()

    def start_toposched(self, name, port=0):
        k = self.kube
        server = Server(CLUSTER, f"sqlite:{self.tmp.name}/{name}.db", self.tmp.name,
                        ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", k.url(),
                         "--k8s-token-file", k.token_file, "--k8s-ca-file", k.ca_file,
                         "--listen", f"127.0.0.1:{port}"])
        self.addCleanup(server.stop)
        return server

    def delete_all_pods(self):
        for pod in self.kube.pods(NAMESPACE):
            self.kube.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}")
        deadline = time.monotonic() + 60
        while self.kube.pods(NAMESPACE) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.kube.pods(NAMESPACE), [])

    def wait_bound(self, names):
        pods, unbound = self.kube.wait_bound(NAMESPACE, names, WAIT_S)
        if unbound:
            self.fail(f"{len(unbound)} pods not bound after {WAIT_S} s, e.g. {unbound[:5]}:\n"
                      + self.kube.log_tail("kube-scheduler"))
        return pods

    def run_mix(self, node_cache_capable):
        groups, oversized, order = seeded_mix(SEED)
        self.assertGreaterEqual(len(order) - oversized.size, 200)
        self.assertGreaterEqual(sum(1 for g in groups if g.family != "single"), 30)
        server = self.start_toposched(f"mode-{node_cache_capable}")
        self.kube.start_scheduler(f"{server.url()}{PREFIX}", node_cache_capable, plugin=self.PLUGIN)
        self.addCleanup(self.delete_all_pods)
        self.addCleanup(self.kube.stop_scheduler)
        for group, index in order:
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", group.pod(index))
        pods = self.wait_bound([n for g in groups for n in g.pod_names()])
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        jobs = json.loads(body)["jobs"]
        self.check_capacity(pods)
        self.check_groups(groups, pods, {j["job"]: j for j in jobs})
        self.check_oversized(oversized, server)
        self.check_same_choice_as_the_api(groups, jobs)

    def check_capacity(self, pods):
        per_node = {}
        for p in pods.values():
            node = p["spec"].get("nodeName")
            if node:
                gpus = p["metadata"]["annotations"]["toposched.io/gpus"].split(",")
                requested = int(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
                self.assertEqual(len(gpus), requested, p["metadata"]["name"])
                per_node.setdefault(node, []).extend(int(g) for g in gpus)
        over = {n: g for n, g in per_node.items() if len(g) > 8 or len(set(g)) != len(g)}
        self.assertEqual(over, {}, "nodes over capacity or with a GPU given twice")

    def check_groups(self, groups, pods, jobs):
        for g in groups:
            job = jobs.get(g.job_id())
            self.assertIsNotNone(job, f"{g.job_id()} not held by toposched")
            by_rank = {x["rank"]: x for x in job["gpus"]}
            leaves = set()
            for i, name in enumerate(g.pod_names()):
                p = pods[name]
                a = p["metadata"]["annotations"]
                node = p["spec"]["nodeName"]
                block = [by_rank[r] for r in range(i * g.gpus, (i + 1) * g.gpus)]
                self.assertEqual({x["node"] for x in block}, {node}, f"{name}: not on its rank block's node")
                self.assertEqual(a["toposched.io/job"], g.job_id())
                self.assertEqual(a["toposched.io/rank"], str(i))
                self.assertEqual(a["toposched.io/gpus"], ",".join(str(x["gpu"]) for x in block), name)
                self.assertEqual(a["toposched.io/ranks"], ",".join(str(x["rank"]) for x in block), name)
                leaves.add(self.labels[node][LEAF_LABEL])
            self.assertEqual(len(leaves), 1, f"{g.name} spans leaves {sorted(leaves)}")

    def check_oversized(self, oversized, server):
        # Long enough for kube-scheduler to have retried the group (its back-off starts at 1 s).
        time.sleep(3)
        bound = [p["metadata"]["name"] for p in self.kube.pods(NAMESPACE)
                 if p["metadata"]["name"] in oversized.pod_names() and p["spec"].get("nodeName")]
        self.assertEqual(bound, [], "members of the oversized group were bound")
        status, _ = server.request("GET", f"/v1/jobs/{oversized.job_id()}")
        self.assertEqual(status, 404)

    def check_same_choice_as_the_api(self, groups, jobs):
        requests = {g.job_id(): g.request() for g in groups}
        # A store of its own: the default ./toposched-state.db would carry one mode's jobs into the next.
        replay_store = f"sqlite:{self.tmp.name}/replay-{time.monotonic_ns()}.db"
        with Server(CLUSTER, replay_store, self.tmp.name) as replay:
            for job in jobs:
                body = requests[job["job"]]
                status, out = replay.request("POST", "/v1/jobs?dry_run=1", body)
                self.assertEqual(status, 200, out)
                planned = [(x["rank"], x["node"], x["gpu"]) for x in json.loads(out)["gpus"]]
                held = [(x["rank"], x["node"], x["gpu"]) for x in job["gpus"]]
                self.assertEqual(held, planned, f"{job['job']}: the extender and dry_run chose differently")
                status, out = replay.request("POST", "/v1/jobs", body)
                self.assertEqual(status, 201, out)

    def held_jobs(self, server):
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        return {j["job"]: [(x["rank"], x["node"], x["gpu"]) for x in j["gpus"]] for j in json.loads(body)["jobs"]}

    def test_seeded_mix_with_three_kills_of_toposched(self):
        """Issue 30, acceptance 3: toposched is killed with SIGKILL three times while the
        pods arrive and restarted on the same address and store. Afterwards every bound pod's
        job is held with the GPUs its annotations name (nothing acknowledged lost), no node is
        over capacity and no GPU is given twice (read from the API server and GET /v1/jobs)."""
        groups, oversized, order = seeded_mix(SEED + 1)
        port = free_ports(1)[0]
        server = self.start_toposched("kills", port)
        self.kube.start_scheduler(f"http://127.0.0.1:{port}{PREFIX}", True, plugin=self.PLUGIN)
        self.addCleanup(self.delete_all_pods)
        self.addCleanup(self.kube.stop_scheduler)
        kills_at = {len(order) * k // 4 for k in (1, 2, 3)}
        for n, (group, index) in enumerate(order):
            if n in kills_at:
                # No pause: kube-scheduler is working through the pods created so far, so the
                # kill lands between (or inside) its extender calls.
                before = self.held_jobs(server)
                server.kill9()
                server = self.start_toposched("kills", port)
                after = self.held_jobs(server)
                lost = {j: g for j, g in before.items() if after.get(j) != g}
                self.assertEqual(lost, {}, f"kill at pod {n}: jobs answered before the kill lost or changed")
                print(f"kill -9 at pod {n} of {len(order)}: {len(before)} jobs held before, {len(after)} after "
                      f"the restart", file=sys.stderr)
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", group.pod(index))
        pods = self.wait_bound([n for g in groups for n in g.pod_names()])
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        jobs = {j["job"]: j for j in json.loads(body)["jobs"]}
        self.check_capacity(pods)
        self.check_groups(groups, pods, jobs)
        held = {(x["node"], x["gpu"]) for j in jobs.values() for x in j["gpus"]}
        self.assertEqual(sum(len(j["gpus"]) for j in jobs.values()), len(held), "a GPU held by two jobs")
        self.check_oversized(oversized, server)

    def test_seeded_mix_with_node_names(self):
        self.run_mix(node_cache_capable=True)

    def test_seeded_mix_with_full_node_objects(self):
        self.run_mix(node_cache_capable=False)


if __name__ == "__main__":
    unittest.main()
