"""End-to-end tests of `toposched serve` (issue 11): the curl examples of docs/service.md run
against a real server, bad input, Topograph's API, restart, and concurrent CLI `place` calls
on one state file (the lock)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_harness import BIN, SRC, Server  # noqa: E402

H100x64 = "preset:dgx-h100?nodes=64"


def doc_examples():
    """The ```sh blocks of docs/service.md, in order: the runnable curl examples."""
    text = open(os.path.join(SRC, "docs", "service.md")).read()
    return re.findall(r"```sh\n(.*?)```", text, re.S)


class DocsExamples(unittest.TestCase):
    def test_acceptance_1_the_curl_examples_of_the_docs_run_as_written(self):
        blocks = doc_examples()
        self.assertGreaterEqual(sum(b.count("curl ") for b in blocks), 12, blocks)
        with tempfile.TemporaryDirectory() as d:
            # Only --cluster and a free port: the store is the default ./toposched-state.db.
            with Server(H100x64, None, d, cwd=d) as s:
                self.assertTrue(os.path.exists(os.path.join(d, "toposched-state.db")))
                for block in blocks:
                    script = "set -euo pipefail\n" + block.replace("localhost:7070", f"127.0.0.1:{s.port}")
                    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=d)
                    self.assertEqual(r.returncode, 0, f"{block}\n{r.stdout}\n{r.stderr}")
                    self.assertTrue(r.stdout.strip(), block)
                status, body = s.request("GET", "/v1/jobs")
                self.assertEqual(status, 200)

    def test_defaults_are_those_the_docs_promise(self):
        r = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0)
        self.assertIn("127.0.0.1:7070", r.stdout)
        self.assertIn("sqlite:./toposched-state.db", r.stdout)


class Api(unittest.TestCase):
    def test_place_restart_and_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            store = "sqlite:" + os.path.join(d, "s.db")
            with Server(H100x64, store, d) as s:
                status, body = s.request("POST", "/v1/jobs", {"job": "a", "gpus": 32, "tp": 8, "pp": 4})
                self.assertEqual(status, 201, body)
                placed = json.loads(body)
                self.assertEqual([g["rank"] for g in placed["gpus"]], list(range(32)))
                for bad, code in (('{"gpus":', 400), ({"gpus": 8, "bogus": 1}, 400), ({"gpus": -1}, 400),
                                  ({"gpus": 100000}, 422), ({"gpus": 8, "policy": "nope"}, 400),
                                  ({"job": "a", "gpus": 1}, 409), ("x" * (2 << 20), 413)):
                    status, body = s.request("POST", "/v1/jobs", bad)
                    self.assertEqual(status, code, body[:200])
                    self.assertIn("message", json.loads(body)["error"])
                status, body = s.request("DELETE", "/v1/jobs/zzz")
                self.assertEqual(status, 404)
                jobs = s.request("GET", "/v1/jobs")[1]
                frag = s.request("GET", "/v1/fragmentation")[1]
            with Server(H100x64, store, d) as s:
                self.assertEqual(s.request("GET", "/v1/jobs")[1], jobs)
                self.assertEqual(s.request("GET", "/v1/fragmentation")[1], frag)
            # The store belongs to this cluster: another one is refused with a clear error.
            r = subprocess.run([BIN, "serve", "--cluster", "preset:dgx-h100?nodes=8", "--store", store,
                                "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1)
            self.assertIn("belongs to cluster", r.stderr)

    def test_acceptance_8_topograph_generate_and_poll(self):
        cluster = "preset:gb200-nvl72?racks=4"
        body = {"provider": {"name": "aws", "creds": {"accessKeyId": "id", "secretAccessKey": "secret"}},
                "engine": {"name": "slurm", "params": {"plugin": "topology/block", "blockSizes": [18, 36]}},
                "nodes": [{"region": "region1", "instances": {"instance1": "node1"}}]}
        expected = subprocess.run([BIN, "export", "--cluster", cluster, "--to", "slurm-block",
                                   "--block-sizes", "18,36"], capture_output=True, text=True, timeout=60)
        self.assertEqual(expected.returncode, 0, expected.stderr)
        with tempfile.TemporaryDirectory() as d, Server(cluster, "sqlite:" + os.path.join(d, "s.db"), d) as s:
            status, uid = s.request("POST", "/v1/generate", body)
            self.assertEqual(status, 202, uid)
            for _ in range(600):
                status, text = s.request("GET", f"/v1/topology?uid={uid}")
                if status != 202:
                    break
                self.assertEqual(text.strip(), "not completed yet")
                time.sleep(0.05)
            self.assertEqual(status, 200)
            self.assertEqual(text, expected.stdout)
            self.assertEqual(s.request("GET", "/v1/topology?uid=unknown")[0], 404)


class CliLock(unittest.TestCase):
    def test_acceptance_6_eight_concurrent_place_processes_ten_rounds(self):
        with tempfile.TemporaryDirectory() as d:
            state = os.path.join(d, "state.json")
            seed = subprocess.run([BIN, "place", "--cluster", H100x64, "--gpus", "1", "--job", "seed",
                                   "--save-state", state], capture_output=True, text=True, timeout=120)
            self.assertEqual(seed.returncode, 0, seed.stderr)
            acknowledged = {"seed"}
            for rnd in range(10):
                procs = []
                for p in range(8):
                    job = f"r{rnd}-p{p}"
                    procs.append((job, subprocess.Popen(
                        [BIN, "place", "--cluster", H100x64, "--gpus", "1", "--policy", "first-fit",
                         "--job", job, "--state", state,
                         "--save-state", state, "--format", "json"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
                for job, proc in procs:
                    out, err = proc.communicate(timeout=120)
                    self.assertEqual(proc.returncode, 0, err)
                    acknowledged.add(job)
            doc = json.load(open(state))
            ids = {j["id"] for j in doc["jobs"]}
            self.assertEqual(ids, acknowledged)
            gpus = [g for j in doc["jobs"] for g in j["gpus"]]
            self.assertEqual(len(gpus), len(set(gpus)), "a GPU was given to two jobs")


if __name__ == "__main__":
    unittest.main()
