"""Process helpers shared by the e2e harnesses that start daemons (etcd_harness.py,
ha_harness.py, slurm_harness.py): loopback ports picked free, a preexec_fn that ties a
daemon's life to its test process, stopping started processes by their PID (one signal to
each, then bounded waits, SIGKILL for whoever outlives them), and a log's last lines.

Only processes the caller started (Popen objects it holds) are ever signalled.
Stateless functions; thread-safe as far as the Popen objects given are not shared.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
from typing import Iterable, List, Optional


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for outgoing connections (Linux's default 32768)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int) -> List[int]:
    """Ports free on 127.0.0.1 now, all distinct (held open together while picking), drawn at
    random from below the kernel's ephemeral range. A port from bind(0) lies inside that range,
    so between the pick and the daemon's own bind any outgoing connection of a test running
    beside this one could take it (CI saw `toposched serve` refuse 127.0.0.1:53431 as in use);
    below the range only another test's explicit pick can, one chance in about 20,000."""
    high = max(_ephemeral_low(), 12000)
    draw = random.SystemRandom()
    socks: List[socket.socket] = []
    try:
        for _ in range(200 * count):
            if len(socks) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", draw.randrange(10000, high)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        if len(socks) < count:
            raise RuntimeError(f"no {count} free ports on 127.0.0.1 below {high} after {200 * count} draws")
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def die_with_parent() -> None:
    """preexec_fn: the daemon gets SIGTERM when the test process dies, even by SIGKILL
    (a ctest timeout), so no daemon outlives its test."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def stop_processes(procs: Iterable[Optional[subprocess.Popen]], sig: int = signal.SIGTERM,
                   timeout_s: float = 20.0, kill_timeout_s: float = 10.0) -> None:
    """Sends `sig` to every process of `procs` still running (then SIGCONT, so one stopped
    with SIGSTOP acts on it), then waits for each up to timeout_s; one still running then
    gets SIGKILL and kill_timeout_s more. None entries are skipped; all are reaped."""
    live = [p for p in procs if p is not None]
    for p in live:
        if p.poll() is None:
            p.send_signal(sig)
            if sig != signal.SIGKILL and p.poll() is None:
                p.send_signal(signal.SIGCONT)
    for p in live:
        try:
            p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=kill_timeout_s)


def log_tail(path: str, lines: int = 20, header: bool = False) -> str:
    """The last `lines` lines of the file at `path` (undecodable bytes replaced), preceded by
    a `--- PATH` line when header is set; "(no log at PATH)" when it cannot be read."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    tail = "\n".join(text[-lines:])
    return f"--- {path}\n{tail}" if header else tail


class StartedByWith:
    """A mixin for harnesses with start() and stop(): `with X(...) as x` starts x, stops
    what a failed start left running, and stops x at the end of the block."""

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
