"""A stand-in for kube-scheduler and the Kubernetes API server, for the extender e2e tests.

No real API server or kube-scheduler can run on the test machines, so this module replays
what kube-scheduler does with an HTTP extender, as its source does it (kubernetes/kubernetes
pkg/scheduler/schedule_one.go and pkg/scheduler/extender.go, read at commit 02850301e6):

- one pod at a time from the queue (scheduleOne); unschedulable pods go back to the queue
  (here: to its end, after the pods that were waiting);
- findNodesThatFitPod: the scheduler's own filters first (here NodeResourcesFit on
  nvidia.com/gpu, counting *assumed* pods, i.e. pods chosen but maybe not bound yet), then
  each extender's filter (findNodesThatPassExtenders) with either NodeNames
  (nodeCacheCapable: true) or the full NodeList; a result naming a node that was not sent is
  an error; FailedNodes / FailedAndUnresolvableNodes only become statuses;
- schedulePod: with exactly one feasible node, no scoring at all; otherwise prioritizeNodes
  calls the extender's prioritize and adds score * weight * (MaxNodeScore / MaxExtenderPriority)
  (100 / 10), and selectHost takes the best (ties broken at random);
- assume, then the binding cycle runs in a goroutine (here a thread): extendersBinding posts
  ExtenderBindingArgs to the extender's bind verb; on an error the pod is forgotten (its
  assumed GPUs returned) and requeued;
- HTTPExtender.send: json.Marshal of the args, POST with Content-Type: application/json, Go's
  net/http client headers (User-Agent: Go-http-client/1.1, Accept-Encoding: gzip); any status
  but 200 is an error; the body is decoded with json.NewDecoder.

ApiServerStub records the Binding objects toposched posts (POST
/api/v1/namespaces/{ns}/pods/{name}/binding) and answers 201 like the API server, 409 when a
pod is bound twice, 401 without the expected bearer token.
"""

import http.client
import http.server
import json
import random
import re
import threading
import time


def go_json(value):
    """json.Marshal's bytes: compact, non-ASCII kept, <, >, & and U+2028/9 escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text.encode("utf-8")


def make_pod(name, gpus, namespace="ml", labels=None, annotations=None, uid=None):
    """A v1.Pod as kube-scheduler holds it from the API server, in Go's field order."""
    resources = {"limits": {"cpu": "8", "memory": "64Gi"}, "requests": {"cpu": "8", "memory": "64Gi"}}
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
    meta = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}",
            "resourceVersion": "1", "creationTimestamp": "2026-11-30T12:00:00Z"}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {
        "metadata": meta,
        "spec": {
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "resources": resources,
                            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                            "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    }


def pod_gpus(pod):
    return int(pod["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", "0"))


class ApiServerStub:
    """Records Bindings like the API server's pods/binding subresource (no real API server
    can run here)."""

    def __init__(self, token):
        self.token = token
        self.bindings = []  # (namespace, pod, body)
        self.bound = {}     # (namespace, pod) -> node
        self.lock = threading.Lock()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding", self.path)
                if not m:
                    return self.reply(404, {"kind": "Status", "message": "not found", "code": 404})
                if self.headers.get("Authorization") != f"Bearer {stub.token}":
                    return self.reply(401, {"kind": "Status", "message": "Unauthorized", "code": 401})
                binding = json.loads(body)
                key = (m.group(1), m.group(2))
                with stub.lock:
                    if key in stub.bound:
                        return self.reply(409, {"kind": "Status", "code": 409, "message":
                                                f"pod {key[1]} is already assigned to node \"{stub.bound[key]}\""})
                    stub.bound[key] = binding["target"]["name"]
                    stub.bindings.append((key[0], key[1], binding))
                self.reply(201, {"kind": "Status", "status": "Success", "code": 201})

            def reply(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def post(port, path, body, headers=None):
    """POST as Go's net/http client does; returns (status, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        h = {"Host": f"127.0.0.1:{port}", "User-Agent": "Go-http-client/1.1", "Content-Length": str(len(body)),
             "Content-Type": "application/json", "Accept-Encoding": "gzip"}
        h.update(headers or {})
        conn.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
        for k, v in h.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class KubeSchedulerReplay:
    """kube-scheduler's scheduling and binding cycles against one HTTP extender."""

    def __init__(self, extender_port, prefix, nodes, gpus_per_node, node_cache_capable=True, weight=1,
                 seed=1, before_filter=None):
        self.port = extender_port
        self.prefix = prefix.rstrip("/")
        self.nodes = list(nodes)
        self.capacity = {n: gpus_per_node for n in self.nodes}
        self.assumed = {n: 0 for n in self.nodes}   # GPUs of assumed (and bound) pods
        self.node_cache_capable = node_cache_capable
        self.weight = weight
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.binds = []           # bind threads
        self.placed = {}          # pod name -> node (bind succeeded)
        self.unschedulable = {}   # pod name -> last reason
        self.errors = []          # protocol violations
        self.calls = {"filter": 0, "prioritize": 0, "bind": 0}
        self.before_filter = before_filter

    def send(self, verb, args):
        self.calls[verb] = self.calls.get(verb, 0) + 1
        status, body = post(self.port, f"{self.prefix}/{verb}", go_json(args))
        if status != 200:
            raise RuntimeError(f"failed {verb} with extender at URL {self.prefix}/{verb}, code {status}")
        return json.loads(body)

    def node_object(self, name):
        return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": {}, "status": {"allocatable": {"nvidia.com/gpu": str(self.capacity[name])}}}

    def extender_args(self, pod, feasible):
        if self.node_cache_capable:
            return {"Pod": pod, "Nodes": None, "NodeNames": feasible}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": [self.node_object(n) for n in feasible]},
                "NodeNames": None}

    def schedule_one(self, pod):
        """One scheduling cycle; returns the chosen node or None (unschedulable)."""
        name = pod["metadata"]["name"]
        need = pod_gpus(pod)
        with self.lock:
            feasible = [n for n in self.nodes if self.capacity[n] - self.assumed[n] >= need]
        if not feasible:
            self.unschedulable[name] = "0 nodes with enough nvidia.com/gpu"
            return None
        if self.before_filter:
            self.before_filter(pod)
        result = self.send("filter", self.extender_args(pod, feasible))
        if result.get("Error"):
            self.unschedulable[name] = result["Error"]
            return None
        if self.node_cache_capable:
            names = result.get("NodeNames") or []
        else:
            names = [n["metadata"]["name"] for n in ((result.get("Nodes") or {}).get("items") or [])]
        for n in names:
            if n not in feasible:
                self.errors.append(f"extender claims a filtered node {n!r} which is not found in the input node list")
                return None
        if not names:
            failed = result.get("FailedNodes") or {}
            failed.update(result.get("FailedAndUnresolvableNodes") or {})
            self.unschedulable[name] = next(iter(failed.values()), "no node")
            return None
        if len(names) == 1:
            host = names[0]  # schedulePod: one feasible node, no scoring
        else:
            scores = {n: 0 for n in names}
            try:
                for hp in self.send("prioritize", self.extender_args(pod, names)) or []:
                    if hp["Host"] in scores:
                        scores[hp["Host"]] += hp["Score"] * self.weight * (100 // 10)
            except RuntimeError:
                pass  # kube-scheduler ignores prioritize errors
            best = max(scores.values())
            host = self.rng.choice([n for n in names if scores[n] == best])
        with self.lock:
            self.assumed[host] += need
        self.unschedulable.pop(name, None)
        t = threading.Thread(target=self.binding_cycle, args=(pod, host, need))
        t.start()
        self.binds.append(t)
        return host

    def binding_cycle(self, pod, host, need):
        meta = pod["metadata"]
        args = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": host}
        try:
            result = self.send("bind", args)
            err = result.get("Error")
        except Exception as e:  # noqa: BLE001 - any failure requeues, as kube-scheduler does
            err = str(e)
        with self.lock:
            if err:
                self.assumed[host] -= need
                self.unschedulable[meta["name"]] = err
            else:
                self.placed[meta["name"]] = host

    def run(self, queue, max_rounds=3):
        """Schedules the queue; unschedulable pods are retried at the end, up to max_rounds."""
        pending = list(queue)
        for _ in range(max_rounds):
            retry = []
            for pod in pending:
                if self.schedule_one(pod) is None:
                    retry.append(pod)
            self.wait_binds()
            retry = [p for p in retry if p["metadata"]["name"] not in self.placed]
            retry += [p for p in pending if p["metadata"]["name"] in self.unschedulable and p not in retry
                      and p["metadata"]["name"] not in self.placed]
            if not retry:
                break
            pending = retry
        return pending

    def wait_binds(self):
        deadline = time.time() + 60
        for t in self.binds:
            t.join(max(0.1, deadline - time.time()))
        self.binds = [t for t in self.binds if t.is_alive()]
