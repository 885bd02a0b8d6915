"""Kueue's controller (sigs.k8s.io/kueue/cmd/kueue, built by scripts/install-k8s-test-binaries
from Kueue's own module) against a k8s_harness.ControlPlane, on loopback.

What a kubelet-less test cluster needs, and how it is given:
- Kueue's CRDs from the same module (crds/kueue/ in the binaries' cache), applied
  server-side; they hold no conversion webhook (the base CRDs; the conversion patch lives
  in Kueue's kustomize overlays), so the API server converts nothing and calls no webhook.
- No cert-manager and no internal certificate rotation (`internalCertManagement.enable:
  false`); the webhook server still starts, so it gets a serving certificate signed by the
  control plane's CA in its own folder, on 127.0.0.1. No webhook configuration is
  registered with the API server: objects are created complete, as Kueue's defaulting
  webhook would leave them.
- Its metrics server serves with the same certificate: Kueue reads it from
  $KUEUE_METRICS_CERT_DIR, which the install script's one overlay of cmd/kueue/main.go adds
  (the published code reads only /etc/kueue/metrics/certs without internal certificates).
- The visibility server (an aggregated API) off (`VisibilityOnDemand=false`): nothing here
  reads it and it would need the front-proxy CA.
- Only the batch/job integration (no other frameworks' CRDs are installed); the test
  creates Workload objects itself.

`Kueue` is a context manager; it stops the controller by PID. Not thread-safe."""

import os
import signal
import subprocess
import time
import urllib.request
from typing import List, Optional

import yaml

from k8s_harness import ControlPlane, _openssl, bin_dir
from proc_harness import StartedByWith, die_with_parent, free_ports, stop_processes

KUEUE_NAMESPACE = "kueue-system"
CRD_DIR = os.path.join(os.path.dirname(bin_dir()), "crds", "kueue")


def kueue_binary() -> str:
    return os.path.join(bin_dir(), "kueue")


def kueue_missing() -> Optional[str]:
    """Why Kueue cannot start here, or None."""
    missing = [p for p in [kueue_binary(), CRD_DIR] if not os.path.exists(p)]
    if missing:
        return (f"Kueue's controller or CRDs are missing ({', '.join(missing)}): run "
                "scripts/install-k8s-test-binaries (make test does)")
    return None


def install_crds(kube: ControlPlane) -> List[str]:
    """Applies every CRD of Kueue's module server-side and waits until each is Established."""
    files = sorted(os.path.join(CRD_DIR, f) for f in os.listdir(CRD_DIR) if f.endswith(".yaml"))
    names = []
    for path in files:
        with open(path) as f:
            crd = yaml.safe_load(f)
        kube.api.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}",
                       crd)
        names.append(crd["metadata"]["name"])
    kube.kubectl("wait", "--for=condition=Established", "--timeout=120s",
                 *[f"crd/{n}" for n in names])
    return names


class Kueue(StartedByWith):
    def __init__(self, kube: ControlPlane):
        reason = kueue_missing()
        if reason:
            raise RuntimeError(reason)
        self.kube = kube
        self.dir = os.path.join(kube.dir, "kueue")
        os.makedirs(self.dir, exist_ok=True)
        self.webhook_port, self.metrics_port, self.health_port, self.visibility_port = free_ports(4)
        self.proc: Optional[subprocess.Popen] = None
        self.log = None

    def _serving_certificate(self) -> str:
        """tls.crt/tls.key for 127.0.0.1, signed by the control plane's CA."""
        certs = os.path.join(self.dir, "certs")
        os.makedirs(certs, exist_ok=True)
        ca = self.kube.dir
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr",
                 "-subj", "/CN=kueue-webhook", cwd=certs)
        with open(os.path.join(certs, "san.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        _openssl("x509", "-req", "-in", "tls.csr", "-CA", os.path.join(ca, "ca.crt"),
                 "-CAkey", os.path.join(ca, "ca.key"), "-CAcreateserial", "-out", "tls.crt",
                 "-days", "2", "-extfile", "san.ext", cwd=certs)
        return certs

    def _config(self, cert_dir: str) -> str:
        cfg = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": cert_dir},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 200, "burst": 400},
            "integrations": {"frameworks": ["batch/job"]},
        }
        path = os.path.join(self.dir, "config.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f)
        return path

    def start(self) -> None:
        self.kube.ensure_namespace(KUEUE_NAMESPACE)
        install_crds(self.kube)
        cert_dir = self._serving_certificate()
        config = self._config(cert_dir)
        self.log = open(os.path.join(self.kube.dir, "kueue.log"), "ab")
        self.proc = subprocess.Popen(
            [kueue_binary(), f"--config={config}", f"--kubeconfig={self.kube.kubeconfig}",
             "--feature-gates=VisibilityOnDemand=false",
             f"--visibility-server-port={self.visibility_port}", "--zap-log-level=2"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "KUEUE_METRICS_CERT_DIR": cert_dir}, preexec_fn=die_with_parent)
        self._wait_ready()

    def _wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kueue exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"Kueue not ready after {timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        path = os.path.join(self.kube.dir, "kueue.log")
        try:
            with open(path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        stop_processes([self.proc], signal.SIGTERM, timeout_s=15)
        self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None


def node_counts(assignment: dict) -> dict:
    """{node: pods} of a v1beta2 TopologyAssignment (levels + slices; the last level is the
    node's kubernetes.io/hostname, which the fake nodes carry as their name)."""
    levels = assignment["levels"]
    if levels[-1] != "kubernetes.io/hostname":
        raise ValueError(f"the lowest level is {levels[-1]}, not kubernetes.io/hostname")
    counts = {}
    for piece in assignment["slices"]:
        n = piece["domainCount"]
        values = piece["valuesPerLevel"][-1]
        if "universal" in values:
            names = [values["universal"]] * n
        else:
            ind = values["individual"]
            names = [ind.get("prefix", "") + root + ind.get("suffix", "") for root in ind["roots"]]
        pods = piece["podCounts"]
        per = [pods["universal"]] * n if "universal" in pods else pods["individual"]
        for name, c in zip(names, per):
            counts[name] = counts.get(name, 0) + c
    return counts


