"""`toposched serve --k8s-extender` end to end, driven the way kube-scheduler drives an HTTP
extender (kube_scheduler_replay.py: one pod at a time, filter -> prioritize only with more
than one node left -> asynchronous bind, Go's JSON bytes and headers), with a stub of the
API server that records the Bindings (no real API server can run on these machines).

Acceptance (issue 12):
 1. a mixed queue (4 groups of 8 x 8-GPU pods, TP8 x PP4 x DP2, plus 1- and 2-GPU pods) on
    a 64-node DGX H100 spec: every group lands whole, on the nodes and in the rank order
    that POST /v1/jobs?dry_run=1 chooses for the same request; no node over-committed;
 2. a group too large for the free capacity gets no node for any member and holds nothing;
    a group whose members never all arrive loses its reservation after the timeout (the
    test-only clock of --k8s-test-clock);
 4. malformed bodies, unknown nodes, pods without GPUs get the documented answers.
"""

import json
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.request

from kube_scheduler_replay import ApiServerStub, KubeSchedulerReplay, go_json, make_pod, pod_gpus, post

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
CLUSTER = "preset:dgx-h100?nodes=64"
PREFIX = "/toposched"
NODES = [f"dgx-h100-{i:03d}" for i in range(1, 65)]


def group_pod(group, index, size, gpus=8, tp=8, pp=4, dp=2):
    return make_pod(f"{group}-{index}", gpus,
                    labels={"scheduling.x-k8s.io/pod-group": group,
                            "batch.kubernetes.io/job-completion-index": str(index)},
                    annotations={"scheduling.x-k8s.io/min-member": str(size), "toposched.io/tp": str(tp),
                                 "toposched.io/pp": str(pp), "toposched.io/dp": str(dp)})


class Server:
    """toposched serve on a loopback port it picks, with the extender and the test clock."""

    def __init__(self, tmp, api_url, token_file):
        self.proc = subprocess.Popen(
            [TOPOSCHED, "serve", "--cluster", CLUSTER, "--store", f"sqlite:{tmp}/state.db",
             "--listen", "127.0.0.1:0", "--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", api_url,
             "--k8s-token-file", token_file, "--k8s-test-clock"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                break
            m = re.search(r"listening on https?://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            self.proc.kill()
            raise AssertionError("toposched serve did not report its port: " + self.proc.stderr.read())

    def get(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as r:
            return json.loads(r.read())

    def post_json(self, path, obj):
        status, body = post(self.port, path, json.dumps(obj).encode())
        return status, json.loads(body) if body else None

    def jobs(self):
        return {j["job"]: j for j in self.get("/v1/jobs")["jobs"]}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()


class ExtenderE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="toposched-k8s-")
        self.addCleanup(self.tmp.cleanup)
        token_file = os.path.join(self.tmp.name, "token")
        with open(token_file, "w") as f:
            f.write("s3cret-token\n")
        self.api = ApiServerStub("s3cret-token")
        self.addCleanup(self.api.stop)
        self.server = Server(self.tmp.name, self.api.url(), token_file)
        self.addCleanup(self.server.stop)

    def dry_run(self, job, gpus, tp=8, pp=4, dp=2):
        status, out = self.server.post_json("/v1/jobs?dry_run=1", {"job": job, "gpus": gpus, "gpus_per_node": 8,
                                                                  "tp": tp, "pp": pp, "dp": dp, "policy": "topo"})
        self.assertEqual(status, 200, out)
        return {g["rank"]: g["node"] for g in out["gpus"]}

    def test_mixed_queue_groups_land_whole_in_engine_rank_order(self):
        groups = {f"train{g}": [group_pod(f"train{g}", i, 8) for i in range(8)] for g in range(4)}
        singles = [make_pod(f"small-{i}", 1 if i % 3 else 2) for i in range(12)]
        huge = [group_pod("huge", i, 31, tp=8, pp=1, dp=31) for i in range(31)]
        # Interleave: members of different groups (shuffled inside each group), singles between.
        queue = []
        order = [3, 0, 6, 1, 7, 2, 5, 4]
        for step in range(8):
            for g in range(4):
                queue.append(groups[f"train{g}"][order[(step + g) % 8]])
            if step < 6:
                queue += singles[2 * step:2 * step + 2]
        cpu_pods = [make_pod("cpu-0", 0), make_pod("cpu-1", 0)]
        queue[5:5] = cpu_pods[:1]
        queue += cpu_pods[1:] + huge[:4]
        expected = {}

        def before_filter(pod):
            group = pod["metadata"].get("labels", {}).get("scheduling.x-k8s.io/pod-group")
            job = f"k8s:ml:{group}"
            if group and group.startswith("train") and job not in expected and job not in self.server.jobs():
                expected[job] = self.dry_run(job, 64)

        replay = KubeSchedulerReplay(self.server.port, PREFIX, NODES, 8, before_filter=before_filter)
        left = replay.run(queue)
        self.assertEqual(replay.errors, [])

        # 1. Every train group whole, each member on the node of its rank block in the engine's plan.
        for name, pods in groups.items():
            plan = expected[f"k8s:ml:{name}"]
            for i, pod in enumerate(pods):
                pname = pod["metadata"]["name"]
                self.assertIn(pname, replay.placed, f"{pname} not bound: {replay.unschedulable.get(pname)}")
                self.assertEqual(replay.placed[pname], plan[8 * i], f"{pname} not on rank {8 * i}'s node")
                self.assertEqual({plan[r] for r in range(8 * i, 8 * i + 8)}, {plan[8 * i]})
        for pod in singles:
            self.assertIn(pod["metadata"]["name"], replay.placed)
        # GPU pods are never scored (one node per filter answer); the CPU pods pass through
        # with every node and are scored (all 0), then bound plainly.
        self.assertEqual(replay.calls["prioritize"], 2)
        for pod in cpu_pods:
            self.assertIn(pod["metadata"]["name"], replay.placed)

        # No node is given more GPUs than it has; GPU indices on a node never overlap.
        per_node = {}
        for ns, name, binding in self.api.bindings:
            if name.startswith("cpu-"):
                self.assertNotIn("annotations", binding["metadata"])
                continue
            node = binding["target"]["name"]
            gpus = [int(x) for x in binding["metadata"]["annotations"]["toposched.io/gpus"].split(",")]
            per_node.setdefault(node, []).extend(gpus)
        for node, gpus in per_node.items():
            self.assertLessEqual(len(gpus), 8, node)
            self.assertEqual(len(gpus), len(set(gpus)), node)
        self.assertEqual(len(self.api.bindings), 32 + 12 + 2)
        by_pod = {name: b for _, name, b in self.api.bindings}
        b = by_pod["train2-5"]
        self.assertEqual(b["metadata"]["annotations"]["toposched.io/rank"], "5")
        self.assertEqual(b["metadata"]["annotations"]["toposched.io/ranks"], ",".join(str(r) for r in range(40, 48)))
        self.assertEqual(b["metadata"]["annotations"]["toposched.io/job"], "k8s:ml:train2")
        self.assertEqual(b["metadata"]["uid"], "uid-ml-train2-5")

        # 2. The too-large group: no member has a node, nothing held.
        for pod in huge[:4]:
            self.assertNotIn(pod["metadata"]["name"], replay.placed)
            self.assertIn("cannot be placed whole", replay.unschedulable[pod["metadata"]["name"]])
        jobs = self.server.jobs()
        self.assertNotIn("k8s:ml:huge", jobs)
        self.assertEqual(sorted(j for j in jobs if j.startswith("k8s:ml:train")), sorted(expected))
        held = [f"{g['node']}:{g['gpu']}" for j in jobs.values() for g in j["gpus"]]
        self.assertEqual(len(held), len(set(held)))
        self.assertEqual(len(held), 4 * 64 + sum(pod_gpus(p) for p in singles))
        self.assertEqual([p["metadata"]["name"] for p in left], [p["metadata"]["name"] for p in huge[:4]])

    def test_reservation_of_an_incomplete_group_expires(self):
        pod = group_pod("partial", 0, 3, tp=8, pp=1, dp=3)
        status, body = post(self.server.port, f"{PREFIX}/filter",
                            go_json({"Pod": pod, "Nodes": None, "NodeNames": NODES}))
        self.assertEqual(status, 200)
        result = json.loads(body)
        self.assertEqual(len(result["NodeNames"]), 1)
        self.assertEqual(len(self.server.jobs()["k8s:ml:partial"]["gpus"]), 24)
        status, _ = self.server.post_json(f"{PREFIX}/test/clock?advance_ms=299999", {})
        self.assertEqual(status, 200)
        self.assertIn("k8s:ml:partial", self.server.jobs())
        self.server.post_json(f"{PREFIX}/test/clock?advance_ms=1", {})
        self.assertNotIn("k8s:ml:partial", self.server.jobs())
        # Its other members now find nothing planned: the group is planned afresh.
        status, body = post(self.server.port, f"{PREFIX}/filter",
                            go_json({"Pod": group_pod("partial", 1, 3, tp=8, pp=1, dp=3), "Nodes": None,
                                     "NodeNames": NODES}))
        self.assertEqual(len(json.loads(body)["NodeNames"]), 1)
        self.assertEqual(len(self.server.jobs()["k8s:ml:partial"]["gpus"]), 24)

    def test_documented_answers_to_bad_requests(self):
        port = self.server.port
        # Malformed JSON: filter and bind answer 200 with Error; prioritize and preempt 400.
        for verb in ("filter", "bind"):
            status, body = post(port, f"{PREFIX}/{verb}", b'{"Pod": ')
            self.assertEqual(status, 200)
            self.assertIn("request body", json.loads(body)["Error"])
        for verb in ("prioritize", "preempt"):
            status, body = post(port, f"{PREFIX}/{verb}", b"[1,")
            self.assertEqual(status, 400)
            self.assertIn("message", json.loads(body)["error"])
        # Unknown nodes: never answered as feasible; unresolvable when the pod gets no node.
        args = {"Pod": make_pod("one", 1), "Nodes": None, "NodeNames": ["cpu-1", NODES[0]]}
        result = json.loads(post(port, f"{PREFIX}/filter", go_json(args))[1])
        self.assertEqual(result["NodeNames"], [NODES[0]])
        args = {"Pod": make_pod("eight", 8), "Nodes": None, "NodeNames": ["cpu-1"]}
        result = json.loads(post(port, f"{PREFIX}/filter", go_json(args))[1])
        self.assertIsNone(result["NodeNames"])
        self.assertIn("cpu-1", result["FailedAndUnresolvableNodes"])
        # A pod without GPUs passes through with every node, unknown ones included.
        args = {"Pod": make_pod("web", 0), "Nodes": None, "NodeNames": ["cpu-1", NODES[1]]}
        result = json.loads(post(port, f"{PREFIX}/filter", go_json(args))[1])
        self.assertEqual(result["NodeNames"], ["cpu-1", NODES[1]])
        self.assertIsNone(result["FailedNodes"])
        # Full Node objects (nodeCacheCapable: false): the chosen node object comes back as sent.
        node = {"metadata": {"name": NODES[5], "labels": {"a": "b"}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}
        args = {"Pod": make_pod("two", 2), "Nodes": {"metadata": {}, "items": [node]}, "NodeNames": None}
        result = json.loads(post(port, f"{PREFIX}/filter", go_json(args))[1])
        self.assertEqual(result["Nodes"]["items"], [node])
        # Keys in any case, as Go decodes them.
        args = {"pod": make_pod("three", 1), "nodenames": [NODES[7]]}
        result = json.loads(post(port, f"{PREFIX}/filter", go_json(args))[1])
        self.assertEqual(result["NodeNames"], [NODES[7]])
        # Bad GPU quantity: Error field.
        bad = make_pod("bad", 1)
        bad["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1.5"
        result = json.loads(post(port, f"{PREFIX}/filter", go_json({"Pod": bad, "NodeNames": NODES}))[1])
        self.assertIn("whole number", result["Error"])
        # Binding to another node than planned: Error, nothing posted.
        result = json.loads(post(port, f"{PREFIX}/bind", go_json(
            {"PodName": "one", "PodNamespace": "ml", "PodUID": "uid-ml-one", "Node": NODES[9]}))[1])
        self.assertIn("planned on", result["Error"])
        self.assertEqual(self.api.bindings, [])
        # The bind that matches the plan is posted with the token and the annotations.
        result = json.loads(post(port, f"{PREFIX}/bind", go_json(
            {"PodName": "one", "PodNamespace": "ml", "PodUID": "uid-ml-one", "Node": NODES[0]}))[1])
        self.assertEqual(result, {"Error": ""})
        self.assertEqual(len(self.api.bindings), 1)
        self.assertEqual(self.api.bindings[0][2]["metadata"]["annotations"]["toposched.io/gpus"].count(",") + 1, 1)
        # Nothing was over-committed by the bad requests: only the three good pods hold GPUs.
        self.assertEqual(sorted(self.server.jobs()), ["k8s:ml:pod:one", "k8s:ml:pod:three", "k8s:ml:pod:two"])


if __name__ == "__main__":
    unittest.main()
