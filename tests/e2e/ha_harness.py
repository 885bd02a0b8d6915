"""Replicas of `toposched serve` on a throw-away etcd cluster, and a load that records what
was acknowledged, for the HA end-to-end tests (tests/e2e/test_ha_*.py).

    with EtcdCluster(3) as etcd, Replicas(etcd, count=2, ttl=2) as reps:
        leader = reps.wait_leader()
        load = Load(reps); load.start() ... load.stop()
        check_state(reps.get_jobs(leader), load)

Every replica is a direct child started here and killed by its PID (SIGKILL for a crash,
SIGTERM to stop), on success and on failure alike. Ports are picked free on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, NamedTuple, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import EtcdCluster  # noqa: E402
from proc_harness import free_ports, log_tail, stop_processes  # noqa: E402

TOPOSCHED = os.environ.get("TOPOSCHED", "toposched")
CLUSTER = "preset:dgx-h100?nodes=128"  # 1024 GPUs: room for the jobs orphaned by kills (placed, never answered)


def request(port: int, method: str, path: str, body: Optional[dict] = None,
            timeout: float = 5.0) -> Tuple[int, dict]:
    """One HTTP call; (status, JSON body) or (0, {"error": ...}) when nothing came back."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json"} if data else {})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"text": raw.decode(errors="replace")}
        return resp.status, parsed
    except (OSError, http.client.HTTPException) as e:
        return 0, {"error": {"code": "transport", "message": str(e)}}
    finally:
        conn.close()


def job_gpus(job: dict) -> List[str]:
    """A job's GPUs as "node:index" in rank order, from the service's job JSON."""
    gpus = sorted(job.get("gpus", []), key=lambda g: g.get("rank", 0) if isinstance(g, dict) else 0)
    return [f"{g['node']}:{g['gpu']}" if isinstance(g, dict) else str(g) for g in gpus]


class Replicas:
    """`count` toposched serve processes sharing one etcd prefix."""

    def __init__(self, etcd: EtcdCluster, count: int = 2, ttl: int = 2,
                 endpoints: Optional[List[str]] = None, cluster: str = CLUSTER,
                 autostart: Optional[List[int]] = None, extra: Optional[List[str]] = None):
        self.etcd = etcd
        self.ttl = ttl
        self.cluster = cluster
        self.ports = free_ports(count)
        # endpoints[i]: the etcd endpoints replica i is given (default: every member).
        self.endpoints = endpoints or [etcd.endpoints()] * count
        self.dir = tempfile.mkdtemp(prefix="toposched-ha-")
        self.procs: List[Optional[subprocess.Popen]] = [None] * count
        self.logs: List[Optional[object]] = [None] * count
        self.autostart = list(range(count)) if autostart is None else autostart
        self.extra = list(extra or [])  # more `serve` arguments for every replica

    def __enter__(self) -> "Replicas":
        try:
            for i in self.autostart:
                self.start(i)
            for i in self.autostart:
                self.wait_up(i)
        except BaseException:
            self.stop_all()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def start(self, i: int) -> None:
        args = [TOPOSCHED, "serve", "--cluster", self.cluster,
                "--store", f"etcd://{self.endpoints[i]}/ha-test",
                "--listen", f"127.0.0.1:{self.ports[i]}", "--advertise", self.url(i),
                "--lease-ttl", str(self.ttl), *self.extra]
        if self.logs[i] is not None:
            self.logs[i].close()
        log = open(os.path.join(self.dir, f"replica{i}.log"), "ab")
        self.logs[i] = log
        self.procs[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

    def wait_up(self, i: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.procs[i].poll() is not None:
                raise RuntimeError(f"replica {i} exited:\n{self.log_tail(i)}")
            status, _ = request(self.ports[i], "GET", "/healthz", timeout=1)
            if status == 200:
                return
            time.sleep(0.05)
        raise RuntimeError(f"replica {i} did not answer /healthz:\n{self.log_tail(i)}")

    def kill(self, i: int) -> None:
        stop_processes([self.procs[i]], signal.SIGKILL, timeout_s=30)
        self.procs[i] = None

    def stop_all(self) -> None:
        stop_processes(self.procs, signal.SIGTERM, timeout_s=10)
        for i in range(len(self.procs)):
            self.procs[i] = None
            if self.logs[i] is not None:
                self.logs[i].close()
                self.logs[i] = None

    def log_tail(self, i: int, lines: int = 30) -> str:
        return log_tail(os.path.join(self.dir, f"replica{i}.log"), lines)

    def role(self, i: int) -> Optional[str]:
        if self.procs[i] is None:
            return None
        status, body = request(self.ports[i], "GET", "/readyz", timeout=1)
        return body.get("role") if status in (200, 503) and isinstance(body, dict) else None

    def leader(self) -> Optional[int]:
        """The replica that says it leads, if exactly one does."""
        leaders = [i for i in range(len(self.ports)) if self.role(i) == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def wait_leader(self, timeout_s: float = 20.0, exclude: Optional[int] = None) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            i = self.leader()
            if i is not None and i != exclude:
                return i
            time.sleep(0.05)
        raise RuntimeError("no leader after %.0f s:\n%s" % (
            timeout_s, "\n".join(self.log_tail(i) for i in range(len(self.ports)))))

    def get_jobs(self, i: int) -> Dict[str, List[str]]:
        status, body = request(self.ports[i], "GET", "/v1/jobs", timeout=10)
        if status != 200:
            raise RuntimeError(f"GET /v1/jobs on replica {i}: {status} {body}")
        jobs = body["jobs"] if isinstance(body, dict) else body
        return {j["job"]: job_gpus(j) for j in jobs}


class Ack(NamedTuple):
    """One acknowledged mutation: the replica that answered, when the request was sent and
    when its answer was received (time.monotonic, client side), the job and the event kind
    the store logs for it ("place" or "release")."""
    replica: int
    sent: float
    received: float
    job: str
    kind: str


class Load:
    """Client threads placing and releasing jobs through the replicas, following a
    `not_leader` 503 to the leader it names. Records, per job id: acknowledged placements
    (with the GPUs answered), acknowledged releases, and ids whose outcome is unknown (no
    answer, or a 5xx that may have followed a commit)."""

    def __init__(self, reps: Replicas, threads: int = 2, prefix: str = "j", follow: bool = True,
                 target: Optional[int] = None):
        self.reps = reps
        self.threads = threads
        self.prefix = prefix
        self.follow = follow
        self.target = target  # send only to this replica (the partition test)
        self.lock = threading.Lock()
        self.placed: Dict[str, List[str]] = {}     # acknowledged and not (acknowledged) released
        self.released: set = set()
        self.unknown: set = set()                   # may or may not be in the store
        self.acks: List[Ack] = []  # one per acknowledged placement or release
        self.last_ack: Dict[str, float] = {}  # job -> when its last placement or release was acknowledged
        self.errors: List[Tuple[int, int, dict]] = []  # (replica, status, body) of refusals
        self._stop = threading.Event()
        self._workers: List[threading.Thread] = []
        self._counter = 0
        self.full_refusals = 0  # placements answered 422 (the cluster full)
        self._paused = False
        self._busy = 0  # requests in flight, guarded by self.lock
        self._idle = threading.Condition(self.lock)

    def start(self) -> None:
        for t in range(self.threads):
            w = threading.Thread(target=self._run, args=(t,), daemon=True)
            w.start()
            self._workers.append(w)

    def stop(self) -> None:
        self._stop.set()
        for w in self._workers:
            w.join(timeout=30)

    def pause(self, timeout_s: float = 30.0) -> None:
        """Holds the workers and waits until no request is in flight, so that a replica's job
        list can be compared with what was acknowledged (bounded wait)."""
        with self._idle:
            self._paused = True
            self._idle.wait_for(lambda: self._busy == 0, timeout=timeout_s)

    def resume(self) -> None:
        with self._idle:
            self._paused = False
            self._idle.notify_all()

    def _enter(self) -> bool:
        with self._idle:
            self._idle.wait_for(lambda: not self._paused or self._stop.is_set(), timeout=1.0)
            if self._paused or self._stop.is_set():
                return False
            self._busy += 1
            return True

    def _leave(self) -> None:
        with self._idle:
            self._busy -= 1
            self._idle.notify_all()

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acks)

    def _next_id(self) -> str:
        with self.lock:
            self._counter += 1
            return f"{self.prefix}{self._counter}"

    def _send(self, replica: int, method: str, path: str, body: Optional[dict]):
        hops = 0
        while True:
            sent = time.monotonic()
            status, reply = request(self.reps.ports[replica], method, path, body, timeout=5)
            received = time.monotonic()
            err = reply.get("error", {}) if isinstance(reply, dict) else {}
            if status == 503 and self.follow and err.get("code") == "not_leader" and hops < 1:
                leader = reply.get("leader", "")
                port = int(leader.rsplit(":", 1)[1]) if leader.count(":") == 2 else None
                if port in self.reps.ports:
                    replica = self.reps.ports.index(port)
                    hops += 1
                    continue
            return replica, status, reply, sent, received

    def _run(self, worker: int) -> None:
        mine: List[str] = []       # acknowledged placements this worker will release
        unsettled: List[str] = []  # ids whose outcome is unknown, released again until answered
        while not self._stop.is_set():
            if not self._enter():
                continue
            try:
                self._one(worker, mine, unsettled)
            finally:
                self._leave()

    @staticmethod
    def _not_sent(status: int, reply: dict) -> bool:
        """Nothing reached the server: the connection was refused (a replica being killed
        or restarting), so nothing was committed."""
        return status == 0 and "Connection refused" in reply.get("error", {}).get("message", "")

    @staticmethod
    def _refused_before_commit(status: int, reply: dict) -> bool:
        err = reply.get("error", {}) if isinstance(reply, dict) else {}
        return status == 503 and err.get("code") in ("not_leader", "unavailable") \
            and "unknown" not in err.get("message", "")

    def _release(self, replica: int, job: str, mine: List[str], unsettled: List[str], settling: bool) -> None:
        """DELETE one job: an acknowledged one (`mine`) or one whose outcome is unknown
        (`settling`). A real client retries a release it got no answer to; so does this one,
        else the jobs of unanswered requests would fill the cluster over the rounds (CI once
        saw 280 jobs held on 1024 GPUs, every placement answered 422 and nothing acknowledged)."""
        r, status, reply, sent, received = self._send(replica, "DELETE", f"/v1/jobs/{job}", None)
        with self.lock:
            if status in (200, 204):
                self.placed.pop(job, None)
                self.unknown.discard(job)
                self.released.add(job)
                self.acks.append(Ack(r, sent, received, job, "release"))
                self.last_ack[job] = received
                return
            self.errors.append((r, status, reply))
            if self._not_sent(status, reply) or self._refused_before_commit(status, reply):
                (unsettled if settling else mine).append(job)  # unchanged: try again later
            elif status in (0, 500, 502, 503, 504):
                self.placed.pop(job, None)  # its release may have committed
                self.unknown.add(job)
                unsettled.append(job)
            # 404 for an unsettled job: never placed, or already released; stays unknown.

    def _one(self, worker: int, mine: List[str], unsettled: List[str]) -> None:
        n = len(self.reps.ports)
        self._i = getattr(self, "_i", 0) + 1
        i = self._i + worker + 1
        replica = self.target if self.target is not None else i % n
        if self.reps.procs[replica] is None:
            time.sleep(0.01)
            return
        if unsettled and i % 2 == 0:
            self._release(replica, unsettled.pop(0), mine, unsettled, settling=True)
            return
        if len(mine) >= 4 or (mine and i % 3 == 0):
            self._release(replica, mine.pop(0), mine, unsettled, settling=False)
            return
        job = self._next_id()
        body = {"job": job, "gpus": (1, 2, 4, 8)[i % 4], "policy": "topo"}
        r, status, reply, sent, received = self._send(replica, "POST", "/v1/jobs", body)
        with self.lock:
            if status == 201:
                self.placed[job] = job_gpus(reply)
                self.acks.append(Ack(r, sent, received, job, "place"))
                self.last_ack[job] = received
                mine.append(job)
            elif status == 422:
                self.full_refusals += 1  # full: a release comes next
            elif self._not_sent(status, reply) or self._refused_before_commit(status, reply):
                self.errors.append((r, status, reply))  # not placed
            elif status in (0, 500, 502, 503, 504):
                self.unknown.add(job)
                unsettled.append(job)
                self.errors.append((r, status, reply))
            else:
                self.errors.append((r, status, reply))
        if status != 201:
            time.sleep(0.01)


def check_state(jobs: Dict[str, List[str]], load: Load, ignore: frozenset = frozenset()) -> List[str]:
    """Problems with a replica's job list against what the load saw acknowledged. Jobs in
    `ignore` may be present or absent (a copy that may lack the last commits), but every GPU
    still has at most one owner."""
    problems = []
    with load.lock:
        for job, gpus in load.placed.items():
            if job in ignore and job not in jobs:
                continue
            if job not in jobs:
                problems.append(f"acknowledged job {job} is missing")
            elif jobs[job] != gpus:
                problems.append(f"job {job} has {jobs[job]}, was acknowledged with {gpus}")
        for job in jobs:
            if job not in load.placed and job not in load.unknown and job not in ignore:
                problems.append(f"job {job} is present but was never acknowledged "
                                f"(or its release was)")
    owner: Dict[str, str] = {}
    for job, gpus in jobs.items():
        for g in gpus:
            if g in owner:
                problems.append(f"GPU {g} owned by {owner[g]} and {job}")
            owner[g] = job
    return problems
