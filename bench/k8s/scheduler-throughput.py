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
(--no-plugin skips it). Everything it starts is stopped by PID."""
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


def run(kube, scheduler_name, pods, prefix, timeout_s=900):
    """Pods bound per second for `pods` new pods named PREFIX-N."""
    names = [f"{prefix}-{i}" for i in range(pods)]
    start = time.monotonic()

    def create(part):
        for name in part:
            kube.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod(name, scheduler_name))

    threads = [threading.Thread(target=create, args=(names[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
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
    a = ap.parse_args()
    os.environ["TOPOSCHED"] = os.path.abspath(a.binary)
    from k8s_harness import SCHEDULER_NAME, ControlPlane, topology_labels  # noqa: E402
    from serve_harness import Server  # noqa: E402
    cluster = f"preset:dgx-h100?nodes={a.nodes}"
    with tempfile.TemporaryDirectory() as d, ControlPlane() as kube:
        t0 = time.monotonic()
        kube.add_nodes(sorted(topology_labels(os.environ["TOPOSCHED"], cluster).items()), gpus=8)
        kube.ensure_namespace(NAMESPACE)
        print(f"{a.nodes} fake nodes created in {time.monotonic() - t0:.1f} s")
        kube.start_scheduler("", True)
        rate, elapsed, created = run(kube, SCHEDULER_NAME, a.pods, "plain")
        print(f"without the extender: {a.pods} pods bound in {elapsed:.1f} s: {rate:.1f} pods/s "
              f"(all created after {created:.1f} s)")
        delete_all(kube)
        with Server(cluster, "sqlite:" + os.path.join(d, "bench.db"), d,
                    ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", kube.url(),
                     "--k8s-token-file", kube.token_file, "--k8s-ca-file", kube.ca_file]) as serve:
            kube.start_scheduler(f"{serve.url()}{PREFIX}", True)
            rate, elapsed, created = run(kube, SCHEDULER_NAME, a.pods, "ext")
            print(f"with the extender (nodeCacheCapable): {a.pods} pods bound in {elapsed:.1f} s: "
                  f"{rate:.1f} pods/s (all created after {created:.1f} s)")
        kube.stop_scheduler()
        if a.no_plugin:
            return
        delete_all(kube)
        with Server(cluster, "sqlite:" + os.path.join(d, "bench-plugin.db"), d,
                    ["--k8s-extender", "--url-prefix", PREFIX, "--k8s-api", kube.url(),
                     "--k8s-token-file", kube.token_file, "--k8s-ca-file", kube.ca_file]) as serve:
            kube.start_scheduler(f"{serve.url()}{PREFIX}", True, plugin=True)
            rate, elapsed, created = run(kube, SCHEDULER_NAME, a.pods, "plugin")
            print(f"plugin build (toposched-kube-scheduler): {a.pods} pods bound in {elapsed:.1f} s: "
                  f"{rate:.1f} pods/s (all created after {created:.1f} s)")
        kube.stop_scheduler()


if __name__ == "__main__":
    main()
