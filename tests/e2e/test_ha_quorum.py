"""HA acceptance 2: etcd members die under load. One of three down: the service goes on
acknowledging. Two of three down (no quorum): mutations fail with 503 and a message that
says etcd is the problem, reads keep working on both replicas; when the members come back,
mutations succeed again and nothing acknowledged is lost.

Without a quorum the two copies need not agree: the surviving etcd member learns that an
entry is committed from the leader's next message, so the last commits before the second
member died may be invisible to it (and to the follower that reads it) until quorum returns.
The test asserts what does hold: the last leader's copy has everything acknowledged (copies
never go back in time), and the other copy is a consistent state that differs from it only
in changes acknowledged in the last LAST_COMMITS_S before quorum was lost."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import EtcdCluster, etcd_available  # noqa: E402
from ha_harness import Load, Replicas, check_state, request  # noqa: E402

TTL = 2
# The window in which a commit may still be unconfirmed on the surviving member: etcd's
# heartbeat (100 ms in the harness) with a margin for a loaded machine.
LAST_COMMITS_S = 0.5


def wait_for(pred, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


@unittest.skipIf(etcd_available(), etcd_available() or "")
class Quorum(unittest.TestCase):
    def test_one_member_down_then_two(self):
        with EtcdCluster(3) as etcd, Replicas(etcd, count=2, ttl=TTL) as reps:
            reps.wait_leader()
            load = Load(reps, threads=2)
            load.start()
            try:
                self.assertTrue(wait_for(lambda: load.acked_count() >= 20, 15), "no progress under load")
                # One member of three down: still a quorum.
                etcd.kill(0)
                before = load.acked_count()
                self.assertTrue(wait_for(lambda: load.acked_count() >= before + 50, 20),
                                "the service stopped acknowledging with one etcd member down")
                # Two down: no quorum.
                quorum_lost_at = time.monotonic()
                etcd.kill(1)
                time.sleep(TTL + 1)  # the leader's term runs out; in-flight requests end
            finally:
                load.stop()
            for i in range(2):
                status, body = request(reps.ports[i], "POST", "/v1/jobs", {"job": f"nq{i}", "gpus": 1}, timeout=10)
                self.assertEqual(status, 503, body)
                message = body["error"]["message"]
                self.assertIn("etcd", message, f"the 503 should say etcd is unreachable: {message}")
                with load.lock:
                    load.unknown.add(f"nq{i}")
            # Reads keep working, from each replica's last copy.
            copies = [reps.get_jobs(i) for i in range(2)]
            problems = [check_state(copy, load) for copy in copies]
            self.assertIn([], problems, f"neither copy holds exactly what was acknowledged: {problems}")
            with load.lock:
                last_commits = {job for job, at in load.last_ack.items() if at >= quorum_lost_at - LAST_COMMITS_S}
            for i in range(2):
                self.assertEqual(check_state(copies[i], load, ignore=last_commits), [],
                                 f"replica {i}'s copy is not a consistent earlier state")
            differing = {job for job in copies[0].keys() | copies[1].keys()
                         if copies[0].get(job) != copies[1].get(job)}
            self.assertLessEqual(differing, last_commits,
                                 "the copies differ in more than the last commits before quorum was lost")
            # Quorum returns: mutations succeed again, nothing acknowledged was lost.
            etcd.start(0)
            etcd.start(1)
            etcd.wait_healthy()
            leader = reps.wait_leader(timeout_s=30)
            ok = wait_for(lambda: request(reps.ports[leader], "POST", "/v1/jobs",
                                          {"job": f"back{time.monotonic_ns()}", "gpus": 1})[0] == 201, 15)
            self.assertTrue(ok, "mutations did not succeed again after quorum returned")
            jobs = reps.get_jobs(leader)
            with load.lock:
                for job in list(jobs):
                    if job.startswith("back"):
                        load.unknown.add(job)
            self.assertEqual(check_state(jobs, load), [])


if __name__ == "__main__":
    unittest.main()
