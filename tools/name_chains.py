#!/usr/bin/env python3
"""Finds if-chains that choose something by comparing one name with string literals.

toposched chooses by name through one idiom, Registry<T> (src/topology/registry.h): rows of
name, description and value, one lookup and one "unknown KIND 'x'; known: a, b, c" error
(issue 29, acceptance 2). This check reports every chain of two or more
`if (EXPR == "literal")` / `else if (EXPR == "literal")` tests of the same EXPR within a
few lines of each other, outside registry.h, unless ALLOWED names the file and
EXPR with the reason the chain is not a choice by name (a reader's keywords, a wire
protocol's message types, messages ported from Topograph).

Comments and string literals are blanked first (as in tools/function_lengths.py), so a
chain in a comment does not count.

Usage: tools/name_chains.py [--check] SRC_DIR
Exit 1 when a chain is found that ALLOWED does not name, or when an ALLOWED entry matches
nothing any more (so the list stays true).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from function_lengths import blank_literals  # noqa: E402

# (path under src/, compared expression) -> why this chain is not a choice by name.
ALLOWED = {
    ("formats/slurm_topology.cc", "head.key"): "topology.conf's statement keywords, read by its reader",
    ("formats/slurm_topology.cc", "f.key"): "topology.conf's field keywords, read by its reader",
    ("formats/native_spec_fast.cc", "key"): "the keys of a native spec's node groups and switches, read by its fast path",
    ("formats/topograph_fast.cc", "c"): "a Topograph model's two top-level keys, read by its fast path",
    ("formats/topograph_fast.cc", "key"): "the keys of a Topograph model's blocks, read by its fast path",
    ("formats/k8s_nodes.cc", "r"): "--label-map roles include the pattern tier-N, which no fixed row can name",
    ("formats/k8s_nodes.cc", "key"): "the keys of a Kubernetes Node's metadata, read by the NodeList reader's JSON path",
    ("placement/state_file.cc", "key"): "the keys of an allocation-state file, read by its JSON fast path",
    ("formats/cluster_format.cc", "key"): "the keys of a YAML head the format detector reads",
    ("formats/nvidia_fabric.cc", "key"): "nvidia-smi -q's field names, read by its reader",
    ("formats/topograph_export.cc", "plugin"): "Topograph's plugin parameter; its messages are ported from Topograph",
    ("formats/slurm_yaml.cc", "p.plugin"): "Slurm's topology.yaml plugin values; messages ported from Topograph",
    ("slurm/sbatch_args.cc", "n"): "sbatch's option names, read by the sbatch argument parser",
    ("slurm/sbatch_args.cc", "w.name"): "sbatch's option names, read by the sbatch argument parser",
    ("router/kv_events.cc", "f.type"): "vLLM's KV event types on the wire (a msgpack union tag)",
    ("router/kv_events.cc", "k"): "the keys of vLLM's KV event batch on the wire",
    ("sim/traces/alibaba_v2023.cc", "qos"): "the trace's QoS column values, read by its reader",
    ("sim/traces/other_traces.cc", "key"): "the keys of a Philly job, attempt and machine, read by the trace's JSON fast path",
    ("sim/generator.cc", "kind"): "per-class job shapes of the generator; the classes' table is cost/job_comm.cc",
    ("formats/cluster_format.cc", "h.kind"): "Kubernetes kinds the format detector looks for in a head",
    ("formats/nvidia_topo.cc", "word(i)"): "the column titles of nvidia-smi topo -m, read by its reader",
    ("topology/yaml_input.cc", "s"): "YAML's spellings of true and false, in the one YAML field reader",
    ("placement/job_schema.cc", "text"): "the spellings of true and false in a job field",
    ("placement/policies/slurm_block.cc", "r.slurm_version"): "Slurm versions whose block selection differs",
    ("cli/cmd_route.cc", "o.cache_blocks"): "the special values auto and unlimited of a numeric option",
    ("service/topograph_routes.cc", "name"): "Topograph's engine.name in its HTTP API; the message names the field",
}

# `if (EXPR == "...")` or `else if (EXPR == "...")`, the test opening the condition (the
# literal is blanked to spaces by then).
COMPARE = re.compile(r'\bif\s*\(\s*([A-Za-z_][\w.\->\[\]()*]*?)\s*==\s*" *"')
WINDOW = 12  # lines: comparisons of one EXPR this close together form a chain


def chains_in(path):
    text = blank_literals(open(path, encoding="utf-8", errors="replace").read())
    hits = {}  # expr -> [line numbers]
    for number, line in enumerate(text.split("\n"), 1):
        for m in COMPARE.finditer(line):
            expr = m.group(1)
            hits.setdefault(expr, []).append(number)
    found = []
    for expr, lines in hits.items():
        for a, b in zip(lines, lines[1:]):
            if b - a <= WINDOW:
                found.append((expr, a))
                break
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src")
    parser.add_argument("--check", action="store_true", help="print one line when nothing is found")
    args = parser.parse_args()
    bad, used, total = [], set(), 0
    for root, _, files in os.walk(args.src):
        for f in sorted(files):
            if not f.endswith((".cc", ".h")) or f == "registry.h":
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, args.src)
            for expr, line in chains_in(path):
                total += 1
                if (rel, expr) in ALLOWED:
                    used.add((rel, expr))
                else:
                    bad.append(f"{path}:{line}: an if-chain chooses by '{expr}'; use a Registry "
                               f"(src/topology/registry.h), or add it to ALLOWED in {sys.argv[0]} with the reason")
    stale = [f"{sys.argv[0]}: ALLOWED names {k[0]} '{k[1]}', which has no chain any more; remove it"
             for k in sorted(set(ALLOWED) - used)]
    for line in bad + stale:
        print(line)
    if args.check and not bad and not stale:
        print(f"name chains: none outside Registry ({total} allowed, each with its reason in {sys.argv[0]})")
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.exit(main())
