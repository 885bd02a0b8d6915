"""A throw-away etcd cluster for tests: N members (3 by default) on 127.0.0.1.

Every member's data directory, log and WAL live in one temporary directory; client and peer
ports are picked free on 127.0.0.1, so several clusters (and other engineers' tests) can run
side by side. Members are started by this module as direct children and signalled only by
their PID: on success, on failure and on Ctrl-C alike every process it started is stopped
and the directory removed.

Usage (a context manager; see tests/e2e/test_ha*.py):

    from etcd_harness import EtcdCluster
    with EtcdCluster(members=3) as etcd:
        etcd.endpoints()            # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
        etcd.kill(0)                # SIGKILL member 0 (its data directory stays)
        etcd.start(0)               # restart it on the same ports and data
        etcd.pause(1); etcd.resume(1)   # SIGSTOP / SIGCONT: a member that hangs
        etcd.wait_healthy()         # until every running member answers /health

Also runnable: `python3 tests/e2e/etcd_harness.py [--members N]` (scripts/etcd-test-cluster
wraps it) starts a cluster, prints `ETCD_ENDPOINTS=...` and `ETCD_PIDS=...` (the members'
process ids, in endpoint order) on stdout, and runs until Ctrl-C,
SIGTERM or, with --until-stdin-eof, until its standard input closes (how the GoogleTest
suite holds a cluster for exactly as long as it runs). Needs Debian's etcd-server.
Not thread-safe: drive one EtcdCluster from one thread.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_harness import free_ports, log_tail, stop_processes  # noqa: E402

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


class EtcdHarnessError(RuntimeError):
    """The cluster could not be started or did not become healthy; carries the logs."""


def etcd_available() -> Optional[str]:
    """None when a private cluster can run here, else the reason why not (for skipTest)."""
    if not os.access(ETCD, os.X_OK):
        return f"{ETCD} not installed (Debian package etcd-server; run scripts/install-deps)"
    return None


class EtcdCluster:
    """N etcd members on loopback; see the module docstring."""

    def __init__(self, members: int = 3, heartbeat_ms: int = 100, election_ms: int = 1000,
                 keep_dir: bool = False, quota_mb: int = 256):
        if members < 1:
            raise ValueError("members must be >= 1")
        self.count = members
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.keep_dir = keep_dir
        self.quota_mb = quota_mb
        self.dir = tempfile.mkdtemp(prefix="toposched-etcd-")
        ports = free_ports(2 * members)
        self.client_ports = ports[:members]
        self.peer_ports = ports[members:]
        self.names = [f"m{i}" for i in range(members)]
        self.procs: List[Optional[subprocess.Popen]] = [None] * members
        self.logs: List[Optional[object]] = [None] * members
        self.paused = [False] * members

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "EtcdCluster":
        try:
            for i in range(self.count):
                self.start(i)
            self.wait_healthy()
        except BaseException:
            self.stop_all()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()

    def initial_cluster(self) -> str:
        return ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer_ports))

    def start(self, i: int) -> None:
        """Starts (or restarts, on the same ports and data directory) member i."""
        if self.running(i):
            return
        name = self.names[i]
        data = os.path.join(self.dir, name)
        fresh = not os.path.isdir(data)
        args = [
            ETCD, "--name", name, "--data-dir", data,
            "--listen-client-urls", f"http://127.0.0.1:{self.client_ports[i]}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.client_ports[i]}",
            "--listen-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
            "--initial-cluster", self.initial_cluster(),
            "--initial-cluster-state", "new" if fresh else "existing",
            "--initial-cluster-token", os.path.basename(self.dir),
            "--heartbeat-interval", str(self.heartbeat_ms),
            "--election-timeout", str(self.election_ms),
            # Small, quick to start, quiet: a test cluster, not a production one.
            "--quota-backend-bytes", str(self.quota_mb * 1024 * 1024),
            # As docs/service.md asks of production members (there: 1h): without compaction
            # every revision stays, and a long run fills the quota whatever toposched keeps.
            "--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1m",
            "--snapshot-count", "10000",
            "--log-outputs", "stderr",
        ]
        log = open(os.path.join(self.dir, f"{name}.log"), "ab")
        self.logs[i] = log
        self.procs[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.paused[i] = False

    def running(self, i: int) -> bool:
        p = self.procs[i]
        return p is not None and p.poll() is None

    def kill(self, i: int) -> None:
        """SIGKILL member i (a crash); its data directory stays for start(i)."""
        stop_processes([self.procs[i]], signal.SIGKILL, timeout_s=30)
        self.procs[i] = None
        self.paused[i] = False

    def pause(self, i: int) -> None:
        """SIGSTOP member i: it keeps its sockets but answers nothing (a partition)."""
        p = self.procs[i]
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGSTOP)
            self.paused[i] = True

    def resume(self, i: int) -> None:
        p = self.procs[i]
        if p is not None and p.poll() is None and self.paused[i]:
            os.kill(p.pid, signal.SIGCONT)
            self.paused[i] = False

    def stop_all(self) -> None:
        """Stops every member this cluster started (SIGKILL: the data is thrown away, and a
        SIGTERMed leader waits seconds to hand leadership to peers already gone)."""
        stop_processes(self.procs, signal.SIGKILL, timeout_s=10)
        for i in range(self.count):
            self.procs[i] = None
            self.paused[i] = False
            if self.logs[i] is not None:
                self.logs[i].close()
                self.logs[i] = None
        if not self.keep_dir and os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- addresses and health ----------------------------------------------------------------
    def endpoint(self, i: int) -> str:
        return f"127.0.0.1:{self.client_ports[i]}"

    def endpoints(self, members: Optional[List[int]] = None) -> str:
        which = range(self.count) if members is None else members
        return ",".join(self.endpoint(i) for i in which)

    def healthy(self, i: int) -> bool:
        """Member i answers /health with health=true (it is in a cluster with a leader)."""
        try:
            with urllib.request.urlopen(f"http://{self.endpoint(i)}/health", timeout=1) as r:
                return json.loads(r.read().decode()).get("health") == "true"
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def wait_healthy(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        want = [i for i in range(self.count) if self.running(i) and not self.paused[i]]
        while time.monotonic() < deadline:
            if all(self.healthy(i) for i in want):
                return
            for i in want:
                if not self.running(i):
                    raise EtcdHarnessError(f"etcd member {i} exited:\n{self.log_tail(i)}")
            time.sleep(0.1)
        raise EtcdHarnessError("etcd cluster not healthy after %.0f s:\n%s" % (
            timeout_s, "\n".join(self.log_tail(i) for i in want)))

    def log_tail(self, i: int, lines: int = 20) -> str:
        return log_tail(os.path.join(self.dir, f"{self.names[i]}.log"), lines, header=True)

    def read_prefix(self, prefix: str, member: int = 0, timeout_s: float = 5.0) -> List[tuple]:
        """(key, value) of every key under `prefix`, in key order, read from member `member`
        through etcd's v3 JSON gateway (linearizable; at most 10,000 keys)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                           "range_end": base64.b64encode(end.encode()).decode(),
                           "limit": 10000}).encode()
        req = urllib.request.Request(f"http://{self.endpoint(member)}/v3/kv/range", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            reply = json.loads(r.read().decode())
        return [(base64.b64decode(kv["key"]).decode(), base64.b64decode(kv.get("value", "")).decode())
                for kv in reply.get("kvs", [])]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Start a throw-away etcd cluster on 127.0.0.1 (ports picked free, data in "
                    "a temporary directory), print ETCD_ENDPOINTS=..., and stop it on Ctrl-C.")
    parser.add_argument("--members", type=int, default=3, help="cluster size (default 3)")
    parser.add_argument("--until-stdin-eof", action="store_true",
                        help="stop when standard input closes (for test programs)")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args(argv)
    reason = etcd_available()
    if reason:
        print(f"etcd-test-cluster: error: {reason}", file=sys.stderr)
        return 1
    stop = {"now": False}

    def on_signal(_sig, _frame):
        stop["now"] = True
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        with EtcdCluster(members=args.members, keep_dir=args.keep) as etcd:
            print(f"ETCD_ENDPOINTS={etcd.endpoints()}", flush=True)
            print(f"ETCD_PIDS={','.join(str(p.pid) for p in etcd.procs)}", flush=True)
            print(f"etcd-test-cluster: {args.members} members, data in {etcd.dir}; "
                  f"try: etcdctl --endpoints={etcd.endpoints()} member list", file=sys.stderr)
            if args.until_stdin_eof:
                while not stop["now"] and sys.stdin.buffer.read(4096):
                    pass
            else:
                while not stop["now"]:
                    time.sleep(0.2)
    except EtcdHarnessError as e:
        print(f"etcd-test-cluster: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
