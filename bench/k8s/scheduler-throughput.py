#!/usr/bin/env python3
"""Scheduling throughput of the real kube-scheduler on 1,000 fake DGX H100 nodes, without and
with toposched's extender, and of the plugin build (toposched-kube-scheduler), in one run
(issue 30, acceptance 6; issue 31, acceptance 4; docs/performance.md).

    bench/k8s/scheduler-throughput.py build/release/toposched [--pods 2000] [--nodes 1000]

The control plane of the tests (tests/e2e/k8s_harness.py: etcd, kube-apiserver and
kube-scheduler built by scripts/install-k8s-test-binaries) with --nodes fake nodes carrying
the labels `toposched export --to k8s-labels` writes. Each run creates --pods single pods
of one GPU from 4 client threads and measures, from the first create to the last pod with
spec.nodeName, the pods bound per second: first with deploy/kubernetes/scheduler-config.yaml's
profile without its extender, then with it (nodeCacheCapable: true, a fresh
`toposched serve --k8s-extender`), then the plugin build with
deploy/kubernetes/scheduler-plugin-config.yaml's profile against another fresh `serve`
(--no-plugin skips it). With --precreate each phase's pods are created while no scheduler
runs and the time counts from the scheduler's start (its /healthz), so the figure is the
scheduler's and not this client's creation rate (on a loaded machine the creates took as
long as the scheduling). Everything it starts is stopped by PID."""
import argparse
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))

NAMESPACE = "bench"
PREFIX = "/toposched"


def pod(name, scheduler_name):
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"schedulerName": scheduler_name, "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": resources, "limits": resources}}]}}


def bound_count(kube):
    return sum(1 for p in kube.pods(NAMESPACE) if p["spec"].get("nodeName"))


def create_pods(kube, scheduler_name, names):
    for name in names:
        kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod(name, scheduler_name))


def create_in_parallel(kube, scheduler_name, names):
    threads = [threading.Thread(target=create_pods, args=(kube, scheduler_name, names[i::4])) for i in range(4)]
    for t in threads:
        t.start()
    return threads


def run_precreated(kube, scheduler_name, pods, prefix, start_scheduler, timeout_s=900):
    """--precreate: the pods are created while no scheduler runs, then the scheduler starts;
    pods bound per second from the scheduler's /healthz answering to the last bind (what the
    scheduler does, not how fast this client creates), and the seconds to the first bind."""
    names = [f"{prefix}-{i}" for i in range(pods)]
    for t in create_in_parallel(kube, scheduler_name, names):
        t.join()
    start_scheduler()
    start = time.monotonic()
    first = None
    while True:
        done = bound_count(kube)
        if done and first is None:
            first = time.monotonic() - start
        if done >= pods:
            break
        if time.monotonic() - start > timeout_s:
            raise SystemExit(f"only {done} of {pods} pods bound after {timeout_s} s")
        time.sleep(0.25)
    elapsed = time.monotonic() - start
    return pods / elapsed, elapsed, first


def run(kube, scheduler_name, pods, prefix, timeout_s=900):
    """Pods bound per second for `pods` new pods named PREFIX-N."""
    names = [f"{prefix}-{i}" for i in range(pods)]
    start = time.monotonic()
    threads = create_in_parallel(kube, scheduler_name, names)
    created_s = None
    while True:
        if created_s is None and not any(t.is_alive() for t in threads):
            created_s = time.monotonic() - start
        done = bound_count(kube)
        if done >= pods:
            break
        if time.monotonic() - start > timeout_s:
            raise SystemExit(f"only {done} of {pods} pods bound after {timeout_s} s")
        time.sleep(0.25)
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    if created_s is None:  # the last create and the last bind fell in one poll
        created_s = elapsed
    return pods / elapsed, elapsed, created_s


def delete_all(kube):
    kube.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods")  # grace 0: no kubelet confirms
    deadline = time.monotonic() + 300
    while kube.pods(NAMESPACE) and time.monotonic() < deadline:
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--no-plugin", action="store_true", help="skip the plugin build's run")
    ap.add_argument("--precreate", action="store_true",
                    help="create each phase's pods before its scheduler starts; time from its start")
    a = ap.parse_args()
    os.environ["TOPOSCHED"] = os.path.abspath(a.binary)
    from k8s_harness import SCHEDULER_NAME, ControlPlane, topology_labels  # noqa: E402
    from serve_harness import Server  # noqa: E402
    cluster = f"preset:dgx-h100?nodes={a.nodes}"
    rates = {}

    def phase(label, prefix, start_scheduler):
        if a.precreate:
            kube.stop_scheduler()
            rate, elapsed, first = run_precreated(kube, SCHEDULER_NAME, a.pods, prefix, start_scheduler)
            print(f"{label}: {a.pods} pre-created pods bound in {elapsed:.1f} s from the scheduler's start: "
                  f"{rate:.1f} pods/s (first bind after {first:.1f} s)", flush=True)
        else:
            start_scheduler()
            rate, elapsed, created = run(kube, SCHEDULER_NAME, a.pods, prefix)
            print(f"{label}: {a.pods} pods bound in {elapsed:.1f} s: {rate:.1f} pods/s "
                  f"(all created after {created:.1f} s)", flush=True)
        rates[label] = rate
        kube.stop_scheduler()
        delete_all(kube)

    def serve_args():
        return ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", kube.url(),
                "--k8s-token-file", kube.token_file, "--k8s-ca-file", kube.ca_file]

    with tempfile.TemporaryDirectory() as d, ControlPlane() as kube:
        t0 = time.monotonic()
        kube.add_nodes(sorted(topology_labels(os.environ["TOPOSCHED"], cluster).items()), gpus=8)
        kube.ensure_namespace(NAMESPACE)
        print(f"{a.nodes} fake nodes created in {time.monotonic() - t0:.1f} s", flush=True)
        phase("without the extender", "plain", lambda: kube.start_scheduler("", True))
        with Server(cluster, "sqlite:" + os.path.join(d, "bench.db"), d, serve_args()) as serve:
            phase("with the extender (nodeCacheCapable)", "ext",
                  lambda: kube.start_scheduler(f"{serve.url()}{PREFIX}", True))
        if a.no_plugin:
            return
        with Server(cluster, "sqlite:" + os.path.join(d, "bench-plugin.db"), d, serve_args()) as serve:
            phase("plugin build (toposched-kube-scheduler)", "plugin",
                  lambda: kube.start_scheduler(f"{serve.url()}{PREFIX}", True, plugin=True))
        base = rates["without the extender"]
        print(f"plugin build / default: {100 * rates['plugin build (toposched-kube-scheduler)'] / base:.0f}%; "
              f"extender / default: {100 * rates['with the extender (nodeCacheCapable)'] / base:.0f}%")


if __name__ == "__main__":
    main()
