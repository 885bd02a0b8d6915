#!/usr/bin/env python3
"""Soak test of `toposched serve`: hours of place/release churn with crashes in between,
checking after every crash that nothing acknowledged was lost, no GPU has two owners, the
event log stays within --event-log-keep, and the servers' memory stays bounded.

    make soak                                   # both stores, SOAK_SECONDS each (default 900)
    TOPOSCHED=build/release/toposched python3 tests/soak/soak.py --store etcd --seconds 3600

`--store sqlite`: one server on a SQLite file; the events between checks are `kill -9` then
restart, and SIGTERM then restart (whose `GET /v1/jobs` and `GET /v1/fragmentation` must
come back byte-identical). `--store etcd`: three etcd members and two replicas on loopback
(tests/e2e/etcd_harness.py, ha_harness.py); the events are kill -9 of the leader or of the
follower (restarted at once), SIGTERM of the leader, kill -9 of one etcd member (restarted
after a few seconds) and SIGSTOP of one member for longer than the lease. Which event, and
when, comes from --seed; the load never stops for an event, only for the checks.

At every check the load is held until no request is in flight, then:
- the leader's job list holds every acknowledged, unreleased job with the GPUs answered, and
  nothing that was never acknowledged (tests/e2e/ha_harness.py check_state);
- with etcd, the follower's copy equals the leader's within 15 s;
- `GET /v1/fragmentation` counts as free exactly the GPUs no job holds;
- the event log holds at most --event-log-keep entries (read from the SQLite file, or counted
  in etcd through its v3 gateway);
- jobs whose outcome was unknown (the answer was lost in a crash) are looked up and released,
  so the cluster does not fill with orphans over a long run;
- the resident memory of every toposched process is sampled; with --max-rss-mb, a sample
  above it is a failure.

Everything runs on 127.0.0.1, on ports picked free; every wait is bounded; every process
started here is stopped here. Exit status 0 when no check failed. The short seeded version of
this program runs in `make test` (tests/e2e/test_soak.py)."""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from typing import Dict, Iterator, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
if "/" in os.environ.get("TOPOSCHED", ""):
    # The servers run in scratch directories: a relative path (make soak's) must not move.
    os.environ["TOPOSCHED"] = os.path.abspath(os.environ["TOPOSCHED"])
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from etcd_harness import EtcdCluster, etcd_available  # noqa: E402
from ha_harness import CLUSTER, Load, Replicas, check_state, job_gpus, request  # noqa: E402
from proc_harness import stop_processes  # noqa: E402
from serve_harness import Server  # noqa: E402

TOTAL_GPUS = 1024  # CLUSTER: preset:dgx-h100?nodes=128
ETCD_PREFIX = "/ha-test"  # ha_harness.Replicas' store prefix


def rss_mb(pid: int) -> Optional[float]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def etcd_count(endpoint: str, prefix: str) -> int:
    """Keys under `prefix`, counted by etcd (v3 gateway, count_only)."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                       "range_end": base64.b64encode(end.encode()).decode(),
                       "count_only": True}).encode()
    req = urllib.request.Request(f"http://{endpoint}/v3/kv/range", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return int(json.loads(r.read().decode()).get("count", 0))


class OneServer:
    """The `ports`/`procs` view of one SQLite-backed server that ha_harness.Load sends to."""

    def __init__(self, directory: str, keep: int):
        self.dir = directory
        self.store = "sqlite:" + os.path.join(directory, "state.db")
        self.extra = ["--event-log-keep", str(keep)]
        self.server: Optional[Server] = None
        self.ports = [0]
        self.procs = [None]

    def start(self) -> None:
        self.server = Server(CLUSTER, self.store, self.dir, extra=self.extra)
        self.ports[0] = self.server.port
        self.procs[0] = self.server.proc

    def down(self) -> None:
        self.procs[0] = None  # the load idles until start()

    def stop(self) -> None:
        self.down()
        if self.server is not None:
            self.server.stop()
            self.server = None

    def kill9(self) -> None:
        self.down()
        self.server.kill9()
        self.server = None

    def get_jobs(self) -> Dict[str, List[str]]:
        status, body = request(self.ports[0], "GET", "/v1/jobs", timeout=30)
        if status != 200:
            raise RuntimeError(f"GET /v1/jobs: {status} {body}")
        return {j["job"]: job_gpus(j) for j in body["jobs"]}


class Soak:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = random.Random(args.seed)
        self.problems: List[str] = []
        self.events: Counter = Counter()
        self.checks = 0
        self.orphans_released = 0
        self.acknowledged = 0  # mutations answered 201/200 over the run
        self.max_events_kept = 0
        self.rss: Dict[str, float] = {}  # process label -> largest sample (MB)

    # -- shared checks ------------------------------------------------------------------------
    def problem(self, text: str) -> None:
        print(f"soak: PROBLEM: {text}", file=sys.stderr)
        self.problems.append(text)

    def sample_rss(self, label: str, pid: Optional[int]) -> None:
        if pid is None:
            return
        mb = rss_mb(pid)
        if mb is None:
            return
        self.rss[label] = max(self.rss.get(label, 0.0), mb)
        if self.args.max_rss_mb and mb > self.args.max_rss_mb:
            self.problem(f"{label} (pid {pid}) uses {mb:.0f} MB, over --max-rss-mb {self.args.max_rss_mb}")

    def check_jobs(self, jobs: Dict[str, List[str]], load: Load, port: int, what: str) -> None:
        for p in check_state(jobs, load):
            self.problem(f"after {what}: {p}")
        status, frag = request(port, "GET", "/v1/fragmentation", timeout=30)
        owned = sum(len(g) for g in jobs.values())
        if status != 200 or frag.get("free_gpus") != TOTAL_GPUS - owned:
            self.problem(f"after {what}: /v1/fragmentation says {frag.get('free_gpus')} free, "
                         f"the jobs hold {owned} of {TOTAL_GPUS}")

    def check_event_log(self, kept: int, what: str) -> None:
        self.max_events_kept = max(self.max_events_kept, kept)
        if kept > self.args.keep:
            self.problem(f"after {what}: the event log holds {kept} entries, --event-log-keep is {self.args.keep}")

    def release_orphans(self, jobs: Dict[str, List[str]], load: Load, port: int, what: str) -> None:
        """Folds the jobs whose answer was lost into the ledger, then releases the ones that
        exist: no client thread holds them, so nothing else ever would."""
        with load.lock:
            orphans = [j for j in load.unknown if j in jobs]
            for j in orphans:
                load.placed[j] = jobs[j]
            load.unknown.clear()
        for job in orphans:
            status, body = request(port, "DELETE", f"/v1/jobs/{job}", timeout=30)
            if status in (200, 204):
                with load.lock:
                    load.placed.pop(job, None)
                    load.released.add(job)
                self.orphans_released += 1
            else:
                self.problem(f"after {what}: releasing orphan {job}: {status} {body}")

    def schedule(self, choices: List[str]) -> Iterator[str]:
        """Until --seconds have passed: waits 0.5-1.5 x --event-every, then yields an event
        drawn from `choices` (with the seeded generator) and counts it."""
        deadline = time.monotonic() + self.args.seconds
        while time.monotonic() < deadline:
            time.sleep(min(self.rng.uniform(0.5, 1.5) * self.args.event_every, max(0.0, deadline - time.monotonic())))
            event = self.rng.choice(choices)
            self.events[event] += 1
            yield event

    def pause_for_check(self, load: Load) -> None:
        load.pause(timeout_s=60)
        time.sleep(0.05)

    # -- SQLite --------------------------------------------------------------------------------
    def run_sqlite(self) -> None:
        with tempfile.TemporaryDirectory(prefix="toposched-soak-") as d:
            one = OneServer(d, self.args.keep)
            one.start()
            load = Load(one, threads=self.args.threads, prefix="s", follow=False)
            load.start()
            try:
                for event in self.schedule(["kill9", "kill9", "term"]):
                    if event == "kill9":
                        self.sample_rss("serve", one.procs[0].pid if one.procs[0] else None)
                        one.kill9()
                        one.start()
                        self.check_sqlite(one, load, "kill -9")
                    else:
                        self.pause_for_check(load)
                        before = [one.server.request("GET", p) for p in ("/v1/jobs", "/v1/fragmentation")]
                        self.sample_rss("serve", one.procs[0].pid)
                        one.stop()
                        one.start()
                        after = [one.server.request("GET", p) for p in ("/v1/jobs", "/v1/fragmentation")]
                        if after != before or any(status != 200 for status, _ in before):
                            self.problem("after SIGTERM and restart: GET /v1/jobs or /v1/fragmentation differs")
                        load.resume()
                        self.check_sqlite(one, load, "SIGTERM")
                self.check_sqlite(one, load, "the last round")
            finally:
                load.stop()
                self.acknowledged = load.acked_count()
                one.stop()

    def check_sqlite(self, one: OneServer, load: Load, what: str) -> None:
        self.pause_for_check(load)
        try:
            self.checks += 1
            jobs = one.get_jobs()
            self.check_jobs(jobs, load, one.ports[0], what)
            db = sqlite3.connect(f"file:{os.path.join(one.dir, 'state.db')}?mode=ro", uri=True, timeout=30)
            try:
                kept = db.execute("SELECT count(*) FROM events").fetchone()[0]
            finally:
                db.close()
            self.check_event_log(kept, what)
            self.release_orphans(jobs, load, one.ports[0], what)
            self.sample_rss("serve", one.procs[0].pid if one.procs[0] else None)
        finally:
            load.resume()

    # -- etcd ----------------------------------------------------------------------------------
    def run_etcd(self) -> None:
        ttl = 2
        # etcd's default 2 GB quota: between two compactions (every minute) the history of
        # this churn takes a few hundred MB, over the tests' 256 MB.
        with EtcdCluster(3, quota_mb=2048) as etcd, Replicas(etcd, count=2, ttl=ttl,
                                              extra=["--event-log-keep", str(self.args.keep)]) as reps:
            reps.wait_leader(timeout_s=30)
            load = Load(reps, threads=self.args.threads, prefix="e")
            load.start()
            try:
                for event in self.schedule(["kill-leader", "kill-follower", "term-leader", "kill-member",
                                            "pause-member"]):
                    self.sample_replicas(reps)
                    leader = reps.wait_leader(timeout_s=30)
                    if event in ("kill-leader", "kill-follower", "term-leader"):
                        victim = leader if event != "kill-follower" else 1 - leader
                        if event == "term-leader":
                            stop_processes([reps.procs[victim]], signal.SIGTERM, timeout_s=30)
                            reps.procs[victim] = None
                        else:
                            reps.kill(victim)
                        if victim == leader:
                            reps.wait_leader(timeout_s=30, exclude=victim)
                        reps.start(victim)
                        reps.wait_up(victim)
                    elif event == "kill-member":
                        member = self.rng.randrange(3)
                        etcd.kill(member)
                        time.sleep(self.rng.uniform(1.0, 3.0))
                        etcd.start(member)
                        etcd.wait_healthy(timeout_s=60)
                    else:
                        member = self.rng.randrange(3)
                        etcd.pause(member)
                        time.sleep(ttl * 1.5)
                        etcd.resume(member)
                        etcd.wait_healthy(timeout_s=60)
                    self.check_etcd(etcd, reps, load, event)
                self.check_etcd(etcd, reps, load, "the last round")
            finally:
                load.stop()
                self.acknowledged = load.acked_count()

    def sample_replicas(self, reps: Replicas) -> None:
        for i, p in enumerate(reps.procs):
            self.sample_rss(f"replica{i}", p.pid if p is not None and p.poll() is None else None)

    def check_etcd(self, etcd: EtcdCluster, reps: Replicas, load: Load, what: str) -> None:
        self.pause_for_check(load)
        try:
            self.checks += 1
            leader = reps.wait_leader(timeout_s=30)
            jobs = reps.get_jobs(leader)
            self.check_jobs(jobs, load, reps.ports[leader], what)
            if not self.follower_agrees(reps, 1 - leader, jobs, timeout_s=15):
                self.problem(f"after {what}: the follower's copy differs from the leader's after 15 s")
            self.check_event_log(etcd_count(etcd.endpoint(0), ETCD_PREFIX + "/events/"), what)
            self.release_orphans(jobs, load, reps.ports[leader], what)
            self.sample_replicas(reps)
        finally:
            load.resume()

    @staticmethod
    def follower_agrees(reps: Replicas, follower: int, jobs: Dict[str, List[str]], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if reps.get_jobs(follower) == jobs:
                    return True
            except RuntimeError:
                pass  # not answering yet (just restarted): ask again
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def summary(self, store: str) -> dict:
        return {"store": store, "seconds": self.args.seconds, "seed": self.args.seed,
                "events": dict(sorted(self.events.items())), "checks": self.checks,
                "acknowledged": self.acknowledged,
                "orphans_released": self.orphans_released, "most_events_kept": self.max_events_kept,
                "event_log_keep": self.args.keep,
                "max_rss_mb": {k: round(v, 1) for k, v in sorted(self.rss.items())},
                "problems": self.problems}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", choices=["sqlite", "etcd", "both"], default="both",
                        help="which store to soak (default both, one after the other)")
    parser.add_argument("--seconds", type=float, default=900, help="load time per store (default 900)")
    parser.add_argument("--seed", type=int, default=1, help="chooses the events and their moments (default 1)")
    parser.add_argument("--event-every", type=float, default=20,
                        help="mean seconds between two events (default 20)")
    parser.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--keep", type=int, default=2000,
                        help="--event-log-keep given to the servers (default 2000)")
    parser.add_argument("--max-rss-mb", type=float, default=0,
                        help="fail when a toposched process's resident memory exceeds this (default: no limit)")
    args = parser.parse_args(argv)
    # SIGTERM (a CI timeout, kill) unwinds like Ctrl-C, so every process started here is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stores = ["sqlite", "etcd"] if args.store == "both" else [args.store]
    failed = False
    for store in stores:
        if store == "etcd" and etcd_available():
            print(f"soak: etcd: cannot run: {etcd_available()}", file=sys.stderr)
            failed = True
            continue
        soak = Soak(args)
        (soak.run_sqlite if store == "sqlite" else soak.run_etcd)()
        print(json.dumps(soak.summary(store)))
        failed |= bool(soak.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
