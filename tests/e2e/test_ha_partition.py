"""HA acceptance 3: the leader is cut off from etcd while clients keep sending mutations to
BOTH replicas (never following a redirect). The leader talks to a single etcd member (its
--store names only that one); that member is frozen with SIGSTOP (it keeps its sockets and
answers nothing), while the other replica talks to the two others. The old leader must stop
acknowledging before the new one starts: every acknowledgement the old leader's clients
received arrives before the first request the new leader acknowledged was even sent, so
there is no moment at which both replicas acknowledge mutations. That is checked for the
requests sent while the partition lasted: once the member is resumed, the old replica may
lead again, legitimately (etcd 3.4 runs without pre-vote, so the resumed member can force a
Raft election that stalls the new leader's keep-alives past its term, and the old replica
then takes the free seat). Afterwards the state holds every acknowledged job and no GPU
twice."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import EtcdCluster, etcd_available  # noqa: E402
from ha_harness import Load, Replicas, check_state  # noqa: E402

TTL = 2


@unittest.skipIf(etcd_available(), etcd_available() or "")
class Partition(unittest.TestCase):
    def test_partitioned_leader_stops_before_the_new_one_starts(self):
        with EtcdCluster(3) as etcd:
            # Replica 0 sees only member 0; replica 1 sees members 1 and 2.
            eps = [etcd.endpoints([0]), etcd.endpoints([1, 2])]
            with Replicas(etcd, count=2, ttl=TTL, endpoints=eps, autostart=[0]) as reps:
                old, new = 0, 1
                self.assertEqual(reps.wait_leader(timeout_s=20), old)
                reps.start(new)  # joins as a follower
                reps.wait_up(new)
                loads = [Load(reps, threads=2, prefix=f"r{i}-", follow=False, target=i) for i in range(2)]
                for load in loads:
                    load.start()
                try:
                    deadline = time.monotonic() + 15
                    while loads[0].acked_count() < 20 and time.monotonic() < deadline:
                        time.sleep(0.02)
                    self.assertGreaterEqual(loads[0].acked_count(), 20, "no progress before the partition")
                    self.assertEqual(loads[1].acked_count(), 0, "the follower acknowledged a mutation")
                    cut_at = time.monotonic()
                    etcd.pause(0)
                    try:
                        deadline = cut_at + 4 * TTL + 10
                        while loads[1].acked_count() < 20 and time.monotonic() < deadline:
                            time.sleep(0.05)
                    finally:
                        etcd.resume(0)
                        healed_at = time.monotonic()
                    time.sleep(1)
                finally:
                    for load in loads:
                        load.stop()
                self.assertGreaterEqual(loads[1].acked_count(), 20, "the other replica never took over")
                old_acks = [rcv for r, sent, rcv in loads[0].acks if r == old and sent < healed_at]
                new_acks = [(sent, rcv) for r, sent, rcv in loads[1].acks if r == new]
                first_new_sent = min(sent for sent, _ in new_acks)
                last_old_rcv = max(old_acks)
                print(f"partition at +0: old leader's last ack received at +{last_old_rcv - cut_at:.2f} s, "
                      f"new leader's first acknowledged request sent at +{first_new_sent - cut_at:.2f} s",
                      file=sys.stderr)
                late = [rcv for rcv in old_acks if rcv >= first_new_sent]
                self.assertEqual(late, [], "the old leader acknowledged after the new one began to")
                leader = reps.wait_leader()
                jobs = reps.get_jobs(leader)
                merged = Load(reps)
                for load in loads:
                    merged.placed.update(load.placed)
                    merged.unknown |= load.unknown
                self.assertEqual(check_state(jobs, merged), [])


if __name__ == "__main__":
    unittest.main()
