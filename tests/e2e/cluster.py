"""deploy/serve.sh as tests and benchmarks use it: N replicas behind nginx on loopback, their pids, sticky cookies."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COOKIE = "attention_sticky"  # deploy/nginx.conf.template's sticky cookie: the key hashed to place a session
REPLICA_COOKIE = "attention_replica"  # the replica that answered last, which then keeps the session
REPLICA_HEADER = "X-Attention-Replica"  # which replica answered, as nginx says
START_TIMEOUT = 240  # seconds: N replicas import torch at once on two slow cores, then each is warmed


@dataclass
class Cluster:
    url: str  # nginx's, or the replica's own when there is no proxy
    run: Path  # serve.sh's run folder: pid files, logs
    ports: list[int]  # the replicas'

    def pid(self, port: int) -> int:
        return int((self.run / f"replica-{port}.pid").read_text())

    def replica_of(self, cookie: str) -> int:
        """The port of the replica that nginx sends this sticky cookie to."""
        request = urllib.request.Request(f"{self.url}/_stcore/health", headers={"Cookie": f"{COOKIE}={cookie}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.headers[REPLICA_HEADER].split(",")[-1].rsplit(":", 1)[1])

    def cookies(self, per_replica: int) -> dict[int, list[str]]:
        """Sticky cookie values that nginx sends to each replica, `per_replica` of each (found by asking it)."""
        found: dict[int, list[str]] = {port: [] for port in self.ports}
        for i in range(50 * per_replica * len(self.ports)):
            if all(len(v) >= per_replica for v in found.values()):
                return {port: v[:per_replica] for port, v in found.items()}
            cookie = f"{i:032x}"  # the shape of nginx's own: 32 hex digits
            found[self.replica_of(cookie)].append(cookie)
        raise AssertionError(f"the cookie hash sends few keys to some replica: {found}")


def free_ports(count: int) -> int:
    """A first port such that it and the `count - 1` after it are free on loopback (serve.sh's layout)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            sockets = [socket.create_server(("127.0.0.1", first + i)) for i in range(count)]
        except OSError:
            continue
        for s in sockets:
            s.close()
        return first
    raise RuntimeError("no run of free loopback ports")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.read().strip() == b"ok"
    except OSError:
        return False


@contextmanager
def serve(replicas: int, run: Path, proxy: bool = True):
    """deploy/serve.sh with `replicas` replicas (and nginx, unless proxy is False), stopped by SIGTERM at the end."""
    port = free_ports(replicas + 1)
    run.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"ATTENTION_RUN": str(run)} | ({} if proxy else {"ATTENTION_NO_PROXY": "1"})
    log = (run / "serve.log").open("wb")
    process = subprocess.Popen(
        ["bash", str(ROOT / "deploy" / "serve.sh"), str(replicas), str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: a last-resort stop reaches what it started, nothing else
    )
    ports = [port + i for i in range(1, replicas + 1)]
    cluster = Cluster(f"http://127.0.0.1:{port}" if proxy else f"http://127.0.0.1:{ports[0]}", run, ports)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while b"serve.sh: ready" not in (run / "serve.log").read_bytes():
            if process.poll() is not None:
                raise RuntimeError(f"serve.sh exited with {process.returncode}:\n{_logs(run)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve.sh was not ready after {START_TIMEOUT} s:\n{_logs(run)}")
            time.sleep(0.25)
        assert _healthy(cluster.url)
        yield cluster
    finally:
        process.terminate()  # serve.sh stops nginx and the replicas it started
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


def _logs(run: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(run.glob("*.log")))
