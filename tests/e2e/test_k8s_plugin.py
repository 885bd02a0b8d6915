"""The plugin build end to end (issue 31, acceptance 1 in part, and 2): toposched-kube-scheduler
(kube-scheduler v1.37.2 with the Toposched plugin compiled in, kube/scheduler) on the real
control plane of test_k8s_kube_scheduler.py, running deploy/kubernetes/scheduler-plugin-
config.yaml's profile against `toposched serve --k8s-extender`.

- The same seeded mixed queue with the same assertions as the extender's end-to-end test
  (whole groups in one leaf, every pod on its rank block's node with the toposched.io
  annotations, no node over capacity, the oversized group holds nothing, the same GPUs as
  POST /v1/jobs?dry_run=1), and the same three kill -9 of toposched while pods arrive.
- Permit: a group of three of which one member can go nowhere (a nodeSelector no node
  matches) binds no member; its two placeable members wait at Permit and, after
  permitWaitSeconds, are rejected and every GPU of the group is released in toposched. When
  the member is recreated without the selector, the group is planned again and bound whole.
- toposched down: pods created while serve is stopped are not bound (no member of a group
  half bound); once serve is back on the same address, every group is bound whole.

build/kube/toposched-kube-scheduler comes from scripts/build-kube (make test builds it): a
machine without it fails these tests, it does not skip them.
"""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_k8s_kube_scheduler as extender_e2e  # noqa: E402
from proc_harness import free_ports  # noqa: E402

NAMESPACE = extender_e2e.NAMESPACE
PREFIX = extender_e2e.PREFIX
Group = extender_e2e.Group
PERMIT_WAIT_S = 4


class PluginBuildEndToEnd(extender_e2e.KubeSchedulerEndToEnd):
    PLUGIN = True
    # The plugin reads nodes from kube-scheduler's snapshot: nodeCacheCapable has no meaning.
    test_seeded_mix_with_full_node_objects = None

    def bound(self, names):
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(NAMESPACE)}
        return sorted(n for n in names if n in pods and pods[n]["spec"].get("nodeName"))

    def test_a_group_with_an_unplaceable_member_binds_no_member(self):
        group = Group("coscheduling", "permit", 3, 8, {"tp": 8, "pp": 3})
        server = self.start_toposched("permit")
        self.kube.start_scheduler(f"{server.url()}{PREFIX}", True, plugin=True, permit_wait_s=PERMIT_WAIT_S)
        self.addCleanup(self.delete_all_pods)
        self.addCleanup(self.kube.stop_scheduler)
        pods = [group.pod(i) for i in range(group.size)]
        pods[2]["spec"]["nodeSelector"] = {"toposched.io/no-such-node": "true"}
        for p in pods:
            self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", p)
        # Planned whole on the first member's PreFilter: toposched holds the 24 GPUs ...
        deadline = time.monotonic() + 60
        status, body = 404, ""
        while time.monotonic() < deadline:
            status, body = server.request("GET", f"/v1/jobs/{group.job_id()}")
            if status == 200:
                break
            time.sleep(0.1)
        self.assertEqual(status, 200, "the group was never planned")
        self.assertEqual(len(json.loads(body)["gpus"]), 24)
        # ... and releases them when the waiting members time out at Permit (kube-scheduler
        # retries the rejected members at once, so the group is planned again a moment later:
        # serve's log, not a poll, shows the release).
        release = f"release job={group.job_id()} "
        deadline = time.monotonic() + 60
        released = False
        while time.monotonic() < deadline and not released:
            self.assertEqual(self.bound(group.pod_names()), [], "a member of the group was bound")
            with open(server.log_path) as f:
                released = release in f.read()
            time.sleep(0.1)
        self.assertTrue(released, "the group's GPUs were not released after the Permit time-out:\n"
                        + self.kube.log_tail("kube-scheduler", 60))
        self.assertIn(f"rejected due to timeout after waiting {PERMIT_WAIT_S}s at plugin Toposched", self.kube_events())
        time.sleep(2)
        self.assertEqual(self.bound(group.pod_names()), [], "a member of the group was bound")
        # The member recreated without the selector: the group is planned again, bound whole.
        self.kube.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{group.name}-2")
        deadline = time.monotonic() + 30
        while any(p["metadata"]["name"] == f"{group.name}-2" for p in self.kube.pods(NAMESPACE)):
            self.assertLess(time.monotonic(), deadline, "the member was not deleted")
            time.sleep(0.1)
        self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", group.pod(2))
        bound = self.wait_bound(group.pod_names())
        status, body = server.request("GET", "/v1/jobs")
        jobs = {j["job"]: j for j in json.loads(body)["jobs"]}
        self.check_capacity(bound)
        self.check_groups([group], bound, jobs)

    def kube_events(self):
        events = self.kube.api.get(f"/api/v1/namespaces/{NAMESPACE}/events")
        return "\n".join(e.get("message", "") for e in events.get("items", []))

    def test_toposched_down_pods_wait_and_no_group_is_half_bound(self):
        port = free_ports(1)[0]
        server = self.start_toposched("outage", port)
        self.kube.start_scheduler(f"http://127.0.0.1:{port}{PREFIX}", True, plugin=True)
        self.addCleanup(self.delete_all_pods)
        self.addCleanup(self.kube.stop_scheduler)
        server.kill9()
        groups = [Group("coscheduling", f"down{i}", 2, 8, {"tp": 8, "pp": 2}) for i in range(2)]
        groups.append(Group("single", "downsolo", 1, 2))
        names = [n for g in groups for n in g.pod_names()]
        for g in groups:
            for i in range(g.size):
                self.kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", g.pod(i))
        time.sleep(5)  # kube-scheduler tries and backs off; serve answers nothing
        self.assertEqual(self.bound(names), [], "pods were bound while toposched was down")
        server = self.start_toposched("outage", port)
        pods = self.wait_bound(names)
        status, body = server.request("GET", "/v1/jobs")
        jobs = {j["job"]: j for j in json.loads(body)["jobs"]}
        self.check_capacity(pods)
        self.check_groups(groups, pods, jobs)


if __name__ == "__main__":
    unittest.main()
