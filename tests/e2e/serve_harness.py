"""Starts and stops `toposched serve` for the e2e tests: loopback, a port the server picks
(--listen 127.0.0.1:0; the URL is read from its log), stderr to a file, bounded waits."""
import http.client
import json
import os
import re
import subprocess
import time

BIN = os.environ.get("TOPOSCHED", "toposched")
SRC = os.environ.get("TOPOSCHED_SOURCE_DIR", ".")


class Server:
    def __init__(self, cluster, store, workdir, extra=(), cwd=None):
        self.log_path = os.path.join(workdir, f"serve-{time.monotonic_ns()}.log")
        self.log = open(self.log_path, "w")
        # A port of its own unless `extra` names one (a restart on the same address).
        listen = [] if "--listen" in extra else ["--listen", "127.0.0.1:0"]
        args = [BIN, "serve", "--cluster", cluster, *listen, *extra]
        if store:
            args += ["--store", store]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log, cwd=cwd or workdir)
        self.port = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with open(self.log_path) as f:
                text = f.read()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode}: {text}")
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("serve did not start within 120 s")

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def request(self, method, path, body=None, headers=None):
        c = self.conn()
        try:
            data = json.dumps(body) if isinstance(body, (dict, list)) else body
            c.request(method, path, body=data, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def kill9(self):
        self.proc.kill()  # SIGKILL
        self.proc.wait()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
