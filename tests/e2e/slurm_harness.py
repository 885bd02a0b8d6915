"""A private, throw-away Slurm controller for tests: munged + slurmctld on 127.0.0.1.

Everything lives in one temporary directory: slurm.conf, topology.conf, gres.conf, a fresh
munge key, munged's socket / pid / log / seed, slurmctld's state, spool, pid and log. The
controller listens on ports picked free on 127.0.0.1, so several test clusters (and the
other engineers' tests) can run side by side. Nodes are declared `State=CLOUD` with a
`ResumeProgram`/`SuspendProgram` that do nothing, so no slurmd is needed: slurmctld
schedules jobs onto the powered-down nodes (the job sits in CONFIGURING with its node list
assigned), which is all a placement test needs to read Slurm's decision.

With `slurmd=True` the nodes are real instead: one `slurmd -N NODE` per node on this host
(Debian's Slurm supports several slurmd per host: each node gets `NodeAddr=127.0.0.1` and
its own `Port=`; spool, pid and log paths carry `%n`), each in its own UTS namespace whose
hostname is the node's name, so a job's `hostname` prints the Slurm node. GPUs are gres
backed by files: character-device nodes (NVIDIA's major 195) created in the temporary
directory and named by `File=` in a generated gres.conf (slurmd refuses regular files).
Jobs really run; `SlurmdParameters=config_overrides` lets each slurmd take the declared
CPUs instead of this machine's.

Every daemon is started by this module as a direct child (foreground mode) and stopped by
its PID, on success and on failure alike. Job processes that slurmd's stepd left behind
are found by the SLURM_CONF of this cluster in their environment and stopped by PID;
nothing else is ever signalled.

Usage (a context manager; see tests/e2e/test_export_slurm.py):

    from slurm_harness import SlurmCluster, NodeSpec
    nodes = [NodeSpec("dgx[001-064]", cpus=224, gpus=8, gpu_type="h100")]
    with SlurmCluster(nodes, topology_conf=text, gres_conf=gres_text) as slurm:
        print(slurm.scontrol("show", "topology").stdout)
        job = slurm.sbatch("--nodes=2", "--gres=gpu:8", wrap="true")
        slurm.wait_job_nodes(job)  # "dgx[001-002]"
        assert not slurm.log_errors(("topology", "gres"))
        slurm.slurmd_gres("dgx001")  # what a slurmd would make of gres.conf, or raises

Also runnable: `python3 tests/e2e/slurm_harness.py --topology FILE [--gres FILE] ...`
(scripts/slurm-test-cluster wraps it) starts a cluster, prints how to reach it, and waits
until Ctrl-C. Requires root (Slurm's SlurmUser=root), slurm-wlm and munge
(scripts/install-deps). Not thread-safe: one SlurmCluster per thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from typing import Iterable, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_harness import die_with_parent, free_ports, stop_processes  # noqa: E402

SLURMCTLD = shutil.which("slurmctld") or "/usr/sbin/slurmctld"
SLURMD = shutil.which("slurmd") or "/usr/sbin/slurmd"
MUNGED = shutil.which("munged") or "/usr/sbin/munged"
MUNGEKEY = shutil.which("mungekey") or "/usr/sbin/mungekey"


class SlurmHarnessError(RuntimeError):
    """The private cluster could not be started or did not answer; carries the logs."""


def slurm_available() -> Optional[str]:
    """None when a private cluster can run here, else the reason why not (for skipTest)."""
    for tool in (SLURMCTLD, MUNGED, MUNGEKEY):
        if not os.access(tool, os.X_OK):
            return f"{tool} not installed (run scripts/install-deps)"
    for tool in ("scontrol", "sbatch", "squeue"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (run scripts/install-deps)"
    if os.geteuid() != 0:
        return "the private Slurm cluster runs slurmctld with SlurmUser=root: run the tests as root"
    return None


@dataclasses.dataclass
class NodeSpec:
    """One `NodeName=` line: a hostlist of identical nodes."""

    names: str               # Slurm hostlist, e.g. "dgx[001-064]"
    cpus: int = 64
    gpus: int = 0
    gpu_type: str = ""       # gres type, e.g. "h100"; empty = untyped gpu:N
    real_memory_mb: int = 1024
    features: str = ""
    extra: str = ""          # more NodeName= parameters, e.g. "Sockets=2 CoresPerSocket=56 ThreadsPerCore=2"
    cloud: bool = True       # State=CLOUD (no slurmd); SlurmCluster(slurmd=True) sets it False

    def line(self) -> str:
        parts = [f"NodeName={self.names}", f"CPUs={self.cpus}", f"RealMemory={self.real_memory_mb}"]
        if self.extra:
            parts.append(self.extra)
        if self.gpus:
            gres = f"gpu:{self.gpu_type}:{self.gpus}" if self.gpu_type else f"gpu:{self.gpus}"
            parts.append(f"Gres={gres}")
        if self.features:
            parts.append(f"Feature={self.features}")
        if self.cloud:
            parts.append("State=CLOUD")
        return " ".join(parts)


class SlurmCluster:
    """A running munged + slurmctld pair; use as a context manager (stops on exit)."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        topology_conf: Optional[str] = None,
        gres_conf: Optional[str] = None,
        topology_plugin: str = "topology/tree",
        extra_conf: Iterable[str] = (),
        partition_nodes: str = "ALL",
        start_timeout_s: float = 60.0,
        keep_dir: bool = False,
        slurmd: bool = False,
        extra_files: Optional[dict] = None,
    ):
        if not nodes:
            raise ValueError("a Slurm cluster needs at least one NodeSpec")
        self.nodes = list(nodes)
        self.topology_conf = topology_conf
        self.gres_conf = gres_conf
        self.topology_plugin = topology_plugin
        self.extra_conf = list(extra_conf)
        self.partition_nodes = partition_nodes
        self.start_timeout_s = start_timeout_s
        self.keep_dir = keep_dir
        self.real_slurmd = slurmd
        self.extra_files = dict(extra_files or {})  # name -> text, written beside slurm.conf
        self.node_names: list[str] = []
        self._slurmds: dict[str, subprocess.Popen] = {}
        self.dir: Optional[str] = None
        self.conf_path = ""
        self.ctld_log = ""
        self.munge_log = ""
        self.munge_socket = ""
        self._munged: Optional[subprocess.Popen] = None
        self._slurmctld: Optional[subprocess.Popen] = None
        self._ctld_stderr = None
        self.started_pids: list[int] = []  # every daemon PID this object ever started

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> "SlurmCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        reason = slurm_available()
        if reason:
            raise SlurmHarnessError(reason)
        self.dir = tempfile.mkdtemp(prefix="toposched-slurm-")
        os.chmod(self.dir, 0o755)  # munged refuses sockets in group/world-writable dirs
        try:
            self._start_munged()
            # A port picked free may be taken before slurmctld binds it: retry with new ones.
            for attempt in range(3):
                self._write_configs()
                self._start_slurmctld()
                if self._wait_for_ping():
                    if self.real_slurmd:
                        self._start_slurmds()
                    return
                bind_failed = "Address already in use" in self.read_log()
                stop_processes([self._slurmctld])
                self._slurmctld = None
                if not bind_failed:
                    break
            raise SlurmHarnessError(
                "slurmctld did not start (it exited, or did not answer 'scontrol ping' within "
                f"{self.start_timeout_s:.0f}s)\n--- slurmctld log ---\n{self.read_log()[-6000:]}"
            )
        except BaseException:
            self.stop()
            raise

    def pids(self) -> list[int]:
        """PIDs of the daemons this cluster started and that still run."""
        procs = [self._munged, self._slurmctld, *self._slurmds.values()]
        return [p.pid for p in procs if p is not None and p.poll() is None]

    def stop(self) -> None:
        """Cancels the jobs (real slurmd), stops the slurmds, slurmctld, then munged, by PID;
        stops what job processes remain; removes the directory unless keep_dir."""
        if self._slurmds:
            self._cancel_all_jobs()
        for proc in self._slurmds.values():
            stop_processes([proc])
        self._slurmds = {}
        if self.real_slurmd and self.conf_path:
            self._stop_leftover_job_processes()
        stop_processes([self._slurmctld])
        self._slurmctld = None
        stop_processes([self._munged])
        self._munged = None
        if self._ctld_stderr:
            self._ctld_stderr.close()
            self._ctld_stderr = None
        if self.dir and not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _path(self, name: str) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, name)

    def _start_munged(self) -> None:
        key = self._path("munge.key")
        subprocess.run([MUNGEKEY, "--create", f"--keyfile={key}"], check=True,
                       capture_output=True, text=True)
        os.chmod(key, 0o400)
        self.munge_socket = self._path("munge.socket")
        self.munge_log = self._path("munged.log")
        self._munged = subprocess.Popen(
            [MUNGED, "--foreground", "--force", f"--key-file={key}", f"--socket={self.munge_socket}",
             f"--pid-file={self._path('munged.pid')}", f"--log-file={self.munge_log}",
             f"--seed-file={self._path('munged.seed')}", "--num-threads=2"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        self.started_pids.append(self._munged.pid)
        deadline = time.monotonic() + 15
        while not os.path.exists(self.munge_socket):
            if self._munged.poll() is not None:
                log = open(self.munge_log).read() if os.path.exists(self.munge_log) else ""
                raise SlurmHarnessError(f"munged exited with {self._munged.returncode}:\n{log}")
            if time.monotonic() > deadline:
                raise SlurmHarnessError("munged did not create its socket within 15s")
            time.sleep(0.05)

    def _write_configs(self) -> None:
        ctld_port, slurmd_port = free_ports(2)
        host = socket.gethostname().split(".")[0]
        for d in ("state", "spool"):
            os.makedirs(self._path(d), exist_ok=True)
        noop = self._path("noop-power.sh")
        with open(noop, "w") as f:
            f.write("#!/bin/sh\n# Power saving stand-in: the test cluster has no real nodes.\nexit 0\n")
        os.chmod(noop, 0o755)
        self.ctld_log = self._path("slurmctld.log")
        lines = [
            "# Private test cluster written by tests/e2e/slurm_harness.py",
            "ClusterName=toposchedtest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self._path('state')}",
            f"SlurmdSpoolDir={self._path('spool')}",
            f"SlurmctldPidFile={self._path('slurmctld.pid')}",
            f"SlurmdPidFile={self._path('slurmd.pid')}",
            f"SlurmctldLogFile={self.ctld_log}",
            "SlurmctldDebug=info",
            "MailProg=/bin/true",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            # Without a topology.conf, topology/tree would wait 60s for one, then die.
            f"TopologyPlugin={self.topology_plugin if self.topology_conf is not None else 'topology/none'}",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "JobAcctGatherType=jobacct_gather/none",
            # Power saving makes CLOUD nodes allocatable without a slurmd: jobs get their
            # nodes and wait in CONFIGURING for a resume that never has to complete.
            f"SuspendProgram={noop}",
            f"ResumeProgram={noop}",
            "SuspendTime=600",
            "SuspendTimeout=30",
            "ResumeTimeout=3600",
            "ResumeRate=0",
            "SuspendRate=0",
            "TreeWidth=65533",
            *self.extra_conf,
            *[n.line() for n in self.nodes],
            f"PartitionName=test Nodes={self.partition_nodes} Default=YES MaxTime=INFINITE State=UP",
        ]
        if self.real_slurmd:
            lines = self._real_node_lines(lines, slurmd_port)
        self.conf_path = self._path("slurm.conf")
        with open(self.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        if self.topology_conf is not None:
            with open(self._path("topology.conf"), "w") as f:
                f.write(self.topology_conf)
        if self.gres_conf is not None:
            with open(self._path("gres.conf"), "w") as f:
                f.write(self.gres_conf)
        for name, text in self.extra_files.items():  # e.g. job_submit.lua
            with open(self._path(name), "w") as f:
                f.write(text)

    # ---- real slurmd nodes ------------------------------------------------------------------

    def _real_node_lines(self, lines: list[str], slurmd_port: int) -> list[str]:
        """slurm.conf for real slurmds: per-node ports and %n paths, no power saving, and
        (unless the caller gave one) a gres.conf naming device files made here."""
        host = socket.gethostname().split(".")[0]
        drop = ("SuspendProgram=", "ResumeProgram=", "SuspendTime=", "SuspendTimeout=", "ResumeTimeout=",
                "ResumeRate=", "SuspendRate=", "SlurmdSpoolDir=", "SlurmdPidFile=", "NodeName=")
        out = [l for l in lines if not l.startswith(drop) and not l.startswith("PartitionName=")]
        out += [f"SlurmdSpoolDir={self._path('spool')}/%n", f"SlurmdPidFile={self._path('slurmd')}.%n.pid",
                f"SlurmdLogFile={self._path('slurmd')}.%n.log", "SlurmdDebug=info",
                "SlurmdParameters=config_overrides", "SlurmdTimeout=300", "MessageTimeout=30",
                "MinJobAge=300"]
        self.node_names = []
        for spec in self.nodes:
            self.node_names += _expand_simple(spec.names)
        ports = free_ports(len(self.node_names))
        gres = []
        for spec in self.nodes:
            spec.cloud = False
            for name in _expand_simple(spec.names):
                port = ports[self.node_names.index(name)]
                one = dataclasses.replace(spec, names=name, cloud=False,
                                          extra=f"{spec.extra} NodeHostname={host} NodeAddr=127.0.0.1 Port={port}".strip())
                out.append(one.line())
                if spec.gpus:
                    gres.append(self._gpu_device_files(name, spec))
        out.append(f"PartitionName=test Nodes={self.partition_nodes} Default=YES MaxTime=INFINITE State=UP")
        if self.gres_conf is None and gres:
            self.gres_conf = "".join(gres)
        return out

    def _gpu_device_files(self, node: str, spec: "NodeSpec") -> str:
        """Character devices standing for the node's GPUs; the gres.conf line naming them."""
        devdir = self._path(f"dev/{node}")
        os.makedirs(devdir, exist_ok=True)
        base = self.node_names.index(node) * 64
        for i in range(spec.gpus):
            path = os.path.join(devdir, f"nvidia{i}")
            if not os.path.exists(path):
                os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(195, base + i))
        typ = f" Type={spec.gpu_type}" if spec.gpu_type else ""
        return f"NodeName={node} Name=gpu{typ} File={devdir}/nvidia[0-{spec.gpus - 1}]\n"

    def _start_slurmds(self) -> None:
        for name in self.node_names:
            os.makedirs(self._path(f"spool/{name}"), exist_ok=True)
            out = open(self._path(f"slurmd.{name}.stderr"), "w")
            # Own UTS namespace: `hostname` in the node's jobs prints the node's name.
            proc = subprocess.Popen(
                ["unshare", "--uts", "sh", "-c", f'hostname "$0" && exec "$1" -D -N "$0" -f "$2"',
                 name, SLURMD, self.conf_path],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env(),
                preexec_fn=die_with_parent)
            out.close()
            self._slurmds[name] = proc
            self.started_pids.append(proc.pid)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            dead = [n for n, p in self._slurmds.items() if p.poll() is not None]
            if dead:
                raise SlurmHarnessError(f"slurmd for {dead} exited:\n{self.read_slurmd_log(dead[0])[-4000:]}")
            r = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
            states = dict(l.split() for l in r.stdout.splitlines() if len(l.split()) == 2)
            if len(states) == len(self.node_names) and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.3)
        raise SlurmHarnessError(f"the slurmds did not all register as idle within {self.start_timeout_s:.0f}s: "
                                f"{self.run('sinfo', '-N', check=False).stdout}")

    def read_slurmd_log(self, node: str) -> str:
        text = ""
        for p in (self._path(f"slurmd.{node}.log"), self._path(f"slurmd.{node}.stderr")):
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    text += f.read()
        return text

    def _cancel_all_jobs(self) -> None:
        self.run("scancel", "--full", "--partition=test", check=False)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = self.run("squeue", "-h", "-o", "%i %T", check=False)
            if r.returncode != 0 or not r.stdout.strip():
                return
            time.sleep(0.3)

    def _stop_leftover_job_processes(self) -> None:
        """slurmstepd and job processes outlive slurmd; they carry this cluster's SLURM_CONF."""
        marker = f"SLURM_CONF={self.conf_path}".encode()
        own = os.getpid()
        for _ in range(2):
            found = []
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) == own:
                    continue
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        if marker in f.read().split(b"\0"):
                            found.append(int(entry))
                except OSError:
                    continue
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not found:
                return
            time.sleep(0.2)

    def _start_slurmctld(self) -> None:
        if os.path.exists(self.ctld_log):
            os.remove(self.ctld_log)
        if self._ctld_stderr:
            self._ctld_stderr.close()
        self._ctld_stderr = open(self._path("slurmctld.stderr"), "w")
        self._slurmctld = subprocess.Popen(
            [SLURMCTLD, "-D", "-c", "-i", "-f", self.conf_path],
            stdin=subprocess.DEVNULL, stdout=self._ctld_stderr, stderr=subprocess.STDOUT,
            env=self.env(), preexec_fn=die_with_parent,
        )
        self.started_pids.append(self._slurmctld.pid)

    def _wait_for_ping(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._slurmctld is None or self._slurmctld.poll() is not None:
                return False
            r = self.run("scontrol", "ping", check=False, timeout=10)
            if r.returncode == 0 and "UP" in r.stdout:
                return True
            time.sleep(0.2)
        return False

    # ---- talking to it ---------------------------------------------------------------------

    def env(self) -> dict:
        env = dict(os.environ)
        env["SLURM_CONF"] = self.conf_path
        for k in list(env):  # a caller's job environment must not leak into the test
            if k.startswith(("SLURM_", "SBATCH_", "SQUEUE_")) and k != "SLURM_CONF":
                del env[k]
        return env

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """Runs a Slurm client (scontrol, sbatch, squeue, sinfo, ...) against this cluster."""
        r = subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise SlurmHarnessError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
        return r

    def scontrol(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("scontrol", *args, check=check)

    def squeue(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("squeue", *args, check=check)

    def sbatch(self, *args: str, wrap: str = "true") -> int:
        """Submits a batch job; returns its job id."""
        r = self.run("sbatch", "--parsable", f"--chdir={self.dir}", "--output=/dev/null", *args,
                     f"--wrap={wrap}")
        return int(r.stdout.strip().split(";")[0])

    def job_nodes(self, job_id: int) -> str:
        """The job's node list as Slurm prints it (a hostlist), "" while pending."""
        r = self.squeue("-h", "-j", str(job_id), "-o", "%N", check=False)
        return r.stdout.strip()

    def job_state(self, job_id: int) -> str:
        r = self.squeue("-h", "-j", str(job_id), "-o", "%T", check=False)
        return r.stdout.strip()

    def job_reason(self, job_id: int) -> str:
        r = self.squeue("-h", "-j", str(job_id), "-o", "%r", check=False)
        return r.stdout.strip()

    def wait_job_nodes(self, job_id: int, timeout_s: float = 30) -> str:
        """Waits until the scheduler gave the job its nodes; returns them as a hostlist."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            nodes = self.job_nodes(job_id)
            if nodes and self.job_state(job_id) != "PENDING":
                return nodes
            time.sleep(0.2)
        raise SlurmHarnessError(
            f"job {job_id} got no nodes within {timeout_s:.0f}s "
            f"(state {self.job_state(job_id)!r}, reason {self.job_reason(job_id)!r})")

    def cancel(self, job_id: int) -> None:
        self.run("scancel", str(job_id), check=False)

    def show_topology(self) -> list[dict]:
        """`scontrol show topology` as a list of {"SwitchName","Level","LinkSpeed","Nodes","Switches"}."""
        out = self.scontrol("show", "topology").stdout
        return parse_show_topology(out)

    def _hwloc_layout(self, node: str) -> str:
        """hwloc synthetic description of the node as slurm.conf declares it."""
        for spec in self.nodes:
            if node in self.expand_hostlist(spec.names):
                sockets = _declared(spec, "Sockets") or 1
                threads = _declared(spec, "ThreadsPerCore") or 1
                cores = _declared(spec, "CoresPerSocket") or max(1, spec.cpus // (sockets * threads))
                return f"package:{sockets} core:{cores} pu:{threads}"
        raise SlurmHarnessError(f"no NodeSpec declares node {node}")

    def expand_hostlist(self, expression: str) -> list[str]:
        """Slurm's own reading of a hostlist expression (`scontrol show hostnames`)."""
        if not expression:
            return []
        return self.scontrol("show", "hostnames", expression).stdout.split()

    def read_log(self) -> str:
        """slurmctld's log file (its stderr when it died before opening the log)."""
        for p in (self.ctld_log, self._path("slurmctld.stderr") if self.dir else ""):
            if p and os.path.exists(p) and os.path.getsize(p) > 0:
                with open(p, errors="replace") as f:
                    return f.read()
        return ""

    def log_errors(self, keywords: Sequence[str] = ()) -> list[str]:
        """slurmctld log lines that are errors or fatals (mentioning one of `keywords` if given)."""
        bad = []
        # Debian's slurm-wlm loads mpi/pmix_v4 without the PMIx library; a fresh state
        # directory has no state files yet. Neither says anything about the test's config.
        benign = ("pmix", "mpi:", "state file", "trying backup state save file")
        for line in self.read_log().splitlines():
            low = line.lower()
            if not re.search(r"\b(error|fatal)\b", low):
                continue
            if any(b in low for b in benign):
                continue
            if keywords and not any(k.lower() in low for k in keywords):
                continue
            bad.append(line)
        return bad

    def slurmd_gres(self, node: str) -> list[dict]:
        """What a slurmd on `node` makes of slurm.conf + gres.conf: `slurmd -G -N node`.

        slurmd insists that every `File=` exists, and this machine has no GPUs, so it runs
        in a private mount namespace (`unshare --mount`) whose /dev is a fresh tmpfs holding
        only /dev/null and the listed device nodes (NVIDIA's major number 195). The host's
        /dev is untouched. slurmd maps Cores= onto the CPUs it finds, so hwloc is given the
        node's declared layout (HWLOC_SYNTHETIC from its NodeSpec) instead of this machine's. Returns one dict per GRES record slurmd printed
        ({"Name","Type","Count","Index","File","Cores","CoreCnt","Links"}); raises
        SlurmHarnessError when slurmd rejects the configuration."""
        if shutil.which("unshare") is None or not os.access(SLURMD, os.X_OK):
            raise SlurmHarnessError("slurmd -G needs slurmd and unshare (util-linux)")
        devices = sorted(set(_gres_device_files(self.gres_conf or "")))
        script = ["set -e", "mount -t tmpfs -o mode=755 toposched-fakedev /dev",
                  "mknod -m 666 /dev/null c 1 3"]
        for dev in devices:
            m = re.fullmatch(r"/dev/nvidia(\d+)", dev)
            if not m:
                raise SlurmHarnessError(f"slurmd_gres only fakes /dev/nvidiaN devices, not {dev}")
            script.append(f"mknod /dev/nvidia{m.group(1)} c 195 {m.group(1)}")
        script.append(f'exec "{SLURMD}" -G -N "{node}" -f "{self.conf_path}"')
        env = self.env()
        env["HWLOC_SYNTHETIC"] = self._hwloc_layout(node)
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "; ".join(script)],
                           env=env, capture_output=True, text=True, timeout=60)
        out = r.stdout + r.stderr
        if r.returncode != 0 or re.search(r"\b(error|fatal)\b", out):
            raise SlurmHarnessError(f"slurmd -G -N {node} exited {r.returncode}:\n{out}")
        records = []
        for line in out.splitlines():
            if " Gres " not in f" {line} ":
                continue
            rec = {m.group(1): m.group(2) for m in re.finditer(r"(\w+)=(\S*)", line)}
            records.append(rec)
        return records


def _expand_simple(hostlist: str) -> list[str]:
    """Expands a hostlist of the forms the tests use (a[01-03],b7) without asking Slurm."""
    out = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", hostlist):
        m = re.fullmatch(r"(.*)\[([0-9,\-]+)\](.*)", item)
        if not m:
            out.append(item)
            continue
        for part in m.group(2).split(","):
            lo, _, hi = part.partition("-")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{m.group(1)}{i:0{width}d}{m.group(3)}")
    return out


def _declared(spec: "NodeSpec", key: str) -> Optional[int]:
    m = re.search(rf"\b{key}=(\d+)", spec.extra)
    return int(m.group(1)) if m else None


def _gres_device_files(gres_conf: str) -> list[str]:
    """Every File= path of a gres.conf, with simple [a-b,c] ranges expanded."""
    files = []
    for m in re.finditer(r"\bFile=(\S+)", gres_conf):
        value = m.group(1)
        br = re.fullmatch(r"(.*)\[([0-9,\-]+)\](.*)", value)
        if not br:
            files.append(value)
            continue
        for part in br.group(2).split(","):
            lo, _, hi = part.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                files.append(f"{br.group(1)}{i}{br.group(3)}")
    return files


def parse_show_topology(text: str) -> list[dict]:
    """Parses `scontrol show topology` output (one `Key=Value ...` record per line)."""
    switches = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("SwitchName="):
            continue
        rec = {}
        for m in re.finditer(r"(\w+)=(\S*)", line):
            rec[m.group(1)] = m.group(2)
        switches.append(rec)
    return switches


def _main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        description="Start a private munged + slurmctld on 127.0.0.1 with the given topology "
                    "(and gres) config, print how to reach it, and wait until Ctrl-C.")
    p.add_argument("--nodes", required=True, help="Slurm hostlist of the nodes, e.g. dgx[001-064]")
    p.add_argument("--gpus", type=int, default=0, help="GPUs per node (Gres=gpu:[TYPE:]N)")
    p.add_argument("--gpu-type", default="", help="gres type of the GPUs, e.g. h100")
    p.add_argument("--cpus", type=int, default=64, help="CPUs per node")
    p.add_argument("--topology", help="topology.conf to use (topology/tree)")
    p.add_argument("--gres", help="gres.conf to use")
    a = p.parse_args(argv)
    read = lambda path: open(path).read() if path else None
    nodes = [NodeSpec(a.nodes, cpus=a.cpus, gpus=a.gpus, gpu_type=a.gpu_type)]

    def on_term(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    with SlurmCluster(nodes, topology_conf=read(a.topology), gres_conf=read(a.gres)) as c:
        print(f"export SLURM_CONF={c.conf_path}")
        print(f"# slurmctld log: {c.ctld_log}; Ctrl-C stops munged and slurmctld", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
