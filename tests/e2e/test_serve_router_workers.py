"""`serve --router-workers N`: the router's replicas are real, so their GPUs are jobs.

- Each worker is a job `router:worker-N` (policy "router") in `GET /v1/jobs`, on the GPUs
  `POST /v1/route` names for it; no `POST /v1/jobs` answer, however many jobs are placed
  until the cluster is full, includes one of them.
- A restart finds the same workers on the same GPUs (from the store) and holds nothing new;
  workers already held by jobs of a previous run are not placed twice.
- GPUs busy before the router is built are avoided: workers go around a job.
- A held worker of another size than --router-tp is refused by name (501 with the fix).
- Without --router-workers (or --router-kv-events) nothing is held: the router is a model.
"""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_harness import Server  # noqa: E402

CLUSTER = "preset:dgx-h100?nodes=4"  # 32 GPUs


def jobs(server):
    status, body = server.request("GET", "/v1/jobs")
    assert status == 200, body
    return json.loads(body)["jobs"]


def gpu_names(job):
    return {f"{g['node']}:{g['gpu']}" for g in job["gpus"]}


def worker_gpus(server):
    return {j["job"]: gpu_names(j) for j in jobs(server) if j["job"].startswith("router:worker-")}


class RouterWorkersTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = "sqlite:" + os.path.join(self.tmp.name, "state.db")

    def tearDown(self):
        self.tmp.cleanup()

    def serve(self, *extra):
        return Server(CLUSTER, self.store, self.tmp.name, extra=list(extra))

    def test_workers_are_jobs_and_never_handed_out(self):
        with self.serve("--router-workers", "6", "--router-tp", "2") as s:
            workers = worker_gpus(s)
            self.assertEqual(sorted(workers), [f"router:worker-{w}" for w in range(6)])
            held = set().union(*workers.values())
            self.assertEqual(len(held), 12)
            for j in jobs(s):
                if j["job"].startswith("router:"):
                    self.assertEqual(j["policy"], "router")
            # The router routes to exactly those GPUs.
            for w in range(6):
                status, body = s.request("POST", "/v1/route", {"token_ids": list(range(w * 1000, w * 1000 + 600))})
                self.assertEqual(status, 200, body)
                answer = json.loads(body)
                self.assertEqual(set(answer["gpus"]), workers[f"router:worker-{answer['worker']}"])
            # Fill the cluster with jobs of every shape: none gets a worker's GPU.
            given = set()
            k = 0
            for gpus in (8, 3, 1, 2, 1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1):
                status, body = s.request("POST", "/v1/jobs", {"job": f"j{k}", "gpus": gpus, "policy": "first-fit"})
                k += 1
                if status != 201:
                    self.assertEqual(status, 422, body)  # infeasible: the rest is the workers'
                    continue
                got = gpu_names(json.loads(body))
                self.assertFalse(got & held, f"job j{k - 1} got worker GPUs {sorted(got & held)}")
                self.assertFalse(got & given)
                given |= got
            self.assertEqual(len(given), 32 - 12, "every GPU but the workers' was handed out")
        # A restart keeps the same workers, restored from the store.
        with self.serve("--router-workers", "6", "--router-tp", "2") as s:
            self.assertEqual(worker_gpus(s), workers)
            placed = [j for j in jobs(s) if not j["job"].startswith("router:")]
            self.assertEqual(set().union(*(gpu_names(j) for j in placed)), given)

    def test_workers_go_around_busy_gpus_and_a_wrong_size_is_refused(self):
        with self.serve() as s:  # no router flags: the router holds nothing
            self.assertEqual(worker_gpus(s), {})
            status, body = s.request("POST", "/v1/jobs", {"job": "big", "gpus": 16, "policy": "first-fit"})
            self.assertEqual(status, 201, body)
            big = gpu_names(json.loads(body))
        with self.serve("--router-workers", "4", "--router-tp", "4") as s:
            workers = worker_gpus(s)
            self.assertEqual(len(workers), 4)
            held = set().union(*workers.values())
            self.assertEqual(len(held), 16)
            self.assertFalse(held & big)
        with self.serve("--router-workers", "4", "--router-tp", "2") as s:
            status, body = s.request("POST", "/v1/route", {"token_ids": list(range(100))})
            self.assertEqual(status, 501, body)
            message = json.loads(body)["error"]["message"]
            self.assertIn("router:worker-0 holds 4 GPUs", message)
            self.assertIn("--router-tp is 2", message)
            self.assertIn("DELETE /v1/jobs/router:worker-0", message)


if __name__ == "__main__":
    unittest.main()
