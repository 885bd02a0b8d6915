"""Option-space fuzzing (issue 35): random combinations of every `place` flag and every
POST /v1/jobs field, within and beyond their bounds, for every policy. Each case must end
cleanly (CLI: exit 0, 1 or 2 and no signal; HTTP: 2xx or 4xx and the server alive), and an
accepted placement must honour what was asked (the GPU count, GPUs per node, whole nodes
for --nodes and --exclusive, each --gpus-per-pod pod on one node, the GPU model, a node-tier
constraint, ranks 0..N-1) and give no GPU twice.

Used by tests/e2e/test_option_space.py (a short seeded run in `make test`) and by
`make fuzz` (`python3 tests/e2e/option_space.py --cases 100000`). Loopback only; the server
it starts is stopped by PID."""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_harness import BIN, Server  # noqa: E402

CLUSTER = "preset:dgx-h100?nodes=8"  # 8 nodes x 8 H100, two leaf switches
POLICIES = ["topo", "first-fit", "random", "slurm-tree", "slurm-block", "kueue-bestfit", "nope"]
GPUS_PER_NODE = 8
NODES = 8

# Values drawn for integer fields: typical ones, bounds, and far past them (2^29, 2^31, ...).
INTS = [1, 2, 3, 4, 8, 16, 32, 64, 65, 0, -1, 7, 1 << 29, (1 << 29) + 1, (1 << 31) - 1, 1 << 31, 1 << 40, 10 ** 9,
        10 ** 9 + 1]
STRINGS = ["", "H100", "h100", "A100", "node", "leaf", "spine", "nope", "x" * 300, "llm-dense", "inference"]


def draw_int(rng):
    return rng.choice(INTS) if rng.random() < 0.5 else rng.choice([1, 2, 4, 8, 16, 32])


def draw_request(rng):
    """A JSON request of POST /v1/jobs; each field present with some probability."""
    r = {}
    if rng.random() < 0.5:
        r["gpus"] = draw_int(rng)
    else:
        r["nodes"] = draw_int(rng)
    for key, p in (("gpus_per_node", 0.3), ("gpus_per_pod", 0.2), ("tp", 0.4), ("pp", 0.3), ("dp", 0.15), ("ep", 0.15), ("cp", 0.15),
                   ("replica_gpus", 0.1), ("switches", 0.1), ("segment", 0.1)):
        if rng.random() < p:
            r[key] = draw_int(rng)
    if rng.random() < 0.25:
        r["exclusive"] = rng.random() < 0.8
    if rng.random() < 0.3:
        r["kind"] = rng.choice(["training", "inference", "inference-pd", "bogus"])
    for key, p in (("gpu_model", 0.1), ("required_tier", 0.15), ("preferred_tier", 0.1), ("model", 0.1)):
        if rng.random() < p:
            r[key] = rng.choice(STRINGS)
    if rng.random() < 0.1:
        r["seed"] = rng.choice([0, 1, 7, 1 << 63, -1])
    r["policy"] = rng.choice(POLICIES)
    if rng.random() < 0.05:  # a wrong type now and then
        key = rng.choice(sorted(r))
        r[key] = rng.choice([None, "8", 1.5, [8], {"a": 1}, True])
    return r


def cli_args(r):
    """The same request as `place` flags (values the CLI cannot take as a flag are passed as
    text, which is a usage error: exit 2)."""
    flag = {"gpus": "--gpus", "nodes": "--nodes", "gpus_per_node": "--gpus-per-node", "gpus_per_pod": "--gpus-per-pod",
            "tp": "--tp", "pp": "--pp",
            "dp": "--dp", "ep": "--ep", "cp": "--cp", "replica_gpus": "--replica-gpus", "switches": "--switches",
            "segment": "--segment", "kind": "--workload", "gpu_model": "--gpu-model", "required_tier": "--required-tier",
            "preferred_tier": "--preferred-tier", "model": "--model", "seed": "--seed", "policy": "--policy"}
    args = []
    for key, value in r.items():
        if key == "exclusive":
            if value is True:
                args.append("--exclusive")
            continue
        if isinstance(value, (dict, list)) or value is None:
            value = json.dumps(value)
        args += [flag[key], str(value).lower() if isinstance(value, bool) else str(value)]
    return args


def check_placement(r, placed):
    """Problems of an accepted placement against what `r` asked for ([] when it honours it)."""
    gpus = placed["gpus"]
    problems = []
    pairs = [(g["node"], g["gpu"]) for g in gpus]
    if len(set(pairs)) != len(pairs):
        problems.append("a GPU given twice")
    if sorted(g["rank"] for g in gpus) != list(range(len(gpus))):
        problems.append("ranks are not 0..N-1")
    per_node = {}
    for node, _ in pairs:
        per_node[node] = per_node.get(node, 0) + 1
    if "nodes" in r:
        g = r.get("gpus_per_node", GPUS_PER_NODE)
        if len(per_node) != r["nodes"] or any(c != g for c in per_node.values()):
            problems.append(f"asked {r['nodes']} nodes x {g}, got {per_node}")
    else:
        if len(gpus) != r["gpus"]:
            problems.append(f"asked {r['gpus']} GPUs, got {len(gpus)}")
        if "gpus_per_node" in r and any(c != r["gpus_per_node"] for c in per_node.values()):
            problems.append(f"asked {r['gpus_per_node']} per node, got {per_node}")
        if r.get("exclusive") is True and "gpus_per_node" not in r and any(c != GPUS_PER_NODE for c in per_node.values()):
            problems.append(f"exclusive but a node is shared: {per_node}")
    if r.get("required_tier") == "node" and len(per_node) > 1:
        problems.append(f"required tier node, got {len(per_node)} nodes")
    pod = r.get("gpus_per_pod")
    if isinstance(pod, int) and pod > 0:
        node_of = {g["rank"]: g["node"] for g in gpus}
        split = [k for k in range(0, len(gpus), pod) if len({node_of.get(i) for i in range(k, k + pod)}) != 1]
        if split:
            problems.append(f"pods of {pod} GPUs split over nodes at ranks {split[:3]}")
    return problems


def run_http(server, rng, cases, deadline):
    """Dry runs of random requests on one server; the problems found and the count run."""
    problems, done = [], 0
    conn = server.conn()
    for i in range(cases):
        if time.monotonic() > deadline:
            break
        r = draw_request(rng)
        body = json.dumps(r)
        try:
            conn.request("POST", "/v1/jobs?dry_run=1", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            status, text = resp.status, resp.read().decode()
        except (ConnectionError, OSError) as e:
            problems.append(f"HTTP {body}: connection failed ({e}); server alive: {server.proc.poll() is None}")
            if server.proc.poll() is not None:
                break
            conn = server.conn()
            continue
        done += 1
        # 501: a policy that does not implement an option (kUnsupported), a clear refusal.
        if not (200 <= status < 300 or 400 <= status < 500 or status == 501):
            problems.append(f"HTTP {body}: status {status}: {text[:200]}")
        elif status < 300:
            problems += [f"HTTP {body}: {p}" for p in check_placement(r, json.loads(text))]
    conn.close()
    return problems, done


def as_flags_read(r):
    """`r` as the CLI reads its flags: a flag's value is text, so a field drawn as the
    wrong type "8" is the number 8 there (the HTTP API refuses it as a string)."""
    return {k: int(v) if isinstance(v, str) and v.isdigit() else v for k, v in r.items()}


def run_cli(rng, cases, deadline):
    problems, done = [], 0
    for _ in range(cases):
        if time.monotonic() > deadline:
            break
        r = draw_request(rng)
        args = [BIN, "place", "--cluster", CLUSTER, "--format", "json", *cli_args(r)]
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        done += 1
        if p.returncode not in (0, 1, 2):
            problems.append(f"CLI {' '.join(args[2:])}: exit {p.returncode}: {p.stderr[-300:]}")
        elif p.returncode == 0:
            problems += [f"CLI {' '.join(args[2:])}: {x}" for x in check_placement(as_flags_read(r), json.loads(p.stdout))]
    return problems, done


def run(seed, http_cases, cli_cases, seconds):
    """Runs both halves; (problems, HTTP cases run, CLI cases run)."""
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    with tempfile.TemporaryDirectory() as d:
        server = Server(CLUSTER, "sqlite:" + os.path.join(d, "s.db"), d)
        try:
            problems, http_done = run_http(server, rng, http_cases, deadline)
        finally:
            rc = server.stop()
        if rc != 0:
            problems.append(f"serve ended with status {rc}")
    cli_problems, cli_done = run_cli(rng, cli_cases, deadline)
    return problems + cli_problems, http_done, cli_done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100000, help="HTTP cases (POST /v1/jobs?dry_run=1)")
    ap.add_argument("--cli-cases", type=int, default=2000, help="`place` processes")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--seconds", type=float, default=3600, help="stop drawing after this long")
    a = ap.parse_args()
    problems, http_done, cli_done = run(a.seed, a.cases, a.cli_cases, a.seconds)
    for p in problems[:50]:
        print(p)
    print(f"option space: seed {a.seed}, {http_done} HTTP cases, {cli_done} CLI cases, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
