"""Admission control of `toposched serve`'s router (issue 33, item 6): a bound on the requests
in flight (`--router-max-in-flight`), past which `POST /v1/route` answers 429 with a
Retry-After header; `POST /v1/route/done` ends a request (or only its prefill) and frees its
place. Also: a request id already in flight is a 409, an unknown one a 404, and a bad
`--router-load-weight` stops the server with an error naming the option.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_harness import Server  # noqa: E402

CLUSTER = "preset:dgx-h100?nodes=1"


def post(server, path, body):
    """(status, JSON body, Retry-After header or None)."""
    c = server.conn()
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read().decode()), r.getheader("Retry-After")
    finally:
        c.close()


def route(server, request_id, blocks=(1, 2)):
    body = {"input_length": 512 * len(blocks), "hash_ids": list(blocks)}
    if request_id is not None:
        body["request_id"] = request_id
    return post(server, "/v1/route", body)


class RouterAdmissionTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = "sqlite:" + os.path.join(self.tmp.name, "state.db")

    def tearDown(self):
        self.tmp.cleanup()

    def test_full_queue_sheds_with_retry_after_until_a_request_is_done(self):
        extra = ["--router-workers", "4", "--router-policy", "kv", "--router-max-in-flight", "3"]
        with Server(CLUSTER, self.store, self.tmp.name, extra=extra) as s:
            for rid in (1, 2, 3):
                status, body, retry = route(s, rid, (rid, rid + 100))
                self.assertEqual(status, 200, body)
                self.assertIsNone(retry)
                self.assertEqual(body["policy"], "kv")
            status, body, _ = route(s, 2)
            self.assertEqual(status, 409, body)
            # Full: 429, Retry-After in whole seconds (at least 1), the same for an anonymous route.
            for rid in (4, None):
                status, body, retry = route(s, rid)
                self.assertEqual(status, 429, body)
                self.assertEqual(body["error"]["code"], "overloaded")
                self.assertIn("--router-max-in-flight 3", body["error"]["message"])
                self.assertEqual(body["in_flight"], 3)
                self.assertIsNotNone(retry)
                self.assertGreaterEqual(int(retry), 1)
                self.assertEqual(int(retry), body["retry_after_s"])
            # The prompt computed: still in flight, still full.
            status, body, _ = post(s, "/v1/route/done", {"request_id": 1, "stage": "prefill"})
            self.assertEqual(status, 200, body)
            self.assertEqual(body, {"request_id": 1, "stage": "prefill", "in_flight": 3})
            self.assertEqual(route(s, 4)[0], 429)
            # Finished: one place is free, taken by the next request, then full again.
            status, body, _ = post(s, "/v1/route/done", {"request_id": 1})
            self.assertEqual(status, 200, body)
            self.assertEqual(body["in_flight"], 2)
            self.assertEqual(route(s, 4)[0], 200)
            self.assertEqual(route(s, 5)[0], 429)
            status, body, _ = post(s, "/v1/route/done", {"request_id": 1})
            self.assertEqual(status, 404, body)
            status, body, _ = post(s, "/v1/route/done", {"request_id": 2, "stage": "decoded"})
            self.assertEqual(status, 400, body)
            self.assertIn("stage", body["error"]["message"])

    def test_without_a_bound_nothing_is_shed(self):
        with Server(CLUSTER, self.store, self.tmp.name, extra=["--router-workers", "2"]) as s:
            for rid in range(1, 41):
                self.assertEqual(route(s, rid, (rid,))[0], 200)
            status, body, _ = post(s, "/v1/route/done", {"request_id": 40})
            self.assertEqual(status, 200, body)
            self.assertEqual(body["in_flight"], 39)

    def test_a_negative_load_weight_is_refused(self):
        binary = os.environ.get("TOPOSCHED", "toposched")
        proc = subprocess.run([binary, "serve", "--cluster", CLUSTER, "--store", self.store, "--listen", "127.0.0.1:0",
                               "--router-load-weight", "-1"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--router-load-weight", proc.stderr)


if __name__ == "__main__":
    unittest.main()
