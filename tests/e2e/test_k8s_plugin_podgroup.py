"""Kubernetes' own PodGroups through the plugin build (issue 31): kube-apiserver and
toposched-kube-scheduler v1.37.2 with the GenericWorkload feature gate on and
scheduling.k8s.io/v1beta1 served (off by default in v1.37: docs/kubernetes.md, "Versions"),
deploy/kubernetes/scheduler-plugin-config.yaml's profile (kube-scheduler's GangScheduling
plugin is in its default multiPoint with the gate), `toposched serve --k8s-extender`, 64 fake
DGX H100 nodes in 2 leaves.

PodGroups with `schedulingPolicy.gang.minCount` (3 x 8 GPUs, 4 x 8 GPUs, 2 x 4 GPUs) and one
with the basic policy (2 pods of 2 GPUs); pods join with `spec.schedulingGroup.podGroupName`
and carry no other group key. Every pod is bound; each gang is one toposched job
`k8s:ml:<PodGroup>` with the group's GPUs, every member on its rank block's node with the
toposched.io annotations, the group in one leaf; the basic group's pods are jobs of their own;
no node over capacity. A gang whose minCount exceeds the cluster binds no member and holds
nothing in toposched. A gang with a member no node admits (a nodeSelector): no member bound,
and Toposched's PodGroupPostFilter releases serve's plan of it; the member recreated without
the selector, the gang is planned again and bound whole.

build/kube/toposched-kube-scheduler comes from scripts/build-kube: a machine without it fails
this test, it does not skip it.
"""

import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_k8s_kube_scheduler as extender_e2e  # noqa: E402
from k8s_harness import ControlPlane, topology_labels  # noqa: E402

NAMESPACE = extender_e2e.NAMESPACE
PREFIX = extender_e2e.PREFIX
CLUSTER = extender_e2e.CLUSTER
TOPOSCHED = extender_e2e.TOPOSCHED
PODGROUPS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups"


class NativeGroup(extender_e2e.Group):
    """A PodGroup and its pods: no group label or annotation, only spec.schedulingGroup."""

    def __init__(self, name, size, gpus, gang=True, min_count=None):
        super().__init__("native" if gang else "single", name, size, gpus)
        self.gang = gang
        self.min_count = min_count or size

    def podgroup(self):
        policy = {"gang": {"minCount": self.min_count}} if self.gang else {"basic": {}}
        return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": self.name, "namespace": NAMESPACE},
                "spec": {"schedulingPolicy": policy}}

    def pod(self, index):
        p = super().pod(index)
        p["spec"]["schedulingGroup"] = {"podGroupName": self.name}
        return p

    def job_id_of(self, index):
        return self.job_id() if self.gang else f"k8s:{NAMESPACE}:pod:{self.name}-{index}"


class PluginPodGroups(extender_e2e.KubeSchedulerEndToEnd):
    PLUGIN = True
    # The extender's mixes are test_k8s_plugin.py's; this class runs only the test below.
    test_seeded_mix_with_three_kills_of_toposched = None
    test_seeded_mix_with_node_names = None
    test_seeded_mix_with_full_node_objects = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="toposched-k8s-podgroup-")
        cls.kube = ControlPlane(feature_gates=["GenericWorkload=true"],
                                runtime_config=["scheduling.k8s.io/v1beta1=true"])
        cls.kube.start()
        cls.labels = topology_labels(TOPOSCHED, CLUSTER)
        cls.kube.add_nodes(sorted(cls.labels.items()), gpus=8)
        cls.kube.ensure_namespace(NAMESPACE)

    def test_gang_podgroups_are_planned_whole(self):
        gangs = [NativeGroup("pg-tp", 3, 8), NativeGroup("pg-big", 4, 8), NativeGroup("pg-half", 2, 4)]
        basic = NativeGroup("pg-loose", 2, 2, gang=False)
        too_big = NativeGroup("pg-huge", 70, 8)  # 70 nodes of 8 GPUs: the cluster has 64
        server = self.start_toposched("podgroups")
        self.kube.start_scheduler(f"{server.url()}{PREFIX}", True, plugin=True)
        self.addCleanup(self.delete_all_pods)
        self.addCleanup(self.kube.stop_scheduler)
        for g in gangs + [basic, too_big]:
            self.kube.api.create(PODGROUPS, g.podgroup())
        # Members interleaved, as a controller creating several jobs at once would.
        order = [(g, i) for i in range(4) for g in gangs + [basic] if i < g.size]
        for g, i in order:
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", g.pod(i))
        for i in range(too_big.size):
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", too_big.pod(i))
        pods = self.wait_bound([n for g in gangs + [basic] for n in g.pod_names()])
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        jobs = {j["job"]: j for j in json.loads(body)["jobs"]}
        self.check_capacity(pods)
        self.check_groups(gangs, pods, jobs)
        for g in gangs:
            self.assertEqual(len(jobs[g.job_id()]["gpus"]), g.size * g.gpus, g.name)
        # Planned once: kube-scheduler's pod group cycle undoes each member's Reserve before it
        # reserves them again for binding; that undo must not release serve's plan.
        with open(server.log_path) as f:
            log = f.read()
        for g in gangs:
            self.assertNotIn(f"release job={g.job_id()} ", log, f"{g.name}'s plan was released and made again")
        # The undo runs with the cycle's context already cancelled: a plugin that calls serve
        # there logs "toposched unreserve failed ... context canceled" for every member (found
        # 2026-12-06; the plan survived only because the call could not be made).
        with open(os.path.join(self.kube.dir, "kube-scheduler.log")) as f:
            self.assertNotIn("toposched unreserve failed", f.read())
        for i, name in enumerate(basic.pod_names()):
            a = pods[name]["metadata"]["annotations"]
            self.assertEqual(a["toposched.io/job"], basic.job_id_of(i), "a basic PodGroup's pod is a job of its own")
            self.assertIn(basic.job_id_of(i), jobs)
        # The gang that cannot fit: nothing bound, nothing held.
        time.sleep(3)
        bound = [p["metadata"]["name"] for p in self.kube.pods(NAMESPACE)
                 if p["metadata"]["name"] in too_big.pod_names() and p["spec"].get("nodeName")]
        self.assertEqual(bound, [], "members of the gang that cannot fit were bound")
        status, _ = server.request("GET", f"/v1/jobs/{too_big.job_id()}")
        self.assertEqual(status, 404, "toposched holds GPUs for the gang that cannot fit")

    def test_a_gang_with_an_unplaceable_member_binds_none_and_its_plan_is_released(self):
        g = NativeGroup("pg-stuck", 3, 8)
        server = self.start_toposched("stuck")
        self.kube.start_scheduler(f"{server.url()}{PREFIX}", True, plugin=True)
        self.addCleanup(self.delete_all_pods)
        self.addCleanup(self.kube.stop_scheduler)
        self.kube.api.create(PODGROUPS, g.podgroup())
        pods = [g.pod(i) for i in range(g.size)]
        pods[2]["spec"]["nodeSelector"] = {"toposched.io/no-such-node": "true"}
        for p in pods:
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", p)
        # serve plans the group at the first member's PreFilter; the third member's Filter
        # fails, the pod group cycle fails, and Toposched's PodGroupPostFilter releases the plan.
        release = f"release job={g.job_id()} "
        deadline = time.monotonic() + 60
        released = False
        while time.monotonic() < deadline and not released:
            self.assertEqual(self.bound(g.pod_names()), [], "a member of the gang was bound")
            with open(server.log_path) as f:
                released = release in f.read()
            time.sleep(0.1)
        self.assertTrue(released, "serve's plan of the failed gang was not released:\n"
                        + self.kube.log_tail("kube-scheduler", 60))
        time.sleep(2)
        self.assertEqual(self.bound(g.pod_names()), [], "a member of the gang was bound")
        # The member recreated without the selector: planned again and bound whole.
        self.kube.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{g.name}-2")
        deadline = time.monotonic() + 30
        while any(p["metadata"]["name"] == f"{g.name}-2" for p in self.kube.pods(NAMESPACE)):
            self.assertLess(time.monotonic(), deadline, "the member was not deleted")
            time.sleep(0.1)
        self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", g.pod(2))
        bound = self.wait_bound(g.pod_names())
        status, body = server.request("GET", "/v1/jobs")
        jobs = {j["job"]: j for j in json.loads(body)["jobs"]}
        self.check_capacity(bound)
        self.check_groups([g], bound, jobs)

    def bound(self, names):
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(NAMESPACE)}
        return sorted(n for n in names if n in pods and pods[n]["spec"].get("nodeName"))

    def delete_all_pods(self):
        super().delete_all_pods()
        for pg in self.kube.api.get(PODGROUPS).get("items", []):
            self.kube.api.delete(f"{PODGROUPS}/{pg['metadata']['name']}")


if __name__ == "__main__":
    unittest.main()
