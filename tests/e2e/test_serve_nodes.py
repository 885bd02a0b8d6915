"""Node availability through `toposched serve` (issue 30 item 3, issue 28 item 3): PUT
/v1/nodes/{name}/availability marks a node unavailable or lifts the mark (token-guarded,
strict body, 404 for an unknown node, idempotent); GET /v1/nodes lists every node; no
placement uses an unavailable node; a job already there keeps its GPUs and is reported in
GET /v1/jobs and the metrics; the marks survive a restart (SQLite store) and a kill -9."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_harness import Server  # noqa: E402

CLUSTER = "preset:dgx-h100?nodes=4"
TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in the metrics")


class NodeAvailability(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="toposched-nodes-")
        self.addCleanup(self.tmp.cleanup)
        self.token_file = os.path.join(self.tmp.name, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(self.token_file, 0o600)
        self.store = "sqlite:" + os.path.join(self.tmp.name, "state.db")

    def start(self):
        s = Server(CLUSTER, self.store, self.tmp.name, ["--token-file", self.token_file])
        self.addCleanup(s.stop)
        return s

    def put(self, s, node, body, headers=AUTH):
        return s.request("PUT", f"/v1/nodes/{node}/availability", body, headers)

    def nodes(self, s):
        status, body = s.request("GET", "/v1/nodes")
        self.assertEqual(status, 200, body)
        return {n["node"]: n for n in json.loads(body)["nodes"]}

    def place(self, s, body, dry_run=False):
        return s.request("POST", "/v1/jobs?dry_run=1" if dry_run else "/v1/jobs", body, AUTH)

    def test_marks_exclude_nodes_report_jobs_and_survive_restarts(self):
        s = self.start()
        names = sorted(self.nodes(s))
        self.assertEqual(len(names), 4)
        self.assertTrue(all(n["available"] and n["unavailable"] == [] for n in self.nodes(s).values()))

        status, body = self.place(s, {"job": "a", "gpus": 16})
        self.assertEqual(status, 201, body)
        a_nodes = sorted({g["node"] for g in json.loads(body)["gpus"]})
        self.assertEqual(len(a_nodes), 2)
        lost = a_nodes[0]

        # Marked: 200 with the node, the job there keeps its GPUs and is reported.
        status, body = self.put(s, lost, {"available": False, "reason": "NotReady", "source": "k8s"})
        self.assertEqual(status, 200, body)
        node = json.loads(body)
        self.assertFalse(node["available"])
        self.assertEqual([(m["source"], m["reason"]) for m in node["unavailable"]], [("k8s", "NotReady")])
        self.assertEqual(node["jobs"], ["a"])
        self.assertEqual(node["free_gpus"], 0)
        # Idempotent: the same request again answers the same and changes nothing.
        self.assertEqual(self.put(s, lost, {"available": False, "reason": "NotReady", "source": "k8s"}), (200, body))
        status, job = s.request("GET", "/v1/jobs/a")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(job)["unavailable_nodes"], [{"node": lost, "reason": "k8s: NotReady"}])
        self.assertEqual(json.loads(s.request("GET", "/v1/jobs")[1])["jobs"][0], json.loads(job))
        metrics = s.request("GET", "/metrics")[1]
        self.assertEqual(metric(metrics, "toposched_nodes_unavailable"), 1)
        self.assertEqual(metric(metrics, "toposched_jobs_on_unavailable_nodes"), 1)

        # Two whole nodes are free and available (a's other node is full, the lost one
        # unavailable): a job of 2 whole nodes fits, one of 3 does not.
        self.assertEqual(self.place(s, {"nodes": 2}, dry_run=True)[0], 200)
        status, body = self.place(s, {"nodes": 3}, dry_run=True)
        self.assertEqual(status, 422, body)
        # Releasing "a" frees the lost node's GPUs, yet no placement uses them.
        self.assertEqual(s.request("DELETE", "/v1/jobs/a", None, AUTH)[0], 200)
        status, body = self.place(s, {"nodes": 4}, dry_run=True)
        self.assertEqual(status, 422, body)
        self.assertIn("unavailable node", json.loads(body)["error"]["message"])
        status, body = self.place(s, {"job": "b", "nodes": 3})
        self.assertEqual(status, 201, body)
        self.assertNotIn(lost, {g["node"] for g in json.loads(body)["gpus"]})

        # An operator's mark beside Kubernetes': lifting the k8s one leaves the node unavailable.
        other = next(n for n in names if n != lost)
        self.assertEqual(self.put(s, lost, {"available": False, "reason": "fan failure"})[0], 200)
        self.assertEqual(self.put(s, other, {"available": False, "reason": "DRAIN", "source": "slurm"})[0], 200)
        self.assertEqual(self.put(s, lost, {"available": True, "source": "k8s"})[0], 200)
        before_restart = self.nodes(s)
        self.assertEqual([m["source"] for m in before_restart[lost]["unavailable"]], ["api"])
        s.kill9()

        # Restarted on the same store (after kill -9): the same marks, the same exclusions.
        s = self.start()
        self.assertEqual(self.nodes(s), before_restart)
        self.assertEqual(self.place(s, {"nodes": 1}, dry_run=True)[0], 422)  # b holds the other 3
        self.assertEqual(self.put(s, lost, {"available": True})[0], 200)
        status, body = self.place(s, {"job": "c", "nodes": 1})
        self.assertEqual(status, 201, body)
        self.assertEqual({g["node"] for g in json.loads(body)["gpus"]}, {lost})

    def test_bad_requests_get_their_status_and_change_nothing(self):
        s = self.start()
        name = sorted(self.nodes(s))[0]
        before = s.request("GET", "/v1/nodes")[1]
        # No token: 401 before the body is read.
        status, body = self.put(s, name, {"available": False, "reason": "x"}, {"Content-Type": "application/json"})
        self.assertEqual(status, 401, body)
        status, body = self.put(s, "no-such-node", {"available": False, "reason": "x"})
        self.assertEqual(status, 404, body)
        self.assertIn("no-such-node", json.loads(body)["error"]["message"])
        self.assertEqual(s.request("GET", "/v1/nodes/no-such-node")[0], 404)
        status, body = self.put(s, name, '{"available": false,\n "reason": }')
        self.assertEqual(status, 400, body)
        self.assertIn("request body:2:", json.loads(body)["error"]["message"])
        for bad, part in (({"available": "no"}, "'available' must be true or false"),
                          ({"available": False}, "needs a 'reason'"),
                          ({"available": False, "reason": "x", "colour": "red"}, "unknown key 'colour'"),
                          ({"available": False, "reason": "x", "source": "Not A Word"}, "'source' must be"),
                          ({"available": True, "reason": "x"}, "'reason' is only for")):
            status, body = self.put(s, name, bad)
            self.assertEqual(status, 400, body)
            self.assertIn(part, json.loads(body)["error"]["message"])
        self.assertEqual(s.request("GET", "/v1/nodes")[1], before)
        status, body = s.request("GET", f"/v1/nodes/{name}")
        self.assertEqual(status, 200)
        self.assertTrue(json.loads(body)["available"])


if __name__ == "__main__":
    unittest.main()
