"""Acceptance 3 of issue 11: crash safety with a real kill. Under the load of 16 client
threads on 10,000 GPUs, `kill -9` the server at 5 random moments, restart it on the same
store, and check: every job whose creation was acknowledged (201) and not released is back
with the same GPUs; nothing unacknowledged is half-present (a job whose answer was lost is
either absent or whole); no GPU has two owners. Run with the store on a tmpfs (/dev/shm) and
on disk."""
import http.client
import json
import os
import random
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_harness import Server  # noqa: E402

CLUSTER = "preset:dgx-h100?nodes=1250"
TOTAL_GPUS = 10000
SIZES = [1, 2, 4, 8, 8, 16, 32, 64]


class Ledger:
    """What the clients know: acknowledged jobs (with their GPUs), and requests whose answer
    was lost when the server died."""

    def __init__(self):
        self.lock = threading.Lock()
        self.live = {}            # id -> [(node, gpu)] in rank order: 201 received, not released
        self.place_unknown = {}   # id -> requested GPU count
        self.release_unknown = set()


def client_loop(port, ledger, prefix, stop, seed):
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    mine = []
    i = 0
    while not stop.is_set():
        job = f"{prefix}-{i}"
        i += 1
        size = rng.choice(SIZES)
        try:
            conn.request("POST", "/v1/jobs", body=json.dumps({"job": job, "gpus": size}),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            body = r.read()
        except (OSError, http.client.HTTPException):
            with ledger.lock:
                ledger.place_unknown[job] = size
            return
        if r.status == 201:
            gpus = [(g["node"], g["gpu"]) for g in json.loads(body)["gpus"]]
            with ledger.lock:
                ledger.live[job] = gpus
            mine.append(job)
        elif r.status != 422:
            raise AssertionError(f"POST {job}: {r.status} {body[:200]}")
        if mine and (rng.random() < 0.45 or r.status == 422):
            victim = mine.pop(rng.randrange(len(mine)))
            try:
                conn.request("DELETE", f"/v1/jobs/{victim}")
                r = conn.getresponse()
                r.read()
            except (OSError, http.client.HTTPException):
                with ledger.lock:
                    ledger.release_unknown.add(victim)
                return
            if r.status != 200:
                raise AssertionError(f"DELETE {victim}: {r.status}")
            with ledger.lock:
                del ledger.live[victim]


class CrashSafety(unittest.TestCase):
    def check_restored(self, server, ledger):
        status, body = server.request("GET", "/v1/jobs")
        self.assertEqual(status, 200)
        present = {j["job"]: [(g["node"], g["gpu"]) for g in j["gpus"]] for j in json.loads(body)["jobs"]}
        for job, gpus in ledger.live.items():
            if job in ledger.release_unknown:
                continue
            self.assertIn(job, present, f"acknowledged job {job} lost")
            self.assertEqual(present[job], gpus, f"job {job} came back on other GPUs")
        for job, gpus in present.items():
            if job in ledger.live:
                continue
            self.assertIn(job, ledger.place_unknown, f"job {job} is present but was never acknowledged")
            self.assertEqual(len(gpus), ledger.place_unknown[job], f"unacknowledged job {job} is half-present")
        owned = [g for gpus in present.values() for g in gpus]
        self.assertEqual(len(owned), len(set(owned)), "a GPU is owned twice")
        frag = json.loads(server.request("GET", "/v1/fragmentation")[1])
        self.assertEqual(frag["free_gpus"], TOTAL_GPUS - len(owned))
        # The outcome of each lost answer is now known: fold it into the ledger.
        for job in list(ledger.place_unknown):
            if job in present:
                ledger.live[job] = present[job]
        for job in ledger.release_unknown:
            if job not in present:
                ledger.live.pop(job, None)
        ledger.place_unknown.clear()
        ledger.release_unknown.clear()

    def crash_five_times(self, directory):
        ledger = Ledger()
        store = "sqlite:" + os.path.join(directory, "state.db")
        rng = random.Random(11)
        acknowledged_total = 0
        for cycle in range(5):
            server = Server(CLUSTER, store, directory)
            if cycle:
                self.check_restored(server, ledger)
            stop = threading.Event()
            errors = []

            def run(t, port=server.port, cycle=cycle):
                try:
                    client_loop(port, ledger, f"c{cycle}-t{t}", stop, seed=cycle * 100 + t)
                except AssertionError as e:
                    errors.append(str(e))

            threads = [threading.Thread(target=run, args=(t,)) for t in range(16)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.5, 2.0))  # a random moment under load
            server.kill9()
            stop.set()
            for t in threads:
                t.join(timeout=120)
            self.assertEqual(errors, [])
            acknowledged_total += len(ledger.live)
        server = Server(CLUSTER, store, directory)
        try:
            self.check_restored(server, ledger)
        finally:
            server.stop()
        self.assertGreater(acknowledged_total, 0, "the load placed nothing before the kills")

    def test_acceptance_3_kill_9_with_the_store_on_tmpfs(self):
        if not os.path.isdir("/dev/shm"):
            self.skipTest("no /dev/shm")
        with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
            self.crash_five_times(d)

    def test_acceptance_3_kill_9_with_the_store_on_disk(self):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
            self.crash_five_times(d)


if __name__ == "__main__":
    unittest.main()
