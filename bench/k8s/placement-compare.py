#!/usr/bin/env python3
"""Placement quality and throughput of three schedulers on one queue, in one run: the default
kube-scheduler with its built-in gang and topology plugins, toposched's extender, and the
plugin build with Toposched as the placement generator (issue 31, acceptance 3;
docs/kubernetes.md, docs/performance.md).

    bench/k8s/placement-compare.py build/release/toposched [--clusters superpod,gb200] [--json FILE]
        [--schedulers default,extender,plugin] [--logs DIR]

For each cluster (a DGX H100 SuperPOD, `preset:dgx-h100?nodes=128`: 4 leaves of 32 nodes of 8
GPUs; GB200 NVL72, `preset:gb200-nvl72?racks=8`: 8 NVLink domains of 18 trays of 4 GPUs) the
control plane of the tests (tests/e2e/k8s_harness.py) runs with the feature gates
GenericWorkload and TopologyAwareWorkloadScheduling on and scheduling.k8s.io/v1beta1 served,
fake nodes carrying the labels of `toposched export --to k8s-labels`. The same queue (QUEUES
below: single pods of 1 to 4 GPUs, then gangs with a parallel plan, some with a topology
constraint, then, once those are bound, gangs of 1- and 2-GPU pods whose TP groups span pods)
is created in the same order for each scheduler, one after the other:

  default   upstream kube-scheduler v1.37.2, default plugins (with the gates: GangScheduling,
            TopologyPlacementGenerator, PodGroupPodsCount); gangs are scheduling.k8s.io
            PodGroups (gang.minCount, schedulingConstraints.topology[0].key), pods joined by
            spec.schedulingGroup.
  extender  upstream kube-scheduler with deploy/kubernetes/scheduler-config.yaml's extender and
            a fresh `toposched serve --k8s-extender`; gangs as scheduler-plugins coscheduling
            labels, the constraint as Kueue's podset-required-topology where it names a fabric
            tier (serve has no tier for an NVLink domain label: those groups carry none).
  plugin    toposched-kube-scheduler with deploy/kubernetes/scheduler-plugin-config.yaml's
            profile plus Toposched as the placementGenerate plugin (TopologyPlacementGenerator
            disabled there), a fresh serve; the PodGroups and pods of `default`.

Every pod carries toposched.io/tp|pp|dp (only toposched reads them). Per scheduler: pods
bound per second (first create to last bind seen; polled every 0.25 s; the phase ends when
every pod is bound or nothing more was bound for --stall seconds after the last create),
gangs bound whole, gangs with a constraint bound inside one domain of it, and the predicted
step time of every bound gang from `toposched cost --job --placement` (`step_us`: the plan's
compute and exposed communication on its GPUs in rank order, member i holding ranks
i x g .. i x g + g - 1; a member's GPUs are its toposched.io/gpus, else, for the default
scheduler, the node's lowest indices no other bound gang member was given). Everything it
starts is stopped by PID."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))

# One namespace per scheduler: the PodGroups of the one before stay behind (their deletion
# waits on a finalizer that no controller manager removes here), its pods are deleted.
NAMESPACE = "bench"
PREFIX = "/toposched"
LEAF = "fabric.topograph.run/tier-0"
DOMAIN = "accelerator.topograph.run/domain"
FABRIC_KEYS = (LEAF, "fabric.topograph.run/tier-1", "kubernetes.io/hostname")

# name, pods, GPUs per pod, plan (tp, pp, dp), topology key or None. Singles first: they
# leave partly used nodes behind, as a busy cluster has.
# SMALL_PODS: sp-h/sp-i and gb-g/gb-h are gangs of 1- and 2-GPU pods whose tensor-parallel
# group of 8 spans pods, the shape of a PyTorchJob or JobSet launched with one process per pod
# (nproc_per_node=1, or 2): rank r is pod r // g, and ranks 0-7 form the first TP group. No
# scheduler is told the TP group; kube-scheduler's per-pod scores (NodeResourcesFit
# LeastAllocated, NodeResourcesBalancedAllocation) favour the emptiest nodes for each member,
# so a gang of small pods is spread node by node, and its TP groups cross nodes (SuperPOD:
# InfiniBand instead of NVLink) or racks (GB200), whatever the topology constraint, which only
# keeps the gang in one leaf or rack. Toposched reads toposched.io/tp and packs each TP group
# on one node's (or one rack's) NVLink. They are submitted later ("later": created once the
# first wave is bound), into the filled cluster: created with the others, their members would
# compete for empty nodes with the whole-node gangs (the default spreads small pods over the
# emptiest nodes, and the SuperPOD queue leaves sp-b few spare ones), and the comparison would
# turn on which gangs fit at all rather than on the step times of the same gangs.
QUEUES = {
    "superpod": {
        "cluster": "preset:dgx-h100?nodes=128",
        "singles": [1, 2, 4, 1, 3, 2, 4, 1, 2, 1, 4, 2, 1, 3, 1, 2, 4, 1, 2, 1, 1, 2, 4, 3],
        "gangs": [
            ("sp-a", 16, 8, (8, 2, 8), LEAF),
            ("sp-b", 40, 8, (8, 4, 10), None),
            ("sp-c", 8, 8, (8, 1, 8), LEAF),
            ("sp-d", 12, 4, (4, 2, 6), LEAF),
            ("sp-e", 24, 8, (8, 3, 8), None),
            ("sp-f", 8, 4, (4, 1, 8), None),
            ("sp-g", 4, 8, (8, 4, 1), LEAF),
            # Gangs of small pods (SMALL_PODS below): one GPU per rank, TP groups across pods.
            ("sp-h", 32, 1, (8, 1, 4), LEAF),
            ("sp-i", 16, 2, (8, 1, 4), None),
        ],
        "later": {"sp-h", "sp-i"},
    },
    "gb200": {
        "cluster": "preset:gb200-nvl72?racks=8",
        "singles": [1, 2, 1, 4, 1, 2, 3, 1, 2, 1, 1, 2, 4, 1, 2, 1],
        "gangs": [
            ("gb-a", 16, 4, (8, 2, 4), DOMAIN),
            ("gb-b", 36, 4, (8, 2, 9), None),
            ("gb-c", 9, 4, (4, 1, 9), DOMAIN),
            ("gb-d", 18, 4, (8, 3, 3), None),
            ("gb-e", 8, 4, (8, 1, 4), DOMAIN),
            ("gb-f", 24, 4, (8, 2, 6), None),
            ("gb-g", 16, 1, (8, 1, 2), DOMAIN),
            ("gb-h", 16, 2, (8, 1, 4), None),
        ],
        "later": {"gb-g", "gb-h"},
    },
}


def base_pod(ns, name, gpus, labels=None, annotations=None):
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"schedulerName": "toposched-scheduler", "restartPolicy": "Never",
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": resources, "limits": resources}}]}}


def gang_pod(ns, gang, index, native):
    name, size, gpus, (tp, pp, dp), key = gang
    labels = {"batch.kubernetes.io/job-completion-index": str(index)}
    annotations = {"toposched.io/tp": str(tp), "toposched.io/pp": str(pp), "toposched.io/dp": str(dp)}
    if not native:
        labels["scheduling.x-k8s.io/pod-group"] = name
        annotations["scheduling.x-k8s.io/min-member"] = str(size)
        if key in FABRIC_KEYS:
            annotations["kueue.x-k8s.io/podset-required-topology"] = key
    p = base_pod(ns, f"{name}-{index}", gpus, labels, annotations)
    if native:
        p["spec"]["schedulingGroup"] = {"podGroupName": name}
    return p


def podgroup(ns, gang):
    name, size, _, _, key = gang
    spec = {"schedulingPolicy": {"gang": {"minCount": size}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def create_gangs(kube, ns, gangs, native):
    """Creates the gangs' pods, members interleaved, as controllers creating several jobs at
    once would; answers their names."""
    names = []
    most = max((g[1] for g in gangs), default=0)
    for i in range(most):
        for g in gangs:
            if i < g[1]:
                kube.api.create(f"/api/v1/namespaces/{ns}/pods", gang_pod(ns, g, i, native))
                names.append(f"{g[0]}-{i}")
    return names


def create_queue(kube, ns, queue, native):
    """Creates the queue's first wave in its order (singles, then the gangs not in `later`);
    answers every pod name."""
    names = []
    for i, gpus in enumerate(queue["singles"]):
        kube.api.create(f"/api/v1/namespaces/{ns}/pods", base_pod(ns, f"single-{i}", gpus))
        names.append(f"single-{i}")
    if native:
        for g in queue["gangs"]:
            kube.api.create(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups", podgroup(ns, g))
    return names + create_gangs(kube, ns, [g for g in queue["gangs"] if g[0] not in queue["later"]], native)


def measure(kube, ns, queue, native, stall_s):
    """Creates the queue and follows it: (pods by name, bound count, seconds to the last bind,
    seconds to the last create). The `later` gangs are created once the first wave is bound
    (or stalled): jobs submitted into the filled cluster."""
    start = time.monotonic()
    names = create_queue(kube, ns, queue, native)
    later = [g for g in queue["gangs"] if g[0] in queue["later"]]
    created = time.monotonic()
    bound, last_bind = 0, start
    while True:
        pods = {p["metadata"]["name"]: p for p in kube.pods(ns)}
        now_bound = sum(1 for p in pods.values() if p["spec"].get("nodeName"))
        now = time.monotonic()
        if now_bound > bound:
            bound, last_bind = now_bound, now
        if later and (bound == len(names) or (now - max(created, last_bind) > stall_s)):
            names += create_gangs(kube, ns, later, native)
            later = []
            created = time.monotonic()
            continue
        if bound == len(names) or (now - max(created, last_bind) > stall_s):
            return pods, bound, last_bind - start, created - start
        time.sleep(0.25)


def delete_pods(kube, ns):
    kube.api.delete(f"/api/v1/namespaces/{ns}/pods")
    deadline = time.monotonic() + 300
    while kube.pods(ns) and time.monotonic() < deadline:
        time.sleep(0.5)


def node_labels(kube):
    return {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in kube.api.get("/api/v1/nodes")["items"]}


def gang_results(toposched, cluster, queue, pods, labels, workdir):
    """Per gang: bound whole, inside one domain of its key, and its predicted step time."""
    given = {}  # node -> GPU indices given to gang members without toposched.io/gpus
    out = []
    for name, size, gpus, (tp, pp, dp), key in queue["gangs"]:
        members = [pods.get(f"{name}-{i}") for i in range(size)]
        on = [m["spec"].get("nodeName") if m else None for m in members]
        row = {"gang": name, "pods": size, "gpus_per_pod": gpus, "plan": f"tp{tp} pp{pp} dp{dp}", "key": key or "",
               "bound": sum(1 for n in on if n), "whole": all(on)}
        if not row["whole"]:
            out.append(row)
            continue
        row["nodes"] = len(set(on))
        # Domains spanned: of the gang's key; without one, NVLink domains (GB200), else leaves.
        row["domains"] = len({labels[n].get(key, "") for n in on}) if key else \
            len({labels[n].get(DOMAIN) or labels[n].get(LEAF, "") for n in on})
        row["in_one_domain"] = (row["domains"] == 1) if key else None
        ranks = []
        for m, n in zip(members, on):
            a = m["metadata"].get("annotations", {})
            if "toposched.io/gpus" in a:
                idx = [int(x) for x in a["toposched.io/gpus"].split(",")]
            else:
                used = given.setdefault(n, set())
                idx = [i for i in range(64) if i not in used][:gpus]
                used.update(idx)
            ranks += [f"{n}:{i}" for i in idx]
        job = os.path.join(workdir, f"{name}.job.yaml")
        place = os.path.join(workdir, f"{name}.placement.json")
        with open(job, "w") as f:
            f.write(f"name: {name}\nplan: {{tp: {tp}, pp: {pp}, dp: {dp}}}\nworkload: llm-dense\n")
        with open(place, "w") as f:
            json.dump({"gpus": ranks}, f)
        r = subprocess.run([toposched, "cost", "--cluster", cluster, "--job", job, "--placement", place,
                            "--format", "json"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"toposched cost for {name}: {r.stderr}")
        cost = json.loads(r.stdout)
        row["gpus"] = ranks
        row["step_ms"] = cost["step_us"] / 1000
        row["ideal_step_ms"] = cost["ideal_step_us"] / 1000
        out.append(row)
    return out


def plugin_generator_config(plugin_scheduler_config, kube, serve_url):
    """The plugin build's profile with Toposched as the placement generator (the file the
    harness writes, edited: TopologyPlacementGenerator out of placementGenerate)."""
    cfg = plugin_scheduler_config(serve_url, kube.kubeconfig)
    for profile in cfg["profiles"]:
        profile["plugins"]["placementGenerate"] = {"disabled": [{"name": "TopologyPlacementGenerator"}],
                                                   "enabled": [{"name": "Toposched"}]}
    return cfg


def start_plugin_with_generator(kube, serve_url):
    """kube.start_scheduler(plugin=True), but with plugin_generator_config's profile."""
    import yaml  # noqa: E402
    import k8s_harness  # noqa: E402
    original = k8s_harness.plugin_scheduler_config
    k8s_harness.plugin_scheduler_config = lambda url, kubeconfig, wait=None: plugin_generator_config(original, kube, url)
    try:
        kube.start_scheduler(serve_url, True, plugin=True)
    finally:
        k8s_harness.plugin_scheduler_config = original
    with open(os.path.join(kube.dir, "scheduler-config.yaml")) as f:
        assert yaml.safe_load(f)["profiles"][0]["plugins"]["placementGenerate"]["enabled"][0]["name"] == "Toposched"


def placements(pods):
    """Every bound pod's node and toposched.io/gpus (None where toposched did not place it)."""
    out = {}
    for name, p in sorted(pods.items()):
        node = p["spec"].get("nodeName")
        if node:
            out[name] = {"node": node, "gpus": p["metadata"].get("annotations", {}).get("toposched.io/gpus")}
    return out


def run_cluster(toposched, name, queue, stall_s, workdir, schedulers=("default", "extender", "plugin"), logs=None):
    from k8s_harness import ControlPlane, topology_labels  # noqa: E402
    from serve_harness import Server  # noqa: E402
    cluster = queue["cluster"]
    results = {}
    serve_args = lambda kube: ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", kube.url(),  # noqa: E731
                               "--k8s-token-file", kube.token_file, "--k8s-ca-file", kube.ca_file]
    with ControlPlane(feature_gates=["GenericWorkload=true", "TopologyAwareWorkloadScheduling=true"],
                      runtime_config=["scheduling.k8s.io/v1beta1=true"]) as kube:
        kube.add_nodes(sorted(topology_labels(toposched, cluster).items()),
                       gpus=4 if "gb200" in cluster else 8)
        labels = node_labels(kube)
        for sched in schedulers:
            ns = f"{NAMESPACE}-{sched}"
            kube.ensure_namespace(ns)
            serve = None
            try:
                if sched == "default":
                    kube.start_scheduler("", True)
                else:
                    serve = Server(cluster, "sqlite:" + os.path.join(workdir, f"{name}-{sched}.db"), workdir,
                                   serve_args(kube))
                    serve.__enter__()
                    if sched == "extender":
                        kube.start_scheduler(f"{serve.url()}{PREFIX}", True)
                    else:
                        start_plugin_with_generator(kube, f"{serve.url()}{PREFIX}")
                pods, bound, elapsed, created = measure(kube, ns, queue, sched != "extender", stall_s)
                gangs = gang_results(toposched, cluster, queue, pods, labels, os.path.join(workdir, f"{name}-{sched}"))
                with open(os.path.join(kube.dir, "kube-scheduler.log"), errors="replace") as f:
                    log = f.read()
                chosen = log.count("toposched chose the pod group's placement")
                if logs:
                    os.makedirs(logs, exist_ok=True)
                    with open(os.path.join(logs, f"{name}-{sched}-kube-scheduler.log"), "w") as f:
                        f.write(log)
                results[sched] = {"pods": len(pods), "bound": bound, "seconds": round(elapsed, 2),
                                  "toposched_generated_placements": chosen - sum(
                                      r["toposched_generated_placements"] for r in results.values()),
                                  "created_after_s": round(created, 2),
                                  "pods_per_s": round(bound / elapsed, 1) if elapsed > 0 else None, "gangs": gangs,
                                  "placements": placements(pods)}
                print(f"[{name}] {sched}: {bound}/{len(pods)} pods bound in {elapsed:.1f} s "
                      f"({results[sched]['pods_per_s']} pods/s), gangs whole "
                      f"{sum(g['whole'] for g in gangs)}/{len(gangs)}; placements chosen by Toposched's generator: "
                      f"{results[sched]['toposched_generated_placements']}", flush=True)
            finally:
                kube.stop_scheduler()
                if serve is not None:
                    serve.__exit__(None, None, None)
                delete_pods(kube, ns)
    return results


def table(name, results):
    scheds = list(results)
    gangs = [g["gang"] for g in results[scheds[0]]["gangs"]]
    lines = [f"### {name}", "",
             "| gang | pods x GPUs | plan | constraint | " + " | ".join(f"{s} step (ms)" for s in scheds) + " |",
             "|---|---|---|---|" + "---|" * len(scheds)]
    for i, g in enumerate(gangs):
        row0 = results[scheds[0]]["gangs"][i]
        cells = []
        for s in scheds:
            r = results[s]["gangs"][i]
            if not r["whole"]:
                cells.append(f"not placed ({r['bound']}/{r['pods']} bound)")
                continue
            dom = "" if r["in_one_domain"] is None else (" (1 domain)" if r["in_one_domain"] else " (**split**)")
            cells.append(f"{r['step_ms']:.1f}, {r['domains']} dom.{dom}")
        key = row0["key"].split("/")[-1] if row0["key"] else "none"
        lines.append(f"| {g} | {row0['pods']} x {row0['gpus_per_pod']} | {row0['plan']} | {key} | " +
                     " | ".join(cells) + " |")
    lines.append("")
    lines.append("| | " + " | ".join(scheds) + " |")
    lines.append("|---|" + "---|" * len(scheds))
    lines.append("| pods bound / pods/s | " + " | ".join(
        f"{results[s]['bound']}/{results[s]['pods']} in {results[s]['seconds']} s: {results[s]['pods_per_s']}"
        for s in scheds) + " |")
    lines.append("| gangs bound whole | " + " | ".join(
        f"{sum(g['whole'] for g in results[s]['gangs'])}/{len(gangs)}" for s in scheds) + " |")
    means, common_means = [], []
    common = [i for i in range(len(gangs)) if all(results[s]["gangs"][i]["whole"] for s in scheds)]
    for s in scheds:
        multi = [g["step_ms"] for g in results[s]["gangs"] if g["whole"] and g["nodes"] > 1]
        means.append(f"{sum(multi) / len(multi):.1f} ({len(multi)} gangs)" if multi else "-")
        both = [results[s]["gangs"][i]["step_ms"] for i in common if results[s]["gangs"][i]["nodes"] > 1]
        common_means.append(f"{sum(both) / len(both):.1f} ({len(both)} gangs)" if both else "-")
    lines.append("| mean step of the multi-node gangs it placed (ms) | " + " | ".join(means) + " |")
    lines.append("| the same, over the gangs every scheduler placed (ms) | " + " | ".join(common_means) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--clusters", default="superpod,gb200")
    ap.add_argument("--stall", type=float, default=40.0,
                    help="seconds without a new binding, after the last create, that end a phase")
    ap.add_argument("--schedulers", default="default,extender,plugin",
                    help="the phases to run, in this order (all three for the comparison)")
    ap.add_argument("--logs", help="copy each phase's kube-scheduler log into this folder")
    ap.add_argument("--json", help="write every figure here too (and every bound pod's node and GPUs)")
    a = ap.parse_args()
    os.environ["TOPOSCHED"] = os.path.abspath(a.binary)
    from k8s_harness import PLUGIN_SCHEDULER, bin_dir  # noqa: E402
    upstream = os.path.join(bin_dir(), "kube-scheduler")
    for what, path in (("default and extender", upstream), ("plugin", PLUGIN_SCHEDULER)):
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
        print(f"{what}: {os.path.realpath(path)} ({version})", flush=True)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for name in a.clusters.split(","):
            os.makedirs(os.path.join(d, name), exist_ok=True)
            for s in ("default", "extender", "plugin"):
                os.makedirs(os.path.join(d, f"{name}-{s}"), exist_ok=True)
            out[name] = run_cluster(os.environ["TOPOSCHED"], name, QUEUES[name], a.stall, d,
                                    a.schedulers.split(","), a.logs)
            print(table(f"{name} ({QUEUES[name]['cluster']})", out[name]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
