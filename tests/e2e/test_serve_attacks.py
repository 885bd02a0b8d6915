"""Attacks on `toposched serve` (issue 35), each finding a regression test: crash bodies,
wrapped integers, wrong types, repeated keys, a second owner of one store, token variants.
Loopback only; every server is started and stopped by PID (serve_harness); every loop is
bounded in count and in time."""
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from serve_harness import BIN, Server  # noqa: E402

H100x8 = "preset:dgx-h100?nodes=8"


def run_cli(*args, timeout=120):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


class CrashBodies(unittest.TestCase):
    """One request each crashed the server (SIGFPE, SIGSEGV) before issue 35."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.server = Server(H100x8, "sqlite:" + os.path.join(cls.dir.name, "s.db"), cls.dir.name)

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        cls.dir.cleanup()
        # A crash would end the process with a signal (negative status) before stop().
        assert rc == 0, f"serve ended with {rc}"

    def assert_alive(self):
        self.assertIsNone(self.server.proc.poll(), "the server died")
        self.assertEqual(self.server.request("GET", "/healthz")[0], 200)

    def post(self, path, body):
        status, text = self.server.request("POST", path, body, {"Content-Type": "application/json"})
        self.assert_alive()
        return status, text

    def test_exclusive_with_the_default_policy(self):
        status, text = self.post("/v1/jobs?dry_run=1", {"job": "x", "gpus": 8, "exclusive": True})
        self.assertEqual(status, 200, text)
        placed = json.loads(text)
        self.assertEqual(len(placed["gpus"]), 8)
        self.assertEqual(len({g["node"] for g in placed["gpus"]}), 1, "8 exclusive GPUs fill one whole node")
        status, text = self.post("/v1/jobs?dry_run=1", {"job": "x", "gpus": 4, "exclusive": True})
        self.assertEqual(status, 400, text)
        self.assertIn("--gpus-per-node", text)

    def test_a_product_of_degrees_that_wraps(self):
        for body in ({"gpus": 8, "tp": 536870912, "cp": 536870912, "ep": 64},
                     {"gpus": 8, "tp": 65536, "pp": 65536, "kind": "inference"},
                     {"gpus": 8, "tp": 1 << 29, "cp": 8, "ep": 1, "pp": 1}):
            status, text = self.post("/v1/jobs?dry_run=1", body)
            self.assertEqual(status, 400, f"{body}: {text}")

    def test_nodes_times_gpus_per_node_that_wraps(self):
        for nodes in (536870913, 536870912):
            status, text = self.post("/v1/jobs?dry_run=1", {"nodes": nodes, "gpus_per_node": 8})
            self.assertEqual(status, 422, text)
            self.assertRegex(text, r"more GPUs than|more than \d+ GPUs|needs \d+ GPUs")

    def test_a_value_nested_100000_deep(self):
        deep = "[" * 100000 + "]" * 100000
        for path, body in (("/v1/jobs?dry_run=1", '{"job":' + deep + ',"gpus":1}'),
                           ("/v1/jobs", '{"job":' + deep + ',"gpus":1}'),
                           ("/v1/generate", '{"engine":{"name":"k8s","params":{"blockSizes":' + deep + '}}}'),
                           ("/v1/cost", '{"gpus":' + deep + '}'),
                           ("/v1/route", '{"tokens":' + deep + '}'),
                           ("/v1/kv-events", deep)):
            status, text = self.post(path, body)
            self.assertEqual(status, 400, f"{path}: {text[:300]}")
            self.assertIn("request body:1:", text)
            self.assertIn("nested more than", text)
            self.assertLess(len(text), 1000)

    def test_a_deep_but_accepted_value_is_quoted_by_its_type_only(self):
        status, text = self.post("/v1/jobs?dry_run=1", '{"job":' + "[" * 100 + "]" * 100 + ',"gpus":1}')
        self.assertEqual(status, 400, text)
        self.assertIn("an array of 1 element", text)

    def test_repeated_keys_are_refused_with_their_position(self):
        status, text = self.post("/v1/jobs?dry_run=1", '{"gpus":1,\n "gpus":8}')
        self.assertEqual(status, 400, text)
        self.assertIn("request body:2:2: key 'gpus' repeated", text)

    def test_wrong_types_and_huge_numbers_in_generate_and_cost_are_400(self):
        cases = [("/v1/generate", {"engine": {"name": 7}}),
                 ("/v1/generate", {"engine": {"name": "k8s", "params": {"blockSizes": [1e400]}}}),
                 ("/v1/generate", {"engine": {"name": "slurm", "params": {"blockSizes": ["x"]}}}),
                 ("/v1/generate", {"engine": {"name": "slurm", "params": {"plugin": 3}}}),
                 ("/v1/generate", {"engine": []}),
                 ("/v1/cost", {"gpus": "dgx-h100-[001-002]", "bytes": 1e400}),
                 ("/v1/cost", {"gpus": "dgx-h100-[001-002]", "bytes": "8G", "collective": 1}),
                 ("/v1/cost", {"gpus": "dgx-h100-[001-002]", "bytes": "8G", "algorithm": []}),
                 ("/v1/cost", {"gpus": "dgx-h100-[001-002]", "bytes": True}),
                 ("/v1/cost", {"gpus": 5, "bytes": 1})]
        for path, body in cases:
            text = json.dumps(body).replace("Infinity", "1e400")
            status, answer = self.post(path, text)
            self.assertEqual(status, 400, f"{path} {text}: {answer}")
        for path in ("/v1/generate", "/v1/cost", "/v1/jobs?dry_run=1"):
            status, answer = self.post(path, b'{"a":"\xff\xfe"}')
            self.assertEqual(status, 400, f"{path}: {answer}")
            self.assertIn("request body:1:", answer)

    def test_a_seeded_fuzz_of_bodies_gets_no_500(self):
        """A bounded mutation fuzz (600 bodies, seed 35) of the JSON endpoints' bodies."""
        rng = random.Random(35)
        seeds = {"/v1/jobs?dry_run=1": {"job": "f", "gpus": 8, "tp": 8, "policy": "topo"},
                 "/v1/cost": {"gpus": "dgx-h100-[001-002]", "collective": "allreduce", "bytes": "1G"},
                 "/v1/generate": {"engine": {"name": "slurm", "params": {"plugin": "topology/block",
                                                                          "blockSizes": [2, 4]}}}}
        odd = [None, True, -1, 0, 1 << 31, 1 << 63, -(1 << 63), 1.5, "1e400", "", "\u00ff", [], {}, [1], {"a": 1},
               "x" * 300, 2 ** 70]
        failures = []
        for i in range(600):
            path = rng.choice(sorted(seeds))
            body = json.loads(json.dumps(seeds[path]))
            target = body
            while isinstance(target, dict) and target and rng.random() < 0.5:
                k = rng.choice(sorted(target))
                if isinstance(target[k], dict):
                    target = target[k]
                else:
                    break
            if isinstance(target, dict) and target:
                target[rng.choice(sorted(target))] = rng.choice(odd)
            text = json.dumps(body).replace('"1e400"', "1e400")
            if rng.random() < 0.1:
                text = text[: rng.randrange(len(text))]
            status, answer = self.server.request("POST", path, text)
            if status >= 500:
                failures.append((path, text[:200], status, answer[:200]))
        self.assert_alive()
        self.assertEqual(failures, [])


class CrashFlags(unittest.TestCase):
    def test_place_exclusive_with_topo_exits_cleanly(self):
        r = run_cli("place", "--cluster", H100x8, "--gpus", "8", "--exclusive")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_cli("place", "--cluster", H100x8, "--gpus", "4", "--exclusive")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--gpus-per-node", r.stderr)

    def test_place_with_wrapping_degrees_and_nodes_exits_1(self):
        for args in (["--gpus", "8", "--tp", "536870912", "--cp", "536870912", "--ep", "64"],
                     ["--nodes", "536870913", "--gpus-per-node", "8"]):
            r = run_cli("place", "--cluster", H100x8, *args)
            self.assertIn(r.returncode, (1, 2), f"{args}: {r.returncode} {r.stderr}")
            self.assertRegex(r.stderr, r"more GPUs than|more than \d+ GPUs|needs \d+ GPUs")


def raw_exchange(port, data, read_timeout=10.0):
    """Sends `data` on a fresh connection and reads until the server closes it (bounded by
    `read_timeout`); the bytes received, and whether the server closed the connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = b""
        closed = False
        deadline = time.monotonic() + read_timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            got += chunk
        return got, closed
    finally:
        s.close()


def status_of(reply):
    line = reply.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = line.split(" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Framing(unittest.TestCase):
    """Request smuggling forms: 400 and the connection closed, decided from the headers
    alone; chunked bodies bounded by --max-body as they arrive; header floods cut off."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.server = Server(H100x8, "sqlite:" + os.path.join(cls.dir.name, "s.db"), cls.dir.name)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0
        cls.dir.cleanup()

    def exchange(self, head, body=b""):
        reply, closed = raw_exchange(self.server.port, head.encode() + body)
        self.assertIsNone(self.server.proc.poll(), "the server died")
        return reply, closed

    def test_conflicting_and_malformed_lengths(self):
        body = b'{"gpus":1}'
        cases = [
            ("two Content-Length", f"POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                                   f"Content-Length: 2\r\n\r\n", 400),
            ("Content-Length: 2a", "POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2a\r\n\r\n", 400),
            ("Content-Length: -1", "POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
            ("space before the colon", "POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n"
                                       f"Content-Length: {len(body)}\r\n\r\n", 400),
            ("both framings", "POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                              f"Content-Length: {len(body)}\r\n\r\n", 400),
            ("unknown encoding", "POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
             400),
            ("a chunked GET", "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ("a GET with a body", f"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n", 400),
        ]
        for name, head, code in cases:
            reply, closed = self.exchange(head, body)
            self.assertEqual(status_of(reply), code, f"{name}: {reply[:300]!r}")
            self.assertTrue(closed, f"{name}: the connection stayed open")
            self.assertIn(b'"error"', reply, name)

    def test_a_small_chunked_body_is_read(self):
        body = b'{"gpus":8,"tp":8}'
        head = "POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        reply, _ = self.exchange(head, chunked)
        self.assertEqual(status_of(reply), 200, reply[:300])
        self.assertIn(b'"gpus"', reply)

    def flood(self, head, piece):
        """serve_attack.flood on this server; then the server must be alive and answering."""
        from serve_attack import flood
        sent, reply, closed = flood(self.server.port, head, piece)
        self.assertIsNone(self.server.proc.poll(), "the server died")
        self.assertEqual(self.server.request("GET", "/healthz")[0], 200)
        return sent, reply, closed

    def test_a_chunked_flood_is_cut_off_at_the_body_limit(self):
        # 1 MiB chunks for up to 20 s: the server reads up to --max-body (1 MiB here), answers
        # 413 and closes, so the sender fails after about the limit plus the sockets' buffers
        # (before the move to cpp-httplib 0.53, a chunked body was read whole: 1 GB sent grew
        # the server to 2 GB).
        sent, reply, closed = self.flood(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                                         b"100000\r\n" + b"[" * 0x100000 + b"\r\n")
        self.assertTrue(closed, f"the connection stayed open for 20 s ({sent} bytes sent)")
        self.assertLess(sent, 64 << 20, "the server read far past --max-body")
        self.assertEqual(status_of(reply), 413, reply[:300])
        self.assertIn(b"1048576", reply)

    def test_a_header_flood_is_cut_off(self):
        # 4 kB header lines without end: the library stops at 100 fields; the answer is 400
        # and the connection ends (before, 768 MB of header lines grew the server to 1.57 GB).
        line = b"X-Flood: " + b"a" * 4000 + b"\r\n"
        sent, reply, closed = self.flood(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\n", line * 16)
        self.assertTrue(closed, f"the connection stayed open for 20 s ({sent} bytes sent)")
        self.assertLess(sent, 64 << 20, "the server read far past its header limits")
        self.assertEqual(status_of(reply), 400, reply[:300])
        self.assertIn(b"header fields", reply)
        self.assertEqual(reply.count(b"HTTP/1.1 "), 1, "more than one answer: the flood was read as new requests")

    def test_a_body_over_the_limit_is_refused_before_it_is_read(self):
        reply, closed = self.exchange("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")
        self.assertEqual(status_of(reply), 413, reply[:300])
        self.assertIn(b"1000000000", reply)
        self.assertTrue(closed)

    def test_form_encoded_over_8k_names_the_real_limit(self):
        status, text = self.server.request("POST", "/v1/jobs", "x" * 9000,
                                           {"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 413, text)
        self.assertIn("8192", text)
        self.assertIn("application/json", text)


class Tokens(unittest.TestCase):
    TOKEN = "s3cret-token"

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.token_file = os.path.join(cls.dir.name, "token")
        with open(cls.token_file, "w") as f:
            f.write(cls.TOKEN + "\n")
        os.chmod(cls.token_file, 0o600)
        cls.server = Server(H100x8, "sqlite:" + os.path.join(cls.dir.name, "s.db"), cls.dir.name,
                            extra=["--token-file", cls.token_file, "--k8s-extender", "--url-prefix", "/toposched",
                                   "--extender-listen", "127.0.0.1:0"])
        with open(cls.server.log_path) as f:
            cls.log = f.read()
        m = re.search(r"extender verbs are served on http://127\.0\.0\.1:(\d+)", cls.log)
        cls.extender_port = int(m.group(1)) if m else None

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0
        cls.dir.cleanup()

    def auth(self):
        return {"Authorization": f"Bearer {self.TOKEN}", "Content-Type": "application/json"}

    def test_every_decision_needs_the_token(self):
        decisions = [("POST", "/v1/jobs", {"job": "a", "gpus": 8}), ("POST", "/v1/jobs?dry_run=1", {"gpus": 8}),
                     ("POST", "/v1/cost", {"gpus": "dgx-h100-[001-002]", "bytes": "1G"}),
                     ("POST", "/v1/generate", {"engine": {"name": "k8s"}}),
                     ("POST", "/v1/route", {"tokens": [1, 2, 3]}), ("POST", "/v1/kv-events", []),
                     ("POST", "/toposched/filter", {}), ("DELETE", "/v1/jobs/a", None)]
        for method, path, body in decisions:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {self.TOKEN}x"},
                            {"Authorization": self.TOKEN}):
                status, text = self.server.request(method, path, body, headers)
                self.assertEqual(status, 401, f"{method} {path} {headers}: {text}")
        self.assertEqual(json.loads(self.server.request("GET", "/v1/jobs")[1])["jobs"], [])
        self.assertEqual(self.server.request("GET", "/v1/cluster")[0], 200)
        self.assertEqual(self.server.request("POST", "/v1/jobs?dry_run=1", {"gpus": 8}, self.auth())[0], 200)
        self.assertEqual(self.server.request("POST", "/v1/cost", {"gpus": "dgx-h100-[001-002]", "bytes": "1G"},
                                             self.auth())[0], 200)

    def test_the_token_is_checked_before_the_body_is_read(self):
        reply, closed = raw_exchange(self.server.port, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\n"
                                                       b"Content-Length: 900000\r\n\r\n")
        self.assertEqual(status_of(reply), 401, reply[:300])
        self.assertTrue(closed)

    def test_a_nul_in_the_token_and_a_second_header(self):
        for extra, code in ((f"Authorization: Bearer {self.TOKEN}\0junk\r\n", 400),
                            (f"Authorization: Bearer {self.TOKEN}\r\nAuthorization: Bearer other\r\n", 400),
                            (f"Authorization: Bearer {self.TOKEN}\r\n", 200)):
            head = ("POST /v1/jobs?dry_run=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 10\r\n"
                    + extra + "\r\n")
            reply, _ = raw_exchange(self.server.port, head.encode() + b'{"gpus":1}')
            self.assertEqual(status_of(reply), code, f"{extra!r}: {reply[:300]!r}")

    def test_the_extender_is_on_its_own_listener_only(self):
        self.assertIsNotNone(self.extender_port, self.log)
        args = {"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
                "NodeNames": ["dgx-h100-001"]}
        c = http.client.HTTPConnection("127.0.0.1", self.extender_port, timeout=60)
        try:
            c.request("POST", "/toposched/filter", body=json.dumps(args), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            self.assertEqual(r.status, 200, r.read())
            r.read()
            c.request("POST", "/v1/jobs", body='{"gpus":1}', headers={"Content-Type": "application/json"})
            r = c.getresponse()
            self.assertEqual(r.status, 404, "the API is not on the extender listener")
            r.read()
        finally:
            c.close()
        # On the main listener the verbs do not exist (with the token: 404).
        self.assertEqual(self.server.request("POST", "/toposched/filter", args, self.auth())[0], 404)


class TokenFiles(unittest.TestCase):
    def start(self, d, token_file):
        return run_cli("serve", "--cluster", H100x8, "--store", "sqlite:" + os.path.join(d, "s.db"),
                       "--listen", "127.0.0.1:0", "--token-file", token_file, timeout=60)

    def test_bad_token_files_are_refused_at_start(self):
        with tempfile.TemporaryDirectory() as d:
            cases = {"two-lines": (b"abc\ndef\n", "more than one line"), "nul": (b"abc\0def", "control character"),
                     "empty": (b"\n", "empty"), "spaces": (b"abc def", "space")}
            for name, (content, message) in cases.items():
                path = os.path.join(d, name)
                with open(path, "wb") as f:
                    f.write(content)
                r = self.start(d, path)
                self.assertEqual(r.returncode, 2, f"{name}: {r.stderr}")
                self.assertIn(message, r.stderr, name)
            r = self.start(d, "/dev/zero")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("regular file", r.stderr)

    def test_a_world_readable_token_file_is_warned_about(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "token")
            with open(path, "w") as f:
                f.write("tok\n")
            os.chmod(path, 0o644)
            with Server(H100x8, "sqlite:" + os.path.join(d, "s.db"), d, extra=["--token-file", path]) as s:
                with open(s.log_path) as f:
                    self.assertIn("readable by every user", f.read())


class OneOwnerPerStore(unittest.TestCase):
    def test_a_second_server_and_an_import_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            store = "sqlite:" + os.path.join(d, "s.db")
            with Server(H100x8, store, d) as s:
                self.assertEqual(s.request("POST", "/v1/jobs", {"job": "a", "gpus": 8})[0], 201)
                r = run_cli("serve", "--cluster", H100x8, "--store", store, "--listen", "127.0.0.1:0", timeout=60)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("the store is in use by another process", r.stderr)
                state = os.path.join(d, "state.json")
                p = run_cli("place", "--cluster", H100x8, "--gpus", "8", "--job", "b", "--save-state", state)
                self.assertEqual(p.returncode, 0, p.stderr)
                r = run_cli("state", "import", "--cluster", H100x8, "--store", store, state)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("the store is in use by another process", r.stderr)
                self.assertEqual([j["job"] for j in json.loads(s.request("GET", "/v1/jobs")[1])["jobs"]], ["a"])
            # Once the server stopped, the store is free again.
            r = run_cli("state", "import", "--cluster", H100x8, "--store", store, state)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_lock_goes_with_a_killed_server(self):
        with tempfile.TemporaryDirectory() as d:
            store = "sqlite:" + os.path.join(d, "s.db")
            s = Server(H100x8, store, d)
            s.kill9()
            with Server(H100x8, store, d) as again:
                self.assertEqual(again.request("GET", "/healthz")[0], 200)


class GenerateFlood(unittest.TestCase):
    def test_a_generate_flood_is_bounded(self):
        cluster = "preset:dgx-h100?nodes=2048"
        with tempfile.TemporaryDirectory() as d, Server(cluster, "sqlite:" + os.path.join(d, "s.db"), d) as s:
            base = rss_mb(s.proc.pid)
            statuses = {}
            conn = s.conn()
            body = json.dumps({"engine": {"name": "graph"}})
            deadline = time.monotonic() + 60
            for _ in range(400):
                if time.monotonic() > deadline:
                    break
                conn.request("POST", "/v1/generate", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                statuses[r.status] = statuses.get(r.status, 0) + 1
            conn.close()
            self.assertIn(503, statuses, f"no request was refused: {statuses}")
            self.assertEqual(set(statuses) - {202, 503}, set(), statuses)
            self.assertLessEqual(statuses.get(202, 0), 400)
            self.assertLess(rss_mb(s.proc.pid) - base, 512, statuses)


class Starvation(unittest.TestCase):
    """200 slowloris connections (one header byte a second) and 64 keep-alive clients (a
    dry run every 4 s) once held every worker of a fixed pool: no /healthz was answered in
    30 s. Each connection now has its own thread, so a probe on a fresh connection is
    answered while they hold on. The bound asserted is the probe's 5 s time-out (no probe
    may go unanswered); the latencies are printed, and the p99 of a 30 s Release run is the
    figure in docs/performance.md."""

    def test_slowloris_and_busy_keep_alives_do_not_starve_a_fresh_client(self):
        from serve_attack import attack, percentile
        with tempfile.TemporaryDirectory() as d, Server(H100x8, "sqlite:" + os.path.join(d, "s.db"), d) as s:
            latencies = attack(s.port, slow=200, busy=64, seconds=10, probe_timeout=5.0)
            self.assertIsNone(s.proc.poll(), "the server died")
            unanswered = sum(1 for x in latencies if x is None)
            self.assertGreaterEqual(len(latencies), 5, "the prober made too few probes to say anything")
            self.assertEqual(unanswered, 0, f"{unanswered} of {len(latencies)} /healthz probes got no answer in 5 s")
            print(f"{len(latencies)} probes under 200 slowloris + 64 keep-alives: p50 "
                  f"{percentile(latencies, 50) * 1000:.1f} ms, p99 {percentile(latencies, 99) * 1000:.1f} ms",
                  file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
