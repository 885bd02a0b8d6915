"""toposched-k8s-lifecycle with a real control plane (issue 30, acceptance 3, first part): a
job's GPUs are released when all its pods are deleted or have finished, and the next group
then fits where it did not before.

A 4-node DGX H100 cluster (32 GPUs) behind real kube-apiserver + kube-scheduler
(k8s_harness.py), `toposched serve --k8s-extender` and the controller built from kube/
(build/kube/toposched-k8s-lifecycle, `make test` builds it). Group A (4 x 8 GPUs) fills the
cluster; group B (2 x 8 GPUs) stays Pending. Deleting A's pods releases A in toposched and B
is bound; then group C (3 x 8 GPUs) does not fit beside B until B's pods finish (phase Succeeded
through the status subresource, as a kubelet would report it). Deleting only some members of a job releases nothing.
And: a cordoned node and a NotReady one (its condition and the not-ready taint, set as the
kubelet and the node lifecycle controller would) get no new pods, a group that only fits with
them waits whole, and each takes pods again once healed.

And: preemption through kube-scheduler's own path (DefaultPreemption, then the extender's
`preempt` verb, deploy/kubernetes/scheduler-config.yaml): a high-priority pod on a cluster
full of low-priority ones evicts one victim; a stand-in for the kubelet finishes the graceful
deletion (no kubelet runs here); the controller releases the victim's job and the preemptor is
bound through the extender on the victim's node. A high-priority group of 2 x 8 GPUs is bound
whole on the nodes its victims freed.

And: a pod bound by someone else (spec.nodeName set by its creator, no toposched annotations)
has its GPUs held in serve as job k8s-external:NS:NAME until it is deleted, so serve's own
placements (POST /v1/jobs) avoid them.

And: serve's own view follows the nodes (docs/service.md "Node availability"): a cordoned node,
then a NotReady one, shows unavailable in GET /v1/nodes within 2 s, and `POST /v1/jobs?dry_run=1`
for a job that needs every node is refused; healed, the node is available again within 2 s and
the job fits. A deleted node is marked "deleted".

And: pods deleted while the controller is down (killed with SIGKILL) are never seen as
events; the controller started again releases their job after its --orphan-grace, and a job
with a live pod stays.

The release latency (pod deletion to the job gone from GET /v1/jobs) is printed, not
asserted (tests never assert on wall-clock time); docs/kubernetes.md records it.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k8s_harness import SCHEDULER_NAME, SOURCE_DIR, ControlPlane, topology_labels  # noqa: E402
from proc_harness import die_with_parent, log_tail, stop_processes  # noqa: E402
from serve_harness import Server  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
LIFECYCLE = os.environ.get("TOPOSCHED_K8S_LIFECYCLE",
                           os.path.join(SOURCE_DIR, "build", "kube", "toposched-k8s-lifecycle"))
CLUSTER = "preset:dgx-h100?nodes=4"
PREFIX = "/toposched"
NS = "ml"
WAIT_S = 120


def group_pods(name, size, gpus=8):
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    return [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-{i}", "namespace": NS,
                     "labels": {"scheduling.x-k8s.io/pod-group": name},
                     "annotations": {"scheduling.x-k8s.io/min-member": str(size)}},
        "spec": {"schedulerName": SCHEDULER_NAME, "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": resources, "limits": resources}}]},
    } for i in range(size)]


class Lifecycle(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.access(LIFECYCLE, os.X_OK),
                        f"{LIFECYCLE} not built: run make test (or `make kube`), which builds kube/")
        self.tmp = tempfile.TemporaryDirectory(prefix="toposched-k8s-life-")
        self.addCleanup(self.tmp.cleanup)
        self.kube = ControlPlane()
        self.kube.start()
        self.addCleanup(self.kube.stop)
        self.kube.add_nodes(sorted(topology_labels(TOPOSCHED, CLUSTER).items()), gpus=8)
        self.kube.ensure_namespace(NS)
        k = self.kube
        self.serve = Server(CLUSTER, f"sqlite:{self.tmp.name}/state.db", self.tmp.name,
                            ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", k.url(),
                             "--k8s-token-file", k.token_file, "--k8s-ca-file", k.ca_file])
        self.addCleanup(self.serve.stop)
        self.kube.start_scheduler(f"{self.serve.url()}{PREFIX}", True)
        self.controller_log_path = os.path.join(self.tmp.name, "lifecycle.log")
        self.start_controller()

    def start_controller(self, *flags):
        log = open(self.controller_log_path, "ab")
        self.addCleanup(log.close)
        self.controller = subprocess.Popen(
            [LIFECYCLE, "--kubeconfig", self.kube.kubeconfig, "--toposched", self.serve.url(), "--v=2", *flags],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        self.addCleanup(stop_processes, [self.controller])

    def jobs(self):
        status, body = self.serve.request("GET", "/v1/jobs")
        self.assertEqual(status, 200, body)
        return {j["job"] for j in json.loads(body)["jobs"]}

    def create(self, pods):
        for p in pods:
            self.kube.api.create(f"/api/v1/namespaces/{NS}/pods", p)

    def wait_bound(self, pods):
        names = [p["metadata"]["name"] for p in pods]
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            got = {p["metadata"]["name"]: p for p in self.kube.pods(NS)}
            if all(got[n]["spec"].get("nodeName") for n in names):
                return
            time.sleep(0.2)
        self.fail(f"{names} not bound within {WAIT_S} s:\n{self.kube.log_tail('kube-scheduler')}\n"
                  + log_tail(self.controller_log_path, 20))

    def wait_released(self, job, what):
        start = time.monotonic()
        while job in self.jobs():
            if time.monotonic() - start > WAIT_S:
                self.fail(f"{job} still held {WAIT_S} s after {what}:\n" + log_tail(self.controller_log_path, 30))
            time.sleep(0.02)
        latency = time.monotonic() - start
        print(f"{job} released {latency:.3f} s after {what}", file=sys.stderr)
        return latency

    def unbound(self, pods):
        names = {p["metadata"]["name"] for p in pods}
        return [p for p in self.kube.pods(NS) if p["metadata"]["name"] in names and not p["spec"].get("nodeName")]

    def test_deleted_or_finished_jobs_free_their_gpus(self):
        a, b, c = group_pods("a", 4), group_pods("b", 2), group_pods("c", 3)
        self.create(a)
        self.wait_bound(a)
        self.create(b)
        time.sleep(3)  # kube-scheduler tries B (and backs off): the cluster is full
        self.assertEqual(len(self.unbound(b)), 2)
        self.assertNotIn("k8s:ml:b", self.jobs())

        # Deleting some of A's members releases nothing.
        self.kube.api.delete(f"/api/v1/namespaces/{NS}/pods/a-0")
        time.sleep(2)
        self.assertIn("k8s:ml:a", self.jobs())
        for p in a[1:]:
            self.kube.api.delete(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}")
        self.wait_released("k8s:ml:a", "the deletion of its last pod")
        self.wait_bound(b)
        self.assertIn("k8s:ml:b", self.jobs())

        # C (3 nodes) does not fit beside B (2 of the 4 nodes); B finishes (the phase a kubelet
        # would report) and C fits.
        self.create(c)
        time.sleep(3)
        self.assertEqual(len(self.unbound(c)), 3)
        for p in b:
            self.kube.api.ok("PATCH", f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}/status",
                             {"status": {"phase": "Succeeded"}}, "application/merge-patch+json")
        self.wait_released("k8s:ml:b", "its last pod Succeeded")
        self.wait_bound(c)
        self.assertEqual(self.jobs(), {"k8s:ml:c"})
        self.assertIsNone(self.controller.poll(), log_tail(self.controller_log_path, 30))


    def single_pod(self, name, gpus, priority_class):
        pod = group_pods(name, 1, gpus)[0]
        pod["metadata"] = {"name": name, "namespace": NS}
        pod["spec"]["priorityClassName"] = priority_class
        return pod

    def finish_graceful_deletions(self, stop):
        """What a kubelet does after a graceful delete: confirms it (grace 0)."""
        while not stop.is_set():
            for p in self.kube.pods(NS):
                if p["metadata"].get("deletionTimestamp"):
                    self.kube.api.delete(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}")
            stop.wait(0.2)

    def fill_with_low_priority_pods(self):
        """PriorityClasses low and high; 4 low 8-GPU single pods fill the 4 nodes; a kubelet
        stand-in confirms graceful deletions from now on. Returns {low pod: its node}."""
        for name, value in (("low", 100), ("high", 1000)):
            self.kube.api.create("/apis/scheduling.k8s.io/v1/priorityclasses", {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value})
        low = [self.single_pod(f"low-{i}", 8, "low") for i in range(4)]
        self.create(low)
        self.wait_bound(low)
        stop = threading.Event()
        kubelet = threading.Thread(target=self.finish_graceful_deletions, args=(stop,), daemon=True)
        kubelet.start()
        self.addCleanup(kubelet.join, 10)
        self.addCleanup(stop.set)
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in self.kube.pods(NS)}

    def test_preemption_through_kube_scheduler(self):
        node_of_low = self.fill_with_low_priority_pods()
        self.assertEqual(self.jobs(), {f"k8s:ml:pod:low-{i}" for i in range(4)})
        urgent = self.single_pod("urgent", 8, "high")
        self.create([urgent])
        self.wait_bound([urgent])
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(NS)}
        gone = sorted(set(node_of_low) - set(pods))
        self.assertEqual(len(gone), 1, f"victims: {gone}")
        node = pods["urgent"]["spec"]["nodeName"]
        self.assertEqual(node, node_of_low[gone[0]], "the preemptor is not on its victim's node")
        self.assertEqual(pods["urgent"]["metadata"]["annotations"].get("toposched.io/job"), "k8s:ml:pod:urgent")
        self.assertEqual(len(pods["urgent"]["metadata"]["annotations"]["toposched.io/gpus"].split(",")), 8)
        want = {f"k8s:ml:pod:{n}" for n in node_of_low if n not in gone} | {"k8s:ml:pod:urgent"}
        self.assertEqual(self.jobs(), want)
        status, body = self.serve.request("GET", "/v1/jobs/k8s:ml:pod:urgent")
        self.assertEqual(status, 200, body)
        self.assertEqual({g["node"] for g in json.loads(body)["gpus"]}, {node})

    def test_group_preemptor_through_kube_scheduler(self):
        """A high-priority group of 2 x 8 GPUs on 4 nodes full of low-priority pods is bound
        whole, on the 2 nodes its 2 victims freed, each with a toposched rank block.
        kube-scheduler preempts for one member at a time and keeps a node nominated for one
        member out of the other's offer: the extender answers one node of one placement per
        member and plans the group with the siblings' nominated nodes (before, 3 pods went,
        or the group waited for kube-scheduler's 5-minute flush)."""
        node_of_low = self.fill_with_low_priority_pods()
        group = group_pods("g", 2)
        for p in group:
            p["spec"]["priorityClassName"] = "high"
        self.create(group)
        self.wait_bound(group)
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(NS)}
        nodes = {pods[f"g-{i}"]["spec"]["nodeName"] for i in range(2)}
        self.assertEqual(len(nodes), 2)
        survivors = [n for n in pods if n.startswith("low-")]
        self.assertFalse(nodes & {pods[n]["spec"]["nodeName"] for n in survivors}, "a node holds two jobs' 8 GPUs")
        self.assertEqual(self.jobs(), {"k8s:ml:g"} | {f"k8s:ml:pod:{n}" for n in survivors})
        ranks = sorted(pods[f"g-{i}"]["metadata"]["annotations"]["toposched.io/rank"] for i in range(2))
        self.assertEqual(ranks, ["0", "1"])
        self.assertEqual(len(survivors), 2, f"victims: {sorted(set(node_of_low) - set(survivors))}")
        self.assertEqual(nodes, {node_of_low[n] for n in node_of_low if n not in survivors})

    def test_pods_deleted_while_the_controller_is_down(self):
        a, b = group_pods("a", 2), group_pods("b", 2)
        self.create(a + b)
        self.wait_bound(a + b)
        self.assertEqual(self.jobs(), {"k8s:ml:a", "k8s:ml:b"})
        stop_processes([self.controller], signal.SIGKILL)
        for p in a:
            self.kube.api.delete(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}")
        time.sleep(2)
        self.assertIn("k8s:ml:a", self.jobs(), "released with no controller running?")
        self.start_controller("--orphan-grace=3s")
        self.wait_released("k8s:ml:a", "the controller's restart (orphan grace 3 s)")
        time.sleep(4)  # more than the grace: B has live pods and stays
        self.assertEqual(self.jobs(), {"k8s:ml:b"})
        self.assertIsNone(self.controller.poll(), log_tail(self.controller_log_path, 30))

    def node_of(self, pods):
        got = {p["metadata"]["name"]: p for p in self.kube.pods(NS)}
        return {got[p["metadata"]["name"]]["spec"].get("nodeName") for p in pods}

    def set_schedulable(self, node, on):
        self.kube.api.ok("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": not on}},
                         "application/merge-patch+json")

    def set_ready(self, node, ready):
        # What the kubelet (the Ready condition) and the node lifecycle controller (the
        # not-ready NoSchedule taint, which kube-scheduler filters on) would do; the test
        # control plane runs neither.
        self.kube.set_node_status(node, {"nvidia.com/gpu": "8", "cpu": "224", "memory": "2Ti", "pods": "110"},
                                  ready=ready)
        taints = [] if ready else [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
        self.kube.api.ok("PATCH", f"/api/v1/nodes/{node}", {"spec": {"taints": taints}},
                         "application/merge-patch+json")

    def test_cordoned_and_not_ready_nodes_get_no_new_pods_until_healed(self):
        nodes = sorted(topology_labels(TOPOSCHED, CLUSTER))
        cordoned, sick = nodes[0], nodes[1]
        self.set_schedulable(cordoned, False)
        a = group_pods("a", 3)
        self.create(a)
        self.wait_bound(a)
        self.assertNotIn(cordoned, self.node_of(a))

        # With a NotReady node too only two nodes take pods: a group of three waits whole.
        self.set_ready(sick, False)
        for p in a:
            self.kube.api.delete(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}")
        self.wait_released("k8s:ml:a", "the deletion of its pods")
        b = group_pods("b", 3)
        self.create(b)
        time.sleep(3)  # kube-scheduler tries B and backs off
        self.assertEqual(len(self.unbound(b)), 3, "a member of B was bound: a partial group")
        self.assertNotIn("k8s:ml:b", self.jobs())

        # Uncordoned, the first node takes pods again: B fits beside the NotReady node.
        self.set_schedulable(cordoned, True)
        self.wait_bound(b)
        self.assertNotIn(sick, self.node_of(b))
        self.assertIn(cordoned, self.node_of(b))

        # Healed, the NotReady node takes the next pod.
        self.set_ready(sick, True)
        c = group_pods("c", 1)
        self.create(c)
        self.wait_bound(c)
        self.assertEqual(self.node_of(c), {sick})
        self.assertEqual(self.jobs(), {"k8s:ml:b", "k8s:ml:c"})

    def dry_run(self, gpus):
        """POST /v1/jobs?dry_run=1 for `gpus` GPUs: (status, the set of nodes of its GPUs or None)."""
        status, body = self.serve.request("POST", "/v1/jobs?dry_run=1", json.dumps({"gpus": gpus, "policy": "first-fit"}))
        return status, ({g["node"] for g in json.loads(body)["gpus"]} if status == 200 else None)

    def test_gpus_of_pods_placed_by_someone_else_count_as_busy(self):
        # A pod bound by its creator (spec.nodeName set: no scheduler, so no toposched
        # annotations), as another scheduler or a pre-existing workload would be.
        node = sorted(topology_labels(TOPOSCHED, CLUSTER))[1]
        resources = {"nvidia.com/gpu": "8"}
        outside = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "outside", "namespace": NS},
                   "spec": {"nodeName": node, "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                            "resources": {"requests": resources, "limits": resources}}]}}
        self.assertEqual(self.dry_run(32)[0], 200, "32 GPUs should be free before the pod")
        self.create([outside])
        start = time.monotonic()
        while "k8s-external:ml:outside" not in self.jobs():
            if time.monotonic() - start > WAIT_S:
                self.fail("the outside pod's GPUs were never held:\n" + log_tail(self.controller_log_path, 30))
            time.sleep(0.02)
        print(f"outside pod held {time.monotonic() - start:.3f} s after its creation", file=sys.stderr)
        status, body = self.serve.request("GET", "/v1/jobs/k8s-external:ml:outside")
        self.assertEqual(status, 200, body)
        self.assertEqual({g["node"] for g in json.loads(body)["gpus"]}, {node})
        # serve no longer hands out that node's GPUs: 32 do not fit, 24 go elsewhere.
        self.assertEqual(self.dry_run(32)[0], 422)
        status, nodes = self.dry_run(24)
        self.assertEqual(status, 200)
        self.assertNotIn(node, nodes)
        # Gone, its GPUs are free again.
        self.kube.api.delete(f"/api/v1/namespaces/{NS}/pods/outside")
        self.wait_released("k8s-external:ml:outside", "the outside pod's deletion")
        self.assertEqual(self.dry_run(32)[0], 200)
        self.assertIsNone(self.controller.poll(), log_tail(self.controller_log_path, 30))

    def serve_node(self, node):
        status, body = self.serve.request("GET", f"/v1/nodes/{node}")
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def wait_node(self, node, available, what):
        """Waits (at most 2 s, issue 30 acceptance 3) until serve shows the node (un)available."""
        start = time.monotonic()
        while self.serve_node(node)["available"] != available:
            if time.monotonic() - start > 2:
                self.fail(f"{node} not {'available' if available else 'unavailable'} in serve 2 s after {what}: "
                          f"{self.serve_node(node)}\n" + log_tail(self.controller_log_path, 20))
            time.sleep(0.02)
        print(f"{node} {'available' if available else 'unavailable'} {time.monotonic() - start:.3f} s after {what}",
              file=sys.stderr)
        return self.serve_node(node)

    def dry_run_every_node(self):
        status, body = self.serve.request("POST", "/v1/jobs?dry_run=1", {"nodes": len(topology_labels(TOPOSCHED, CLUSTER))})
        return status, body

    def test_serve_marks_cordoned_not_ready_and_deleted_nodes_unavailable(self):
        nodes = sorted(topology_labels(TOPOSCHED, CLUSTER))
        self.assertEqual(self.dry_run_every_node()[0], 200)
        node = nodes[2]
        self.set_schedulable(node, False)
        marked = self.wait_node(node, False, "the cordon")
        self.assertEqual([(m["source"], m["reason"]) for m in marked["unavailable"]], [("k8s", "cordoned")])
        status, body = self.dry_run_every_node()
        self.assertEqual(status, 422, body)
        self.set_schedulable(node, True)
        self.wait_node(node, True, "the uncordon")
        self.assertEqual(self.dry_run_every_node()[0], 200)

        self.set_ready(node, False)
        marked = self.wait_node(node, False, "the NotReady condition")
        self.assertEqual([m["reason"] for m in marked["unavailable"]], ["NotReady"])
        self.assertEqual(self.dry_run_every_node()[0], 422)
        self.set_ready(node, True)
        self.wait_node(node, True, "the Ready condition")
        self.assertEqual(self.dry_run_every_node()[0], 200)

        # A pod bound on a node that then goes: its job keeps its GPUs and is reported.
        a = group_pods("a", 1)
        self.create(a)
        self.wait_bound(a)
        (where,) = self.node_of(a)
        self.kube.api.delete(f"/api/v1/nodes/{where}")
        marked = self.wait_node(where, False, "the node's deletion")
        self.assertEqual([m["reason"] for m in marked["unavailable"]], ["deleted (no Node object)"])
        self.assertEqual(marked["jobs"], ["k8s:ml:a"])
        status, body = self.serve.request("GET", "/v1/jobs/k8s:ml:a")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["unavailable_nodes"],
                         [{"node": where, "reason": "k8s: deleted (no Node object)"}])


if __name__ == "__main__":
    unittest.main()
