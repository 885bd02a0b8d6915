"""HA acceptance 1: three etcd members, two `toposched serve` replicas; kill -9 the leader
under load, ten times. After every failover: the other replica leads, every acknowledged
job is present with the GPUs it was acknowledged with, nothing unacknowledged is present,
and no GPU is owned twice. The time from the kill until the new leader acknowledges a
mutation is measured and printed (the figure in docs/performance.md; bound: TTL + 2 s).
Also: a follower answers a mutation with 503 not_leader naming the leader, and serves reads."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import EtcdCluster, etcd_available  # noqa: E402
from ha_harness import Load, Replicas, check_state, request  # noqa: E402

TTL = 2
FAILOVERS = int(os.environ.get("TOPOSCHED_HA_FAILOVERS", "10"))
# How long a failover may take before the test calls it lost: the time is measured, not
# asserted (the bound is TTL + 2 s in an idle Release run, docs/performance.md), so this only
# has to tell "slow on a loaded CI machine" (CI once saw no acknowledgement 12 s after a kill
# in round 10 of 10, the rest of the suite running beside it at -j2) from "never".
ACK_WITHIN_S = TTL + 30


@unittest.skipIf(etcd_available(), etcd_available() or "")
class Failover(unittest.TestCase):
    def test_follower_redirects_and_serves_reads(self):
        with EtcdCluster(3) as etcd, Replicas(etcd, count=2, ttl=TTL) as reps:
            leader = reps.wait_leader()
            follower = 1 - leader
            # The follower learns who leads from etcd's election key a moment after the leader
            # wins; until then it answers "unavailable" rather than redirecting.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                status, ready = request(reps.ports[follower], "GET", "/readyz")
                if ready.get("leader") == reps.url(leader):
                    break
                time.sleep(0.05)
            status, body = request(reps.ports[leader], "POST", "/v1/jobs", {"job": "a", "gpus": 8})
            self.assertEqual(status, 201, body)
            status, body = request(reps.ports[follower], "POST", "/v1/jobs", {"job": "b", "gpus": 8})
            self.assertEqual(status, 503, body)
            self.assertEqual(body["error"]["code"], "not_leader")
            self.assertEqual(body["leader"], reps.url(leader))
            self.assertIn(reps.url(leader), body["error"]["message"])
            status, body = request(reps.ports[follower], "DELETE", "/v1/jobs/a")
            self.assertEqual(status, 503, body)
            # The follower's copy catches up (it polls etcd every 200 ms).
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and "a" not in reps.get_jobs(follower):
                time.sleep(0.05)
            self.assertEqual(reps.get_jobs(follower), reps.get_jobs(leader))
            status, ready = request(reps.ports[follower], "GET", "/readyz")
            self.assertEqual((status, ready.get("role"), ready.get("leader")), (200, "follower", reps.url(leader)))

    def test_kill_leader_under_load_ten_times(self):
        failover_s = []
        with EtcdCluster(3) as etcd, Replicas(etcd, count=2, ttl=TTL) as reps:
            reps.wait_leader()
            load = Load(reps, threads=3)
            load.start()
            try:
                for round_ in range(FAILOVERS):
                    leader = reps.wait_leader()
                    before = load.acked_count()
                    deadline = time.monotonic() + 10
                    while load.acked_count() < before + 20 and time.monotonic() < deadline:
                        time.sleep(0.02)
                    self.assertGreaterEqual(load.acked_count(), before + 20, "no progress under load")
                    killed_at = time.monotonic()
                    reps.kill(leader)
                    new = reps.wait_leader(timeout_s=ACK_WITHIN_S, exclude=leader)
                    # Failover ends when the new leader acknowledges a mutation.
                    while time.monotonic() < killed_at + ACK_WITHIN_S:
                        with load.lock:
                            first = min((a.received for a in load.acks if a.replica == new and a.sent > killed_at),
                                        default=None)
                        if first is not None:
                            break
                        time.sleep(0.01)
                    if first is None:
                        with load.lock:
                            refusals = [(st, rep) for r, st, rep in load.errors if r == new][-5:]
                        self.fail(f"round {round_}: the new leader (replica {new}) acknowledged nothing in "
                                  f"{ACK_WITHIN_S} s; its last refusals: {refusals}\n{reps.log_tail(new)}")
                    failover_s.append(first - killed_at)
                    load.pause()  # nothing in flight while the lists are compared
                    problems = check_state(reps.get_jobs(new), load)
                    load.resume()
                    self.assertEqual(problems, [], f"after failover {round_ + 1}")
                    reps.start(leader)  # back as a follower
                    reps.wait_up(leader)
            finally:
                load.stop()
            final = reps.wait_leader()
            self.assertEqual(check_state(reps.get_jobs(final), load), [])
        # A measurement, not an assertion (tests never assert on wall-clock time): the figure
        # for docs/performance.md comes from this line in a Release run.
        print(f"failover after kill -9 of the leader (TTL {TTL} s), {len(failover_s)} rounds: "
              f"mean {sum(failover_s) / len(failover_s):.2f} s, max {max(failover_s):.2f} s, "
              f"all: {' '.join(f'{x:.2f}' for x in failover_s)}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
