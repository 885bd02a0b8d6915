#!/usr/bin/env python3
"""Random mutations of the fixtures through the real CLI (issue 18, docs/robustness.md).

Each case takes one fixture, mutates it (truncation, byte flips, deleted or duplicated
lines, a repeated key, extreme numbers, binary garbage, invalid UTF-8, deep nesting,
trailing garbage) and runs the command that reads it, with any output pointed into a fresh
directory. A case fails when the run
  - crashes or aborts (killed by a signal, or exit 70: an internal error, or a sanitizer report),
  - hangs (runs past --timeout seconds),
  - exits with anything but 0, 1 or 2, or exits non-zero without "toposched: error:",
  - leaves a partial output: on failure any output file or report directory, on success an
    output that is empty or does not parse (JSON) or lacks its final newline, or a hidden
    temporary file either way.
Usage: cli_mutations.py [--count N] [--seed S] [--start I] [--jobs J] [--timeout T]
                        [--binary PATH] [--keep DIR] [--progress N]
Case I of seed S is the same mutation on every run, so `--start I` resumes an interrupted
run. Failures are printed as they are found, a progress line (cases done, failures, elapsed
seconds) every --progress cases on stderr, and at the end the failures counted by kind.
The seeded sample in `make test` is tests/e2e/test_cli_mutations.py; the full run is
`tests/e2e/cli_mutations.py --count 10000`.
"""

import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("TOPOSCHED_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
PRESET = "preset:dgx-h100?nodes=4"
SMALL_TRACE = "tests/data/traces/native/small.csv"

# (fixture, command); {in} is the mutated file, {out} an output file, {dir} a report folder
# (both inside the case's fresh directory; neither exists before the run).
SIM = ["simulate", "--cluster", PRESET, "--policies", "first-fit,topo", "--max-jobs", "40", "--quiet"]
TARGETS = [
    ("examples/cluster-small.yaml", ["show", "--cluster", "{in}", "--format", "json"]),
    ("examples/cluster-small.yaml", ["show", "--cluster", "{in}", "--spec", "-o", "{out}"]),
    ("examples/cluster-small.yaml", ["export", "--cluster", "{in}", "--to", "slurm-tree", "-o", "{out}"]),
    ("examples/cluster-small.yaml", ["place", "--cluster", "{in}", "--gpus", "4", "--save-state", "{out}", "--format", "json"]),
    ("tests/data/discovery/slurm-tree.conf", ["show", "--cluster", "{in}", "--format", "json"]),
    ("tests/data/discovery/slurm-block.conf", ["export", "--cluster", "{in}", "--to", "json", "-o", "{out}"]),
    ("tests/data/discovery/topograph-model.yaml", ["show", "--cluster", "{in}", "--spec", "--format", "json", "-o", "{out}"]),
    ("tests/data/discovery/h100-hgx-13nic.topo", ["discover", "--topo-m", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/dgx1-v100.topo", ["discover", "--topo-m", "{in}", "--format", "json", "-o", "{out}"]),
    ("tests/data/discovery/fabric-gb-r1-n01.csv", ["discover", "--topo-m", "tests/data/discovery/gb200-4gpu.topo", "--fabric", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/q-fabric-healthy.txt", ["discover", "--fabric", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/two-su-rails-storage.ibnet", ["discover", "--ibnetdiscover", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/k8s-nodes.json", ["discover", "--k8s-nodes", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/aws-instance-topology.json", ["discover", "--aws-topology", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/gcp-instances.json", ["discover", "--gcp-instances", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/oci-compute-hosts.json", ["discover", "--oci-compute-hosts", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/oci-rdma-pdsh.txt", ["discover", "--oci-rdma-topology", "{in}", "--format", "json", "-o", "{out}"]),
    ("tests/data/discovery/dra/resource-slices.json", ["discover", "--resource-slices", "{in}", "-o", "{out}"]),
    ("tests/data/discovery/slurm-tree.conf", ["discover", "--slurm-topology", "{in}", "--format", "json", "-o", "{out}"]),
    ("tests/data/slurm/scontrol_show_node.txt", ["discover", "--slurm-nodes", "{in}", "-o", "{out}"]),
    ("tests/data/slurm/sinfo.json", ["discover", "--slurm-nodes", "{in}", "--format", "json", "-o", "{out}"]),
    ("tests/data/fuzz-seeds/state_file/two-jobs.json", ["place", "--cluster", PRESET, "--gpus", "2", "--state", "{in}", "--save-state", "{out}"]),
    ("tests/data/fuzz-seeds/state_file/two-jobs.json", ["frag", "--cluster", PRESET, "--state", "{in}", "--format", "json"]),
    ("tests/data/cost_job.yaml", ["cost", "--cluster", PRESET, "--job", "{in}", "--placement", "tests/data/cost_placement.yaml", "--format", "json"]),
    ("tests/data/cost_placement.yaml", ["cost", "--cluster", PRESET, "--job", "tests/data/cost_job.yaml", "--placement", "{in}"]),
    ("examples/llm-mix.yaml", SIM + ["--generate", "{in}", "--report", "{dir}"]),
    (SMALL_TRACE, SIM + ["--trace", "{in}", "--report", "{dir}", "--format", "json"]),
    ("tests/data/traces/alibaba-v2023/openb_pod_list_default_head300.csv", SIM + ["--trace", "{in}", "--trace-format", "alibaba-v2023"]),
    ("tests/data/traces/philly/cluster_job_log", SIM + ["--trace", "{in}", "--trace-format", "philly", "--report", "{dir}"]),
    ("tests/data/traces/helios/cluster_log.csv", SIM + ["--trace", "{in}", "--trace-format", "helios"]),
]

EXTREMES = [b"0", b"-1", b"1e308", b"-1e308", b"1e23", b"99999999999999999999", b"nan", b"inf", b"-0", b"4294967296", b"0x7fffffff", b"1.5"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    kind = rng.choice(["truncate", "flip", "delete_line", "duplicate_line", "repeat_key", "extreme_number",
                       "garbage", "invalid_utf8", "nesting", "trailing", "swap_lines"])
    lines = data.split(b"\n")
    if kind == "truncate":
        return data[:rng.randrange(len(data) + 1)]
    if kind == "flip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if kind == "delete_line" and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
        return b"\n".join(lines)
    if kind in ("duplicate_line", "repeat_key") and lines:
        candidates = [i for i, l in enumerate(lines) if re.match(rb"\s*[\"\w-]+\"?\s*:", l)] if kind == "repeat_key" else []
        i = rng.choice(candidates) if candidates else rng.randrange(len(lines))
        lines.insert(i + 1, lines[i])
        return b"\n".join(lines)
    if kind == "extreme_number":
        numbers = list(re.finditer(rb"-?\d+(\.\d+)?", data))
        if numbers:
            m = rng.choice(numbers)
            return data[:m.start()] + rng.choice(EXTREMES) + data[m.end():]
    if kind == "garbage":
        at = rng.randrange(len(data) + 1)
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + data[at:]
    if kind == "invalid_utf8":
        words = list(re.finditer(rb"[A-Za-z]{3,}", data))
        if words:
            m = rng.choice(words)
            cut = rng.randrange(m.start() + 1, m.end())
            return data[:cut] + rng.choice([b"\x99", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]) + data[cut:]
    if kind == "nesting":
        depth = rng.choice([100, 1000, 20000])
        at = rng.randrange(len(data) + 1)
        return data[:at] + b"[" * depth + b"]" * rng.choice([0, depth]) + data[at:]
    if kind == "swap_lines" and len(lines) > 2:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    return data + rng.choice([b"\n}garbage", b"\n---\nextra: 1\n", b"\x00\x00", b"\n,,,,\n"])


def complete(path: str) -> str:
    """Why the output at path is partial, or '' when it is complete."""
    if os.path.isdir(path):
        files = sorted(os.listdir(path))
        # simulate's report also holds jobs.csv; route's and scale's do not.
        if files not in (["report.html", "report.json"], ["jobs.csv", "report.html", "report.json"]):
            return f"report directory holds {files}"
        return next(filter(None, (complete(os.path.join(path, f)) for f in files)), "")
    data = open(path, "rb").read()
    if not data:
        return "empty output file"
    if path.endswith(".json") or data[:1] in (b"{", b"["):
        try:
            json.loads(data)
        except ValueError as e:
            return f"output is not complete JSON: {e}"
    if path.endswith(".html") and not data.rstrip().endswith(b"</html>"):
        return "report.html is cut short"
    if path.endswith(".csv") and not data.startswith(b"policy,job,"):
        return "jobs.csv lacks its header"
    if not data.endswith(b"\n"):
        return "output lacks its final newline"
    return ""


def run_case(binary: str, index: int, seed: int, timeout: float, keep_dir: str):
    rng = random.Random(f"{seed}:{index}")
    fixture, command = TARGETS[rng.randrange(len(TARGETS))]
    original = open(os.path.join(SOURCE_DIR, fixture), "rb").read()
    data = original
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        data = mutate(data, rng)
    work = tempfile.mkdtemp(prefix="toposched-mut-")
    try:
        src = os.path.join(work, "input" + os.path.splitext(fixture)[1])
        with open(src, "wb") as f:
            f.write(data)
        out_dir = os.path.join(work, "out")
        os.mkdir(out_dir)
        out = os.path.join(out_dir, "result.json" if "json" in command else "result.txt")
        report = os.path.join(out_dir, "report")
        argv = [a.replace("{in}", src).replace("{out}", out).replace("{dir}", report) for a in command]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="halt_on_error=1")
        try:
            p = subprocess.run([binary, *argv], capture_output=True, timeout=timeout, cwd=SOURCE_DIR, env=env)
        except subprocess.TimeoutExpired:
            return index, fixture, argv, data, f"hang: still running after {timeout} s"
        err = p.stderr.decode("utf-8", "replace")
        problem = ""
        if p.returncode < 0:
            problem = f"killed by signal {-p.returncode}"
        elif p.returncode not in (0, 1, 2):
            problem = f"exit {p.returncode}"
        elif "internal error" in err or "Sanitizer" in err or "runtime error:" in err:
            problem = "internal error or sanitizer report"
        elif p.returncode != 0 and "toposched: error:" not in err:
            problem = "non-zero exit without an error message"
        else:
            leftovers = [f for f in os.listdir(out_dir) if f.startswith(".")]
            outputs = [os.path.join(out_dir, f) for f in os.listdir(out_dir) if not f.startswith(".")]
            if leftovers:
                problem = f"temporary files left: {leftovers}"
            elif p.returncode != 0 and outputs:
                problem = f"failed run left output {outputs}"
            elif p.returncode == 0:
                for o in outputs:
                    problem = problem or complete(o)
        if problem:
            problem += "\n" + err[-2000:]
        return index, fixture, argv, data, problem
    finally:
        shutil.rmtree(work, ignore_errors=True)


FAILURE_KINDS = [("hang", "hang:"), ("crash", "killed by signal"), ("exit code", "exit "),
                 ("internal error or sanitizer", "internal error or sanitizer"),
                 ("no error message", "non-zero exit without"), ("partial output", "")]


def failure_kind(problem: str) -> str:
    """The class of a failure for the summary: hang, crash, ..., partial output (the rest)."""
    return next(kind for kind, prefix in FAILURE_KINDS if problem.startswith(prefix))


def run_all(binary, count, seed, jobs, timeout, keep_dir=None, start=0, on_result=None):
    """Runs cases start .. start+count-1; returns the failures as (index, fixture, argv,
    problem). on_result(index, problem) is called after each case, in order."""
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for index, fixture, argv, data, problem in pool.map(
                lambda i: run_case(binary, i, seed, timeout, keep_dir), range(start, start + count)):
            if problem:
                failures.append((index, fixture, argv, problem))
                if keep_dir:
                    os.makedirs(keep_dir, exist_ok=True)
                    with open(os.path.join(keep_dir, f"case-{seed}-{index}{os.path.splitext(fixture)[1]}"), "wb") as f:
                        f.write(data)
            if on_result:
                on_result(index, fixture, argv, problem)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first case index (to resume a run)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--binary", default=os.environ.get("TOPOSCHED", os.path.join(SOURCE_DIR, "build/debug/toposched")))
    ap.add_argument("--keep", default=None, help="folder to keep failing inputs in")
    ap.add_argument("--progress", type=int, default=500, help="print a progress line every N cases")
    a = ap.parse_args()
    began = time.monotonic()
    done = [0, 0]  # cases, failures

    def on_result(index, fixture, argv, problem):
        done[0] += 1
        if problem:
            done[1] += 1
            print(f"case {index} ({fixture}): {' '.join(argv)}\n  {problem}\n", flush=True)
        if done[0] % a.progress == 0:
            print(f"progress: {done[0]}/{a.count} cases (last index {index}), {done[1]} failures, "
                  f"{time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)

    failures = run_all(os.path.abspath(a.binary), a.count, a.seed, a.jobs, a.timeout, a.keep, a.start, on_result)
    kinds = {kind: 0 for kind, _ in FAILURE_KINDS}
    for _, _, _, problem in failures:
        kinds[failure_kind(problem)] += 1
    print(f"{a.count} mutated inputs (seed {a.seed}, cases {a.start}..{a.start + a.count - 1}): "
          f"{len(failures)} failures ({', '.join(f'{k}: {n}' for k, n in kinds.items())}); "
          f"{time.monotonic() - began:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
