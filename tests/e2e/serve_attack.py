"""Connection-starvation attack on `toposched serve` (issue 35), loopback only: SLOW
slowloris connections (one header byte per second, never finishing a request) and BUSY
keep-alive clients (a dry run every 4 s on a connection kept open), while a prober opens a
fresh connection for GET /healthz every 0.25 s and records how long the answer took.

Used by tests/e2e/test_serve_attacks.py (a short run that asserts every probe is answered)
and run by hand for the figures of docs/service.md:

    python3 tests/e2e/serve_attack.py --port PORT --seconds 30

Every thread it starts ends by the deadline; every socket is closed."""
import argparse
import http.client
import socket
import threading
import time


def slowloris(port, stop):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return
    try:
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\n")
        while not stop.wait(1.0):
            s.sendall(b"X")  # one byte of a header line that never ends
    except OSError:
        pass
    finally:
        s.close()


def busy_keep_alive(port, stop, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    c = None
    while not stop.is_set():
        try:
            if c is None:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("POST", "/v1/jobs?dry_run=1", body='{"gpus":8,"tp":8}', headers=headers)
            c.getresponse().read()
        except (OSError, http.client.HTTPException):
            if c is not None:
                c.close()
            c = None
        stop.wait(4.0)
    if c is not None:
        c.close()


def probe(port, timeout):
    """Seconds until GET /healthz on a fresh connection answered 200, or None."""
    start = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        return time.monotonic() - start if r.status == 200 else None
    except (OSError, http.client.HTTPException):
        return None
    finally:
        c.close()


def attack(port, slow=200, busy=64, seconds=30.0, probe_timeout=5.0, token=None):
    """Runs the attack for `seconds`; the probe latencies (None for a probe that got no
    answer within probe_timeout)."""
    stop = threading.Event()
    threads = [threading.Thread(target=slowloris, args=(port, stop), daemon=True) for _ in range(slow)]
    threads += [threading.Thread(target=busy_keep_alive, args=(port, stop, token), daemon=True) for _ in range(busy)]
    for t in threads:
        t.start()
    time.sleep(2.0)  # let the attackers connect
    latencies = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            latencies.append(probe(port, probe_timeout))
            time.sleep(0.25)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=15)
    return latencies


def flood(port, head, piece, seconds=20.0):
    """Sends `head`, then `piece` over and over until the server ends the connection or
    `seconds` pass, while a second thread reads what comes back: (bytes sent after the head,
    the reply, whether the server ended the connection)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    reply = bytearray()

    def read():
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    return
                reply.extend(data)
        except OSError:
            return

    reader = threading.Thread(target=read, daemon=True)
    sent, closed = 0, False
    try:
        s.sendall(head)
        reader.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            s.sendall(piece)
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError, socket.timeout) as e:
        closed = not isinstance(e, socket.timeout)
    finally:
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        reader.join(timeout=10)
        s.close()
    return sent, bytes(reply), closed


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--slow", type=int, default=200)
    ap.add_argument("--busy", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    lat = attack(a.port, a.slow, a.busy, a.seconds)
    answered = [x for x in lat if x is not None]
    print(f"{len(lat)} probes, {len(answered)} answered within 5 s", end="")
    if answered:
        print(f"; p50 {percentile(answered, 50) * 1000:.1f} ms, p99 {percentile(answered, 99) * 1000:.1f} ms,"
              f" max {max(answered) * 1000:.1f} ms")
    else:
        print()


if __name__ == "__main__":
    main()
