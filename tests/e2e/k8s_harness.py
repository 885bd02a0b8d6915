"""A throw-away Kubernetes control plane for tests: etcd, kube-apiserver and kube-scheduler on
127.0.0.1, no kubelet, fake nodes created through the API.

The binaries are the ones scripts/install-k8s-test-binaries builds from k8s.io/kubernetes
(kube/go.mod) into its versioned cache folder (`--print-dir`; TOPOSCHED_K8S_BIN overrides the
bin directory). etcd is Debian's, started through etcd_harness.py (one member).

- kube-apiserver: an own CA and serving certificate made with openssl (SAN 127.0.0.1), a
  static token file (one token, group system:masters), loopback only, ports picked free,
  --endpoint-reconciler-type=none (no kubernetes Endpoints to keep), RBAC, and the admission
  plugins a kubelet-less cluster cannot satisfy disabled: ServiceAccount (no controller
  manager creates the `default` ServiceAccount a pod would need) and TaintNodesByCondition
  (no node lifecycle controller would remove the not-ready taint it puts on new nodes).
- kube-scheduler: deploy/kubernetes/scheduler-config.yaml's KubeSchedulerConfiguration with
  the extender's urlPrefix replaced by the one given (a single parameter: where the extender
  verbs are served), nodeCacheCapable as asked, no leader election, the kubeconfig written
  here.
  Or (start_scheduler(plugin=True)) the plugin build: build/kube/toposched-kube-scheduler
  (TOPOSCHED_KUBE_SCHEDULER overrides it) with deploy/kubernetes/scheduler-plugin-config.yaml's
  profile, the Toposched plugin's url replaced by the one given.
- Nodes: add_nodes() creates Node objects (labels as given, kubernetes.io/hostname always)
  and sets their status through the status subresource: capacity and allocatable
  (nvidia.com/gpu, cpu, memory, pods) and Ready=True. Without kubelets a bound pod stays
  Pending with spec.nodeName set, which is all a scheduler test needs; deleting a bound pod
  takes gracePeriodSeconds=0 (no kubelet would confirm a graceful one).

Every process is a direct child, signalled only by its PID; waits are bounded; stop() (or
leaving the `with` block) stops all of them and removes the directory.

    from k8s_harness import ControlPlane
    with ControlPlane(extender_url="http://127.0.0.1:7070/toposched") as kube:
        kube.add_nodes([...])
        kube.api.create("/api/v1/namespaces/ml/pods", pod)
        kube.kubectl("get", "nodes")

Runnable too: `python3 tests/e2e/k8s_harness.py --extender-url URL --nodes-from SPEC`
(scripts/k8s-test-cluster wraps it) prints KUBECONFIG=..., K8S_API=..., K8S_TOKEN_FILE=...,
K8S_CA_FILE=... and the PIDs, and runs until Ctrl-C or SIGTERM.
Not thread-safe, except ApiClient (one connection per thread).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import Dict, Iterable, List, Optional, Tuple

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import EtcdCluster, etcd_available  # noqa: E402
from proc_harness import StartedByWith, die_with_parent, free_ports, log_tail, stop_processes  # noqa: E402

SOURCE_DIR = os.environ.get("TOPOSCHED_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCHEDULER_NAME = "toposched-scheduler"
TOKEN = "toposched-test-admin-token"


class K8sHarnessError(RuntimeError):
    """The control plane could not be started or did not become ready; carries the logs."""


def bin_dir() -> str:
    """Where kube-apiserver, kube-scheduler and kubectl are: TOPOSCHED_K8S_BIN, else the
    cache folder of scripts/install-k8s-test-binaries."""
    if os.environ.get("TOPOSCHED_K8S_BIN"):
        return os.environ["TOPOSCHED_K8S_BIN"]
    script = os.path.join(SOURCE_DIR, "scripts", "install-k8s-test-binaries")
    out = subprocess.run([script, "--print-dir"], capture_output=True, text=True, timeout=30, check=True)
    return os.path.join(out.stdout.strip(), "bin")


def binaries_missing() -> Optional[str]:
    """None when every binary the control plane needs is here, else what is missing. Tests
    fail on it (make test builds the binaries first); they never skip."""
    missing = [b for b in ("kube-apiserver", "kube-scheduler", "kubectl")
               if not os.access(os.path.join(bin_dir(), b), os.X_OK)]
    reason = etcd_available()
    if missing:
        return (f"{', '.join(missing)} not in {bin_dir()}: run scripts/install-k8s-test-binaries "
                "(make test does)") + (f"; {reason}" if reason else "")
    return reason


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str):
        super().__init__(f"{method} {path}: HTTP {status}: {body[:2000]}")
        self.status = status
        self.body = body


class ApiClient:
    """HTTPS to the API server with the bearer token, verified against the harness's CA.
    One keep-alive connection per thread."""

    def __init__(self, host: str, port: int, token: str, ca_file: str):
        self.host, self.port, self.token, self.ca_file = host, port, token, ca_file
        self.context: Optional[ssl.SSLContext] = None  # made on first use: the CA comes later
        self.local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        c = getattr(self.local, "conn", None)
        if self.context is None:
            self.context = ssl.create_default_context(cafile=self.ca_file)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)
            self.local.conn = c
        return c

    def request(self, method: str, path: str, body=None,
                content_type: str = "application/json") -> Tuple[int, object]:
        """(status, decoded JSON body or text). Retries once on a dropped keep-alive."""
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(2):
            c = self._conn()
            try:
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                raw = r.read().decode()
                break
            except (http.client.HTTPException, OSError):
                c.close()
                self.local.conn = None
                if attempt == 1:
                    raise
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw

    def ok(self, method: str, path: str, body=None, content_type: str = "application/json"):
        status, out = self.request(method, path, body, content_type)
        if status >= 300:
            raise ApiError(method, path, status, json.dumps(out) if not isinstance(out, str) else out)
        return out

    def get(self, path: str):
        return self.ok("GET", path)

    def create(self, path: str, obj):
        return self.ok("POST", path, obj)

    def apply(self, path: str, obj, manager: str = "toposched-tests"):
        """Server-side apply (what `kubectl apply --server-side` sends)."""
        q = urllib.parse.urlencode({"fieldManager": manager, "force": "true"})
        return self.ok("PATCH", f"{path}?{q}", json.dumps(obj), "application/apply-patch+yaml")

    def delete(self, path: str, grace_s: Optional[int] = 0):
        body = None if grace_s is None else {"kind": "DeleteOptions", "apiVersion": "v1",
                                             "gracePeriodSeconds": grace_s}
        status, out = self.request("DELETE", path, body)
        if status not in (200, 202, 404):
            raise ApiError("DELETE", path, status, str(out))
        return status


def _openssl(*args: str, cwd: str) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise K8sHarnessError(f"openssl {' '.join(args)} failed: {r.stderr}")


def make_pki(d: str) -> None:
    """ca.crt/ca.key, the serving certificate apiserver.crt/.key (127.0.0.1, localhost) signed
    by the CA, and the service-account signing key pair sa.key/sa.pub."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=toposched-test-ca", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
                "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "apiserver.crt", "-days", "2", "-extfile", "san.ext", cwd=d)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


def scheduler_config(extender_url: str, node_cache_capable: bool, kubeconfig: str) -> dict:
    """deploy/kubernetes/scheduler-config.yaml's KubeSchedulerConfiguration, pointed at
    extender_url, with the given nodeCacheCapable, the harness's kubeconfig and no leader
    election (one scheduler, and no lease to wait for)."""
    with open(os.path.join(SOURCE_DIR, "deploy", "kubernetes", "scheduler-config.yaml")) as f:
        cm = yaml.safe_load(f)
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    cfg["leaderElection"] = {"leaderElect": False}
    cfg["clientConnection"] = {"kubeconfig": kubeconfig, "qps": 200, "burst": 400}
    if not extender_url:  # "": the same profile without the extender (bench/k8s/)
        cfg.pop("extenders", None)
    for ext in cfg.get("extenders", []):
        ext["urlPrefix"] = extender_url
        ext["nodeCacheCapable"] = node_cache_capable
    return cfg


PLUGIN_SCHEDULER = os.environ.get("TOPOSCHED_KUBE_SCHEDULER",
                                  os.path.join(SOURCE_DIR, "build", "kube", "toposched-kube-scheduler"))


def plugin_scheduler_config(serve_url: str, kubeconfig: str, permit_wait_s: Optional[int] = None) -> dict:
    """deploy/kubernetes/scheduler-plugin-config.yaml's KubeSchedulerConfiguration with the
    Toposched plugin's url set to serve_url (its address and --url-prefix), optionally
    another permitWaitSeconds, the harness's kubeconfig and no leader election."""
    with open(os.path.join(SOURCE_DIR, "deploy", "kubernetes", "scheduler-plugin-config.yaml")) as f:
        cm = yaml.safe_load(f)
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    cfg["leaderElection"] = {"leaderElect": False}
    cfg["clientConnection"] = {"kubeconfig": kubeconfig, "qps": 200, "burst": 400}
    for profile in cfg["profiles"]:
        for pc in profile.get("pluginConfig", []):
            if pc["name"] == "Toposched":
                pc["args"]["url"] = serve_url
                if permit_wait_s is not None:
                    pc["args"]["permitWaitSeconds"] = permit_wait_s
    return cfg


class ControlPlane(StartedByWith):
    """etcd + kube-apiserver + (unless scheduler=False) kube-scheduler; see the module
    docstring. extender_url: the urlPrefix of the extender verbs (None: no scheduler)."""

    def __init__(self, extender_url: Optional[str] = None, node_cache_capable: bool = True,
                 keep_dir: bool = False, feature_gates: Optional[List[str]] = None,
                 runtime_config: Optional[List[str]] = None):
        """feature_gates ("GenericWorkload=true"): given to kube-apiserver and kube-scheduler;
        runtime_config ("scheduling.k8s.io/v1beta1=true"): API versions the API server serves
        beyond its defaults."""
        reason = binaries_missing()
        if reason:
            raise K8sHarnessError(reason)
        self.bin = bin_dir()
        self.extender_url = extender_url
        self.node_cache_capable = node_cache_capable
        self.keep_dir = keep_dir
        self.feature_gates = list(feature_gates or [])
        self.runtime_config = list(runtime_config or [])
        self.dir = tempfile.mkdtemp(prefix="toposched-k8s-")
        self.etcd: Optional[EtcdCluster] = None
        self.apiserver: Optional[subprocess.Popen] = None
        self.scheduler: Optional[subprocess.Popen] = None
        self.logs: List[object] = []
        self.api_port, self.scheduler_port = free_ports(2)
        self.ca_file = os.path.join(self.dir, "ca.crt")
        self.token_file = os.path.join(self.dir, "token")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.api = ApiClient("127.0.0.1", self.api_port, TOKEN, self.ca_file)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        make_pki(self.dir)
        self._write_credentials()
        self.etcd = EtcdCluster(members=1)
        self.etcd.__enter__()
        self._start_apiserver()
        self.wait_api_ready()
        if self.extender_url:
            self.start_scheduler()

    def stop(self) -> None:
        stop_processes([self.scheduler, self.apiserver], signal.SIGTERM, timeout_s=15)
        self.scheduler = self.apiserver = None
        if self.etcd is not None:
            self.etcd.stop_all()
            self.etcd = None
        for log in self.logs:
            log.close()
        self.logs = []
        if not self.keep_dir and os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)

    def _write_credentials(self) -> None:
        with open(os.path.join(self.dir, "tokens.csv"), "w") as f:
            f.write(f'{TOKEN},toposched-test-admin,uid-admin,"system:masters"\n')
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url(), "certificate-authority": self.ca_file}}],
            "users": [{"name": "admin", "user": {"tokenFile": self.token_file}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
        }
        with open(self.kubeconfig, "w") as f:
            yaml.safe_dump(kubeconfig, f)

    def _spawn(self, name: str, args: List[str]) -> subprocess.Popen:
        log = open(os.path.join(self.dir, f"{name}.log"), "ab")
        self.logs.append(log)
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=die_with_parent)

    def _start_apiserver(self) -> None:
        d = self.dir
        args = [
            os.path.join(self.bin, "kube-apiserver"),
            f"--etcd-servers=http://{self.etcd.endpoint(0)}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--cert-dir={d}", f"--tls-cert-file={d}/apiserver.crt", f"--tls-private-key-file={d}/apiserver.key",
            f"--client-ca-file={d}/ca.crt", f"--token-auth-file={d}/tokens.csv",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={d}/sa.pub", f"--service-account-signing-key-file={d}/sa.key",
            "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            # DeleteCollection deletes this many objects at once (default 1: one etcd fsync
            # after another; the exports test clears 1,545 HyperNodes in one call).
            "--delete-collection-workers=16",
            "--profiling=false", "--v=1",
        ]
        if self.feature_gates:
            args.append("--feature-gates=" + ",".join(self.feature_gates))
        if self.runtime_config:
            args.append("--runtime-config=" + ",".join(self.runtime_config))
        self.apiserver = self._spawn("kube-apiserver", args)

    def start_scheduler(self, extender_url: Optional[str] = None,
                        node_cache_capable: Optional[bool] = None, plugin: bool = False,
                        permit_wait_s: Optional[int] = None) -> None:
        """(Re)starts kube-scheduler, optionally with another extender URL or cache mode;
        plugin=True: the plugin build instead, its Toposched plugin calling extender_url (a
        test that asks for it fails, not skips, when the binary is missing)."""
        if extender_url is not None:
            self.extender_url = extender_url
        if node_cache_capable is not None:
            self.node_cache_capable = node_cache_capable
        self.stop_scheduler()
        config = os.path.join(self.dir, "scheduler-config.yaml")
        if plugin:
            if not os.access(PLUGIN_SCHEDULER, os.X_OK):
                raise K8sHarnessError(f"{PLUGIN_SCHEDULER} is missing: scripts/build-kube builds it (make test does)")
            cfg = plugin_scheduler_config(self.extender_url, self.kubeconfig, permit_wait_s)
            binary = PLUGIN_SCHEDULER
        else:
            cfg = scheduler_config(self.extender_url, self.node_cache_capable, self.kubeconfig)
            binary = os.path.join(self.bin, "kube-scheduler")
        with open(config, "w") as f:
            yaml.safe_dump(cfg, f)
        self.scheduler_port = free_ports(1)[0]
        args = [
            binary, f"--config={config}",
            "--bind-address=127.0.0.1", f"--secure-port={self.scheduler_port}",
            f"--cert-dir={self.dir}/scheduler-certs",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            "--v=2",
        ]
        if self.feature_gates:
            args.append("--feature-gates=" + ",".join(self.feature_gates))
        self.scheduler = self._spawn("kube-scheduler", args)
        self._wait_https_ok(self.scheduler, self.scheduler_port, "/healthz", "kube-scheduler", verify=False)

    def stop_scheduler(self) -> None:
        stop_processes([self.scheduler], signal.SIGTERM, timeout_s=15)
        self.scheduler = None

    # -- readiness ---------------------------------------------------------------------------
    def url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def wait_api_ready(self, timeout_s: float = 180.0) -> None:
        self._wait_https_ok(self.apiserver, self.api_port, "/readyz", "kube-apiserver", verify=True,
                            timeout_s=timeout_s)
        # The namespaces the API server's bootstrap creates, and the default PriorityClasses.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status, _ = self.api.request("GET", "/api/v1/namespaces/default")
            if status == 200:
                return
            time.sleep(0.2)
        raise K8sHarnessError("namespace default never appeared:\n" + self.log_tail("kube-apiserver"))

    def _wait_https_ok(self, proc, port: int, path: str, name: str, verify: bool,
                       timeout_s: float = 180.0) -> None:
        """Until GET path answers 200 (with the token: kube-scheduler checks it through a
        TokenReview). verify=False for kube-scheduler's self-signed serving certificate."""
        ctx = ssl.create_default_context(cafile=self.ca_file) if verify else ssl._create_unverified_context()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise K8sHarnessError(f"{name} exited {proc.returncode}:\n{self.log_tail(name)}")
            try:
                c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
                c.request("GET", path, headers=headers)
                r = c.getresponse()
                last = f"{r.status} {r.read()[:300]!r}"
                c.close()
                if r.status == 200:
                    return
            except (OSError, http.client.HTTPException) as e:
                last = str(e)
            time.sleep(0.25)
        raise K8sHarnessError(f"{name} not ready on {path} after {timeout_s:.0f} s ({last}):\n"
                              + self.log_tail(name))

    def log_tail(self, name: str, lines: int = 30) -> str:
        return log_tail(os.path.join(self.dir, f"{name}.log"), lines, header=True)

    # -- objects -----------------------------------------------------------------------------
    def kubectl(self, *args: str, input: Optional[str] = None, check: bool = True,
                timeout_s: float = 120) -> subprocess.CompletedProcess:
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, PATH=f"{self.bin}:{os.environ.get('PATH', '')}")
        r = subprocess.run([os.path.join(self.bin, "kubectl"), *args], input=input, capture_output=True,
                           text=True, env=env, timeout=timeout_s)
        if check and r.returncode != 0:
            raise K8sHarnessError(f"kubectl {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r

    def ensure_namespace(self, name: str) -> None:
        status, out = self.api.request("POST", "/api/v1/namespaces",
                                       {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        if status not in (201, 409):
            raise ApiError("POST", "/api/v1/namespaces", status, str(out))

    def add_nodes(self, nodes: Iterable[Tuple[str, Dict[str, str]]], gpus: int = 8, cpu: str = "224",
                  memory: str = "2Ti", pods: str = "110") -> None:
        """Creates each (name, labels) node, Ready, with the capacity given."""
        capacity = {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": memory, "pods": pods}
        for name, labels in nodes:
            self.api.create("/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {**hostname_label(name), **labels}}})
            self.set_node_status(name, capacity, ready=True)

    def set_node_status(self, name: str, capacity: Dict[str, str], ready: bool = True) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"capacity": capacity, "allocatable": capacity, "conditions": [{
            "type": "Ready", "status": "True" if ready else "False", "reason": "FakeNode",
            "message": "created by k8s_harness.py (no kubelet)", "lastHeartbeatTime": now,
            "lastTransitionTime": now}]}
        self.api.ok("PATCH", f"/api/v1/nodes/{name}/status", {"status": status},
                    "application/merge-patch+json")

    def pods(self, namespace: str) -> List[dict]:
        return self.api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]

    def wait_bound(self, namespace: str, names: List[str], timeout_s: float,
                   poll_s: float = 0.3) -> Tuple[Dict[str, dict], List[str]]:
        """Polls until every named pod has a node or `timeout_s` passed: the pods by name, and
        the names still unbound (empty when all are bound; the caller fails with its context)."""
        deadline = time.monotonic() + timeout_s
        while True:
            pods = {p["metadata"]["name"]: p for p in self.pods(namespace)}
            unbound = [n for n in names if not pods[n]["spec"].get("nodeName")]
            if not unbound or time.monotonic() > deadline:
                return pods, unbound
            time.sleep(poll_s)


def hostname_label(node: str) -> Dict[str, str]:
    """The kubernetes.io/hostname label a kubelet would set: the name, where a label value can
    hold it (at most 63 bytes; a longer node name is an FQDN whose host part a kubelet uses)."""
    return {"kubernetes.io/hostname": node} if len(node) <= 63 else {}


def topology_labels(toposched: str, cluster: str) -> Dict[str, Dict[str, str]]:
    """The labels `toposched export --to k8s-labels --style patch` writes, per node."""
    out = subprocess.run([toposched, "export", "--cluster", cluster, "--to", "k8s-labels", "--style", "patch"],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise K8sHarnessError(f"toposched export --to k8s-labels failed: {out.stderr}")
    return {node: patch["metadata"]["labels"] for node, patch in json.loads(out.stdout).items()}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Start etcd, kube-apiserver and kube-scheduler on 127.0.0.1 (ports picked free, "
                    "data in a temporary directory), print KUBECONFIG=..., and stop them on Ctrl-C.")
    parser.add_argument("--extender-url", help="urlPrefix of toposched's extender verbs "
                        "(e.g. http://127.0.0.1:7070/toposched); without it no kube-scheduler runs")
    parser.add_argument("--no-node-cache", action="store_true", help="nodeCacheCapable: false")
    parser.add_argument("--nodes-from", metavar="SPEC",
                        help="create one fake node per node of this toposched cluster, with its labels")
    parser.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per fake node (default 8)")
    parser.add_argument("--toposched", default=os.environ.get("TOPOSCHED", "toposched"),
                        help="toposched binary for --nodes-from (default $TOPOSCHED or toposched)")
    parser.add_argument("--keep", action="store_true", help="keep the directory")
    args = parser.parse_args(argv)
    stop = {"now": False}

    def on_signal(_sig, _frame):
        stop["now"] = True
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        with ControlPlane(args.extender_url, not args.no_node_cache, keep_dir=args.keep) as kube:
            if args.nodes_from:
                labels = topology_labels(args.toposched, args.nodes_from)
                kube.add_nodes(sorted(labels.items()), gpus=args.gpus)
            print(f"KUBECONFIG={kube.kubeconfig}", flush=True)
            print(f"K8S_API={kube.url()}", flush=True)
            print(f"K8S_TOKEN_FILE={kube.token_file}", flush=True)
            print(f"K8S_CA_FILE={kube.ca_file}", flush=True)
            pids = [kube.etcd.procs[0], kube.apiserver, kube.scheduler]
            print("K8S_PIDS=" + ",".join(str(p.pid) for p in pids if p is not None), flush=True)
            print(f"k8s-test-cluster: running, files in {kube.dir}; try: "
                  f"KUBECONFIG={kube.kubeconfig} {kube.bin}/kubectl get nodes", file=sys.stderr)
            while not stop["now"]:
                time.sleep(0.2)
    except (K8sHarnessError, ApiError) as e:
        print(f"k8s-test-cluster: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
