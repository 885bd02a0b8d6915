#!/usr/bin/env python3
"""Issue 34's simulation runs at 100,000 GPUs, every policy, as `make bench` runs them.

For each job count (default: the 100,000-job mix of bench/scale-mix.yaml, then the same mix
with 1,000,000 jobs) and each policy, one `toposched simulate` process on
preset:dgx-h100?nodes=12500 under easy-backfill; prints its user CPU time, wall time and
peak resident memory (getrusage of the child: the machine's cores are shared, so CPU time is
the figure that compares), and the CPU time over first-fit's in the same run. Targets
(docs/performance.md, "Scale: 100,000 GPUs"): every policy within 2x first-fit on 100,000
jobs; 1,000,000 jobs within 10 minutes and 4 GB per policy. Exits 1 when a run fails; the
targets are reported, not asserted (time is a benchmark's, never a test's).

    bench/scale-runs.py build/release/toposched [--jobs 100000,1000000] [--policies first-fit,topo]
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
MIX = ROOT / "bench" / "scale-mix.yaml"
CLUSTER = "preset:dgx-h100?nodes=12500"


def policies(toposched):
    """Every placer `simulate --policies all` runs, from its help line (each is run alone, so
    that each has its own peak memory)."""
    out = subprocess.run([toposched, "simulate", "--help"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "--policies" in line and "(default):" in line:
            return [n.strip() for n in line.split("(default):")[1].split(",") if n.strip()]
    raise SystemExit("could not read the policy names from `toposched simulate --help`")


def mix_with_jobs(jobs, tmp):
    text = MIX.read_text()
    if jobs == 100000:
        return MIX
    path = pathlib.Path(tmp) / f"scale-mix-{jobs}.yaml"
    path.write_text(text.replace("jobs: 100000", f"jobs: {jobs}"))
    return path


def run_one(toposched, mix, policy):
    """(user CPU s, wall s, peak resident MB) of one simulate process, or None if it failed."""
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen([toposched, "simulate", "-q", "--cluster", CLUSTER, "--generate", str(mix),
                                 "--policies", policy, "--discipline", "easy-backfill", "--format", "json"],
                                stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own usage, peak memory included
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            err.seek(0)
            print(f"{policy}: exit {proc.returncode}: {err.read().decode(errors='replace').strip()[:400]}", file=sys.stderr)
            return None
    return usage.ru_utime, wall, usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("toposched")
    ap.add_argument("--jobs", default="100000,1000000", help="comma-separated job counts (default 100000,1000000)")
    ap.add_argument("--policies", default="", help="comma-separated policies (default: every one)")
    args = ap.parse_args()
    names = [p for p in args.policies.split(",") if p] or policies(args.toposched)
    if "first-fit" in names:
        names = ["first-fit"] + [n for n in names if n != "first-fit"]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in [int(j) for j in args.jobs.split(",") if j]:
            mix = mix_with_jobs(jobs, tmp)
            print(f"\n{jobs:,} jobs on {CLUSTER} (easy-backfill), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                  f"load average {os.getloadavg()[0]:.1f}")
            print("| policy | CPU | wall | peak memory | CPU / first-fit |")
            print("|---|---:|---:|---:|---:|")
            first_fit = None
            for policy in names:
                r = run_one(args.toposched, mix, policy)
                if r is None:
                    failed = True
                    continue
                cpu, wall, peak = r
                if policy == "first-fit":
                    first_fit = cpu
                ratio = f"{cpu / first_fit:.2f}x" if first_fit else "-"
                print(f"| {policy} | {cpu:.1f} s | {wall:.1f} s | {peak:,.0f} MB | {ratio} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
