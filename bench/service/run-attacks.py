#!/usr/bin/env python3
"""Figures of `toposched serve` under the attacks of issue 35 (docs/performance.md,
"Service under attack"): a Release server on loopback, one attack after another, the
server's peak resident memory (VmHWM) after each, and /healthz latency under starvation.

    bench/service/run-attacks.py build/release/toposched [--seconds 30]

1. starvation: 200 slowloris connections (a header byte a second) + 64 keep-alive clients
   (a dry run every 4 s) for --seconds, a fresh GET /healthz every 0.25 s: p50/p99/max;
2. chunked flood: 1 MiB chunks for 20 s (or until the server closes);
3. header flood: 4 kB header lines for 20 s (or until the server closes);
4. generate flood: 1,100 POST /v1/generate in a row on an 8,192-node cluster (a second
   server), answered 202 or 503, and the peak 30 s later (the worker runs the accepted ones).
Every socket and thread ends by its deadline; each server is stopped by its PID."""
import argparse
import http.client
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))


def peak_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def generate_flood(port, count=1100):
    statuses = {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"engine": {"name": "graph"}})
    for _ in range(count):
        conn.request("POST", "/v1/generate", body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        statuses[r.status] = statuses.get(r.status, 0) + 1
    conn.close()
    return statuses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    os.environ["TOPOSCHED"] = os.path.abspath(a.binary)
    import serve_harness  # noqa: E402  (reads TOPOSCHED)
    from serve_attack import attack, flood, percentile  # noqa: E402
    with tempfile.TemporaryDirectory() as d:
        s = serve_harness.Server("preset:dgx-h100?nodes=8", "sqlite:" + os.path.join(d, "s.db"), d)
        try:
            print(f"started: peak RSS {peak_mb(s.proc.pid):.0f} MB")
            lat = attack(s.port, slow=200, busy=64, seconds=a.seconds, probe_timeout=5.0)
            ok = [x for x in lat if x is not None]
            line = f"starvation ({a.seconds:.0f} s): {len(lat)} probes, {len(ok)} answered within 5 s"
            if ok:
                line += (f"; p50 {percentile(ok, 50) * 1e3:.1f} ms, p99 {percentile(ok, 99) * 1e3:.1f} ms, "
                         f"max {max(ok) * 1e3:.1f} ms")
            print(f"{line}; peak RSS {peak_mb(s.proc.pid):.0f} MB")
            sent, _, closed = flood(s.port, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                                 b"100000\r\n" + b"[" * 0x100000 + b"\r\n")
            print(f"chunked flood: {sent / 2**20:.1f} MiB sent, closed by the server: {closed}; "
                  f"peak RSS {peak_mb(s.proc.pid):.0f} MB")
            line4k = b"X-Flood: " + b"a" * 4000 + b"\r\n"
            sent, _, closed = flood(s.port, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\n", line4k * 16)
            print(f"header flood: {sent / 2**20:.1f} MiB sent, closed by the server: {closed}; "
                  f"peak RSS {peak_mb(s.proc.pid):.0f} MB")
        finally:
            s.stop()
        g = serve_harness.Server("preset:dgx-h100?nodes=8192", "sqlite:" + os.path.join(d, "g.db"), d)
        try:
            base = peak_mb(g.proc.pid)
            statuses = generate_flood(g.port)
            after = peak_mb(g.proc.pid)
            time.sleep(30)  # the accepted requests run on the server's worker meanwhile
            print(f"generate flood (8,192 nodes, 1,100 requests): {statuses}; peak RSS {base:.0f} MB at start, "
                  f"{after:.0f} MB after the requests, {peak_mb(g.proc.pid):.0f} MB 30 s later")
        finally:
            g.stop()


if __name__ == "__main__":
    main()
