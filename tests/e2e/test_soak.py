"""The short, seeded version of `make soak` (tests/soak/soak.py): a few seconds of churn per
store with crashes between checks, and an event log kept to 50 entries. Each check must find
every acknowledged job with its GPUs, no GPU twice, the free count right, the follower in
step (etcd) and the log trimmed to exactly 50 entries."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from etcd_harness import etcd_available  # noqa: E402

SOAK = os.path.join(HERE, "..", "soak", "soak.py")
KEEP = 50


def soak(store: str) -> dict:
    proc = subprocess.run([sys.executable, SOAK, "--store", store, "--seconds", "12", "--event-every", "3",
                           "--seed", "7", "--threads", "3", "--keep", str(KEEP)],
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(lines) != 1:
        raise AssertionError(f"soak.py --store {store} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}")
    return json.loads(lines[0])


class ShortSoak(unittest.TestCase):
    def check(self, summary: dict) -> None:
        self.assertEqual(summary["problems"], [])
        self.assertGreaterEqual(sum(summary["events"].values()), 2, summary)
        self.assertGreaterEqual(summary["checks"], 3, summary)
        self.assertEqual(summary["most_events_kept"], KEEP, f"the event log was not trimmed to {KEEP}: {summary}")

    def test_sqlite_kill9_and_restart(self):
        self.check(soak("sqlite"))

    @unittest.skipIf(etcd_available(), etcd_available() or "")
    def test_etcd_replicas_and_members_crash(self):
        self.check(soak("etcd"))


if __name__ == "__main__":
    unittest.main()
