#!/usr/bin/env python3
"""Fills a running `toposched serve` to a target occupancy with jobs of 1..64 GPUs
(16 keep-alive client threads), for the load figures of docs/performance.md.

usage: prefill.py PORT TARGET_FRACTION [POLICY]"""
import http.client
import json
import random
import sys
import threading

port, target = int(sys.argv[1]), float(sys.argv[2])
policy = sys.argv[3] if len(sys.argv) > 3 else "topo"


def get(path):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", path)
    return json.loads(c.getresponse().read())


total = get("/v1/cluster")["gpus"]
goal = int(total * target)
lock = threading.Lock()
held = [total - get("/v1/fragmentation")["free_gpus"]]


def run(t):
    rng = random.Random(t)
    c = http.client.HTTPConnection("127.0.0.1", port)
    i = 0
    while True:
        with lock:
            if held[0] >= goal:
                return
        size = rng.choice([1, 2, 4, 8, 8, 16, 32, 64])
        c.request("POST", "/v1/jobs", body=json.dumps({"job": f"fill-{t}-{i}", "gpus": size, "policy": policy}))
        r = c.getresponse()
        r.read()
        i += 1
        if r.status == 201:
            with lock:
                held[0] += size
        elif r.status != 422:
            raise SystemExit(f"prefill: HTTP {r.status}")


threads = [threading.Thread(target=run, args=(t,)) for t in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"prefill: {held[0]} of {total} GPUs held ({100.0 * held[0] / total:.1f}%)")
