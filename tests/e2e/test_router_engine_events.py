"""End-to-end (issue 33, acceptance 3): `toposched serve` subscribes to vLLM-format KV event
publishers on loopback and its index and routing answers equal those of a second server fed
the same events as Dynamo RouterEvent JSON.

The publishers are written here the way vLLM's ZmqEventPublisher (vllm/distributed/
kv_events.py) frames batches: a PUB socket sending (topic, 8-byte big-endian sequence number,
msgpack EventBatch) and a ROUTER replay socket answering an 8-byte start sequence with
(seq, payload) per buffered batch and (-1, b"") at the end. Three workers cover both
encodings (tagged arrays; maps with "type") and the hash types (32-byte bytes, uint64,
negative int64); each misses one batch: two recover it through the replay socket, the one
without a replay endpoint is cleared. The tokens hashes of the JSON events are computed
here with python3-xxhash, independently of toposched (XXH3-64, seed 1337, u32 LE tokens).
A second test publishes an engine's CPU-offloaded blocks (medium "CPU") and checks that they
steer kv-topo, not kv (docs/router.md, "Host-memory tier")."""
import json
import os
import sys
import threading
import time
import unittest

try:
    import msgpack
    import xxhash
    import zmq
except ImportError:  # a Python outside Debian's (pyenv) does not see python3-zmq & co.
    sys.path.append("/usr/lib/python3/dist-packages")
    import msgpack
    import xxhash
    import zmq

from serve_harness import Server
from toposched_cli import temp_dir

CLUSTER = "preset:dgx-h100?nodes=1"
BLOCK = 4
SEED = 1337
U64 = (1 << 64) - 1


def tokens_hash(tokens):
    return xxhash.xxh3_64_intdigest(b"".join(t.to_bytes(4, "little") for t in tokens), seed=SEED)


def chain(parent, local):
    return xxhash.xxh3_64_intdigest(parent.to_bytes(8, "little") + local.to_bytes(8, "little"), seed=SEED)


def names(tokens):
    """The router's names (Dynamo's chained sequence hashes) of a token sequence's blocks."""
    out = []
    for i in range(0, len(tokens) - len(tokens) % BLOCK, BLOCK):
        local = tokens_hash(tokens[i:i + BLOCK])
        out.append(local if not out else chain(out[-1], local))
    return out


def toks(first, blocks):
    return list(range(first, first + blocks * BLOCK))


class Publisher:
    """One engine's publisher, vLLM's framing; `drop` sequence numbers go only to the replay buffer."""

    def __init__(self, ctx, replay):
        self.pub = ctx.socket(zmq.PUB)
        self.port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.buffer = []
        self.replay = None
        self.stop = threading.Event()
        if replay:
            self.replay = ctx.socket(zmq.ROUTER)
            self.replay_port = self.replay.bind_to_random_port("tcp://127.0.0.1")
            self.thread = threading.Thread(target=self.serve_replay, daemon=True)
            self.thread.start()

    def spec(self, worker):
        s = f"{worker}=tcp://127.0.0.1:{self.port}"
        return s + (f",replay=tcp://127.0.0.1:{self.replay_port}" if self.replay else "")

    def serve_replay(self):
        poller = zmq.Poller()
        poller.register(self.replay, zmq.POLLIN)
        while not self.stop.is_set():
            if not poller.poll(50):
                continue
            client, empty, start = self.replay.recv_multipart()
            start = int.from_bytes(start, "big")
            for seq, payload in list(self.buffer):
                if seq >= start:
                    self.replay.send_multipart([client, b"", seq.to_bytes(8, "big"), payload])
            self.replay.send_multipart([client, b"", (-1).to_bytes(8, "big", signed=True), b""])

    def publish(self, seq, payload, send=True):
        self.buffer.append((seq, payload))
        if send:
            self.pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])

    def close(self):
        self.stop.set()
        if self.replay:
            self.thread.join(timeout=5)
            self.replay.close(linger=0)
        self.pub.close(linger=0)


def encode_hash(h, form):
    if form == "bytes":
        return h.to_bytes(8, "little") + bytes(24)  # a 32-byte hash, as vLLM's sha256 ones
    if form == "int64":
        return -h
    return h


def json_hash(h, form):
    """The u64 a Dynamo RouterEvent carries for the same engine hash."""
    return (-h) & U64 if form == "int64" else h


def stored(hashes, parent, tokens, form, maps):
    hs = [encode_hash(h, form) for h in hashes]
    p = None if parent is None else encode_hash(parent, form)
    if maps:
        return {"type": "BlockStored", "block_hashes": hs, "parent_block_hash": p, "token_ids": tokens,
                "block_size": BLOCK, "lora_id": None, "medium": "GPU", "lora_name": None}
    return ["BlockStored", hs, p, tokens, BLOCK, None, "GPU"]


def removed(hashes, form, maps):
    hs = [encode_hash(h, form) for h in hashes]
    return {"type": "BlockRemoved", "block_hashes": hs, "medium": "GPU"} if maps else ["BlockRemoved", hs, "GPU"]


def batch(events, maps):
    if maps:
        return msgpack.packb({"ts": time.time(), "events": events, "data_parallel_rank": 0})
    return msgpack.packb([time.time(), events, 0])


def router_event(worker, ev, form):
    """The Dynamo RouterEvent JSON of one engine event (tokens hashed here)."""
    if ev[0] == "stored":
        _, hashes, parent, tokens = ev
        blocks = [{"block_hash": json_hash(h, form), "tokens_hash": tokens_hash(tokens[i * BLOCK:(i + 1) * BLOCK])}
                  for i, h in enumerate(hashes)]
        data = {"stored": {"parent_hash": None if parent is None else json_hash(parent, form), "blocks": blocks}}
    elif ev[0] == "removed":
        data = {"removed": {"block_hashes": [json_hash(h, form) for h in ev[1]]}}
    else:
        data = "cleared"
    return {"worker_id": worker, "storage_tier": "device", "event": {"event_id": 1, "dp_rank": 0, "data": data}}


# Per worker: encoding, hash form, replay socket, and its batches (seq 1..): lists of events.
# The batch at `drop` is not sent on the PUB socket.
WORKERS = [
    {"maps": True, "form": "bytes", "replay": True, "drop": 3, "batches": [
        [("stored", [11, 12], None, toks(100, 2))],
        [("stored", [13], 12, toks(108, 1))],
        [("stored", [21, 22], None, toks(500, 2))],
        [("removed", [22])],
    ]},
    {"maps": False, "form": "uint64", "replay": False, "drop": 2, "batches": [
        [("stored", [31, 32], None, toks(100, 2))],
        [("stored", [41], None, toks(900, 1))],
        [("stored", [51, 52, 53], None, toks(100, 3))],
    ]},
    {"maps": False, "form": "int64", "replay": True, "drop": 2, "batches": [
        [("stored", [61], None, toks(500, 1))],
        [("stored", [62, 63], 61, toks(504, 2))],
        [("stored", [71], None, toks(700, 1)), ("removed", [63])],
    ]},
]

# Prompts whose routes both servers must answer alike.
PROMPTS = [toks(100, 3), toks(100, 2) + toks(0, 1), toks(500, 3), toks(700, 2), toks(900, 1), toks(5000, 2)]


def engine_payload(w, events):
    out = []
    for ev in events:
        if ev[0] == "stored":
            out.append(stored(ev[1], ev[2], ev[3], w["form"], w["maps"]))
        else:
            out.append(removed(ev[1], w["form"], w["maps"]))
    return batch(out, w["maps"])


def wait_for(cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class EngineEventsTest(unittest.TestCase):
    def test_zmq_events_equal_router_events_json(self):
        ctx = zmq.Context()
        pubs = [Publisher(ctx, w["replay"]) for w in WORKERS]
        common = ["--router-workers", "4", "--router-block-tokens", str(BLOCK), "--router-policy", "kv"]
        extra = list(common)
        for i, p in enumerate(pubs):
            extra += ["--router-kv-events", p.spec(i)]
        try:
            with temp_dir() as d, Server(CLUSTER, f"sqlite:{d}/zmq.db", d, extra=extra) as zs, \
                    Server(CLUSTER, f"sqlite:{d}/json.db", d, extra=common) as js:
                def subscribers():
                    st, body = zs.request("GET", "/v1/kv-subscribers")
                    self.assertEqual(st, 200, body)
                    return json.loads(body)["subscribers"]

                # PUB/SUB drops what is sent before the subscription is up: an empty batch 0
                # until every subscriber has seen it.
                for p, w in zip(pubs, WORKERS):
                    p.publish(0, batch([], w["maps"]))
                def all_joined():
                    subs = subscribers()
                    if all(s["last_seq"] >= 0 for s in subs):
                        return True
                    for p, w in zip(pubs, WORKERS):
                        p.pub.send_multipart([b"", (0).to_bytes(8, "big"), batch([], w["maps"])])
                    return False
                wait_for(all_joined, "the subscribers to join")

                for i, (p, w) in enumerate(zip(pubs, WORKERS)):
                    for seq, events in enumerate(w["batches"], start=1):
                        p.publish(seq, engine_payload(w, events), send=seq != w["drop"])
                last = {i: len(w["batches"]) for i, w in enumerate(WORKERS)}
                subs = wait_for(lambda: (lambda s: s if all(x["last_seq"] == last[x["worker"]] for x in s) else None)(subscribers()),
                                "every batch to arrive")
                by_worker = {s["worker"]: s for s in subs}
                for i, w in enumerate(WORKERS):
                    s = by_worker[i]
                    self.assertEqual(s["gaps"], 1, s)
                    self.assertEqual(s["decode_errors"], 0, s)
                    self.assertEqual(s["refused"], 0, s)
                    if w["replay"]:
                        self.assertEqual((s["replayed_batches"], s["clears"]), (1, 0), s)
                    else:
                        self.assertEqual((s["replayed_batches"], s["clears"]), (0, 1), s)

                # The same events as Dynamo RouterEvents; the worker without replay lost a
                # batch and was cleared, so its JSON twin gets a "cleared" before the rest.
                for i, w in enumerate(WORKERS):
                    for seq, events in enumerate(w["batches"], start=1):
                        if seq == w["drop"] and not w["replay"]:
                            st, body = js.request("POST", "/v1/kv-events", router_event(i, ("cleared",), w["form"]))
                            self.assertEqual(st, 200, body)
                            continue
                        for ev in events:
                            st, body = js.request("POST", "/v1/kv-events", router_event(i, ev, w["form"]))
                            self.assertEqual(st, 200, body)

                def index(server):
                    st, body = server.request("GET", "/v1/kv-index")
                    self.assertEqual(st, 200, body)
                    return json.loads(body)

                zi, ji = index(zs), index(js)
                self.assertEqual([x["blocks"] for x in zi["workers"]], [x["blocks"] for x in ji["workers"]])
                # ...and both hold exactly the names computed here.
                expect = [
                    sorted(names(toks(100, 3)) + names(toks(500, 1))),
                    sorted(names(toks(100, 3))),
                    sorted(names(toks(500, 2)) + names(toks(700, 1))),
                    [],
                ]
                self.assertEqual([x["blocks"]["device"] for x in zi["workers"]], expect)

                for prompt in PROMPTS:
                    answers = []
                    for server in (zs, js):
                        st, body = server.request("POST", "/v1/route", {"token_ids": prompt})
                        self.assertEqual(st, 200, body)
                        r = json.loads(body)
                        answers.append((r["worker"], r["overlap_blocks"], r["cost"]))
                    self.assertEqual(answers[0], answers[1], prompt)
                st, body = zs.request("POST", "/v1/route", {"token_ids": toks(100, 3)})
                self.assertEqual(json.loads(body)["overlap_blocks"], 3)
        finally:
            for p in pubs:
                p.close()
            ctx.term()

    def test_cpu_medium_events_steer_kv_topo(self):
        """vLLM with CPU offloading publishes BlockStored with medium "CPU": serve indexes those
        blocks as the engine's host tier, and kv-topo routes a prompt to the worker holding its
        prefix in host memory (a PCIe load, not a prefill), while kv (Dynamo's cost) does not
        see it. Blocks of 64 tokens: long enough that computing them costs more than loading."""
        block = 64
        prompt = list(range(10_000, 10_000 + 12 * block + 5))
        hashes = [xxhash.xxh3_64_intdigest(bytes([k]) * 8) for k in range(12)]  # the engine's own names
        cpu_stored = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": None,
                      "token_ids": prompt[:12 * block], "block_size": block, "lora_id": None, "medium": "CPU",
                      "lora_name": None}
        ctx = zmq.Context()
        pub = Publisher(ctx, replay=False)
        try:
            with temp_dir() as d:
                answers = {}
                for policy in ("kv-topo", "kv"):
                    extra = ["--router-workers", "2", "--router-block-tokens", str(block), "--router-policy", policy,
                             "--router-kv-events", pub.spec(1)]
                    with Server(CLUSTER, f"sqlite:{d}/{policy}.db", d, extra=extra) as server:
                        def last_seq():
                            st, body = server.request("GET", "/v1/kv-subscribers")
                            self.assertEqual(st, 200, body)
                            return json.loads(body)["subscribers"][0]["last_seq"]
                        seq0 = len(pub.buffer)

                        def joined():  # PUB/SUB drops what is sent before the subscription is up
                            pub.pub.send_multipart([b"", seq0.to_bytes(8, "big"), batch([], True)])
                            return last_seq() >= seq0
                        wait_for(joined, "the subscriber to join")
                        pub.publish(seq0 + 1, batch([cpu_stored], True))
                        wait_for(lambda: last_seq() == seq0 + 1, "the CPU batch to arrive")
                        st, body = server.request("GET", "/v1/kv-index")
                        self.assertEqual(st, 200, body)
                        held = json.loads(body)["workers"][1]["blocks"]
                        self.assertEqual(len(held.get("host_pinned", [])), 12, held)
                        self.assertEqual(held.get("device", []), [], held)
                        st, body = server.request("POST", "/v1/route", {"token_ids": prompt})
                        self.assertEqual(st, 200, body)
                        answers[policy] = json.loads(body)
            topo, kv = answers["kv-topo"], answers["kv"]
            self.assertEqual((topo["worker"], topo["host_blocks"], topo["overlap_blocks"]), (1, 12, 0), topo)
            self.assertEqual((kv["worker"], kv["host_blocks"]), (0, 0), kv)
            self.assertEqual(kv["tier_overlap_blocks"].get("host_pinned"), 0, kv)  # worker 0's host tier: empty
        finally:
            pub.close()
            ctx.term()


if __name__ == "__main__":
    unittest.main()
