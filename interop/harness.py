"""Real parts for the outage tests and the soak: a third-party GraphQL server (strawberry or
ariadne on uvicorn, from .venv-interop), the real gqlmuxd binary, and raw local-protocol
clients that record every line they read. Standard library only.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GQLMUX_BIN_DIR") or os.path.join(ROOT, ".build", "debug")
PYTHON = os.environ.get("GQLMUX_INTEROP_PYTHON") or os.path.join(ROOT, ".venv-interop", "bin", "python")


def reserve_port() -> socket.socket:
    """A loopback port held for a server's whole life: a socket bound with SO_REUSEADDR that
    never listens. Connections are refused while no server listens, and uvicorn (which binds
    with SO_REUSEADDR) can take it at every restart; no other process can in between."""
    reservation = socket.socket()
    reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    reservation.bind(("127.0.0.1", 0))
    return reservation


def can_connect(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def terminate(process: Optional[subprocess.Popen], seconds: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `seconds`; always reaped."""
    if process is None:
        return
    process.terminate()
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Server:
    """A uvicorn server on a fixed loopback port, restartable on that port."""

    def __init__(self, app: str = "interop.strawberry_app:app", protocols: str = "modern", directory: Optional[str] = None,
                 tls: Optional[Tuple[str, str]] = None, env: Optional[Dict[str, str]] = None):
        """`tls`: (certificate, key) files: serve HTTPS with hypercorn (HTTP/2 by ALPN) instead
        of uvicorn; `env`: variables the app reads, besides ours."""
        self.app = app
        self.env = env or {}
        self.tls = tls
        self.protocols = protocols
        self.reservation = reserve_port()
        self.port = self.reservation.getsockname()[1]
        self.process: Optional[subprocess.Popen] = None
        self.directory = directory or tempfile.mkdtemp(prefix="gqlmux-server-")
        self.starts = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/graphql"

    @property
    def http_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/graphql"

    async def streams(self) -> dict:
        """With protocols "http": {"running": subscription generators alive, "posts": POSTs seen}."""
        context = None
        if self.tls:
            import ssl
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=context)
        writer.write(b"GET /control/streams HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return json.loads(answer.split(b"\r\n\r\n", 1)[1])

    def start(self, wait: bool = True) -> None:
        self.starts += 1
        log = open(os.path.join(self.directory, f"server-{self.starts}.log"), "w")
        env = dict(os.environ, GQLMUX_INTEROP_PROTOCOLS=self.protocols, **self.env)
        if self.tls:
            command = [PYTHON, "-m", "hypercorn", self.app, "--bind", f"127.0.0.1:{self.port}",
                       "--certfile", self.tls[0], "--keyfile", self.tls[1]]
        else:
            command = [PYTHON, "-m", "uvicorn", self.app, "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        # A session of its own: hypercorn serves from a worker process, and a kill must take both.
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        log.close()
        if wait:
            self.wait_ready()

    def wait_ready(self, seconds: float = 20.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if can_connect(self.port):
                return
            if self.process is not None and self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"{self.app} did not start on port {self.port}; see {self.directory}")

    def kill(self) -> None:
        """SIGKILL: clients see the TCP connection vanish, then refusals until it is back."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)  # the server and its workers, started by us
            self.process.wait()
            self.process = None

    async def drop(self, how: str) -> int:
        """Drops every WebSocket: "close" (1012) or "abort" (no close frame). Returns how many."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(f"POST /control/drop?how={how} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return int(answer.split(b"\r\n\r\n", 1)[1] or b"0")

    def stop(self) -> None:
        process = self.process
        terminate(process, 10)
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # any worker left behind
            except ProcessLookupError:
                pass
        self.process = None
        self.reservation.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class Daemon:
    """The real gqlmuxd with a configuration written for the test."""

    def __init__(self, upstream_url: str, upstream_extra: str = "", extra: str = ""):
        self.directory = tempfile.mkdtemp(prefix="gqlmuxd-")
        self.socket = os.path.join(self.directory, "gqlmux.sock")
        self.config = os.path.join(self.directory, "gqlmuxd.toml")
        with open(self.config, "w") as f:
            url = f'url = "{upstream_url}"\n' if upstream_url else ""
            f.write(f'[upstream]\n{url}{upstream_extra}\n'
                    f'[socket]\npath = "{self.socket}"\n[log]\ntarget = "stderr"\n{extra}\n')
        self.process: Optional[subprocess.Popen] = None
        self.log_path = os.path.join(self.directory, "gqlmuxd.log")
        import re
        fixed = re.search(r'^listen = "127\.0\.0\.1:([1-9][0-9]*)"', extra, re.M)
        self.tcp_port = int(fixed.group(1)) if fixed else None

    def start(self, prefix: Optional[List[str]] = None, env: Optional[dict] = None, store=None) -> None:
        """`prefix`: a command gqlmuxd runs under, e.g. `["prlimit", "--nofile=256:256"]`;
        `env`: its whole environment (default: ours); `store`: an `interop.fdstore.FDStore`
        standing in for systemd (a SIGTERM then hands the clients over, and the next start
        adopts them). Each start's output is kept (`log()` reads all of them)."""
        self.starts = getattr(self, "starts", 0) + 1
        log = open(self.log_path, "a")
        log.write(f"==> start {self.starts}\n")
        log.flush()
        command = [os.path.join(BIN, "gqlmuxd"), "--config", self.config]
        ready = store.ready if store is not None else 0
        if store is not None:
            self.process = store.spawn(command, log, env=env, prefix=prefix)
        else:
            self.process = subprocess.Popen([*(prefix or []), *command], stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        # With a store, READY=1 says every listener is up (an inherited one accepts before that).
        deadline = time.monotonic() + 20
        while store is not None and store.ready == ready and time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.02)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.socket)
                # A fixed TCP port is bound after the line socket: wait for it too.
                if self.tcp_port and not can_connect(self.tcp_port):
                    raise OSError("the TCP port is not bound yet")
                return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.02)
        raise RuntimeError(f"gqlmuxd did not start: {self.log()}")

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def rss_kib(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self) -> None:
        terminate(self.process, 15)  # within gqlmuxd's graceful stop
        self.process = None
        shutil.rmtree(self.directory, ignore_errors=True)


async def wait_for(condition, seconds: float, what: str, poll: float = 0.05) -> None:
    """Polls `condition` (every `poll` seconds) until it holds; fails naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(poll)
    raise AssertionError(f"not within {seconds} s: {what}")


_held_ports: list[socket.socket] = []


def held_port(address: str = "127.0.0.1") -> int:
    """A loopback port held for this test process's whole life, for a listener that must keep
    its number across starts (gqlmuxd's endpoint, a page's origin): a socket bound with
    SO_REUSEADDR that never listens (see reserve_port). The listener, which binds with
    SO_REUSEADDR too, takes it at every start; no port picked by the system (a bind to port 0, a
    connect) can take it, before or in between."""
    reservation = socket.socket()
    reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    reservation.bind((address, 0))
    _held_ports.append(reservation)
    return reservation.getsockname()[1]


def endpoint_daemon(server: Server, extra: str = "", listen: str = "127.0.0.1:0") -> Daemon:
    """gqlmuxd in front of strawberry's "http" app (WebSocket upstream with its token, queries
    over `http_url` with its Authorization header), serving the endpoint on a free loopback
    port; `extra` is TOML appended after that `[graphql_endpoint] listen` line."""
    return Daemon(server.url,
                  'connecting_payload = { token = "secret" }\nreconnect_interval = 0.05\n'
                  'reconnect_max_interval = 0.5\nhttp_url = "%s"\n'
                  '[upstream.headers]\nAuthorization = "Bearer secret"\n' % server.http_url,
                  f'[graphql_endpoint]\nlisten = "{listen}"\n' + extra)


class LineClient:
    """A raw local-protocol client that records every line it reads, with its arrival time."""

    def __init__(self, name: str):
        self.name = name
        self.lines: List[Tuple[float, dict]] = []
        self.reader: Optional[asyncio.StreamReader] = None
        self.writer: Optional[asyncio.StreamWriter] = None
        self.task: Optional[asyncio.Task] = None

    async def connect(self, path: str) -> None:
        self.reader, self.writer = await asyncio.open_unix_connection(path, limit=1 << 22)
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.reader is not None
        while True:
            line = await self.reader.readline()
            if not line:
                return
            self.lines.append((time.monotonic(), json.loads(line)))

    def send(self, message: dict) -> None:
        assert self.writer is not None
        self.writer.write(json.dumps(message).encode() + b"\n")

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.task is not None:
            self.task.cancel()


class Subscribers:
    """`clients` × `per_client` distinct subscriptions to `tick`, each its own interval (so each
    is a distinct upstream operation), and what each of them heard."""

    def __init__(self, clients: int = 10, per_client: int = 10, interval_ms: int = 100):
        self.clients = [LineClient(f"c{i}") for i in range(clients)]
        self.per_client = per_client
        self.interval_ms = interval_ms

    @property
    def keys(self) -> List[Tuple[LineClient, str]]:
        return [(c, f"s{j}") for c in self.clients for j in range(self.per_client)]

    async def subscribe(self, path: str) -> None:
        for i, client in enumerate(self.clients):
            await client.connect(path)
            for j in range(self.per_client):
                interval = self.interval_ms + i * self.per_client + j  # distinct variables: distinct operations
                client.send({"type": "subscribe", "id": f"s{j}", "payload": {
                    "query": "subscription Tick($ms: Int!) { tick(intervalMs: $ms) }", "variables": {"ms": interval}}})
            await client.writer.drain()

    def events(self, client: LineClient, id: str, since: float = 0.0) -> List[Tuple[float, dict]]:
        return [(t, m) for t, m in client.lines if t >= since and m.get("id") == id]

    def errors(self) -> List[dict]:
        return [m for c in self.clients for _, m in c.lines if m.get("type") in ("error", "complete")]

    def resumed_at(self, client: LineClient, id: str, since: float) -> Optional[float]:
        """When this subscription, after `since`, was told `reconnecting`, then `active`, then got
        a result: the time of that result, else None."""
        stage = 0
        for t, m in self.events(client, id, since):
            if stage == 0 and m.get("type") == "state" and m.get("state") == "reconnecting":
                stage = 1
            elif stage == 1 and m.get("type") == "state" and m.get("state") == "active":
                stage = 2
            elif stage == 2 and m.get("type") == "next":
                return t
        return None

    def streaming_since(self, since: float) -> int:
        """How many subscriptions got a result after `since`."""
        return sum(1 for c, id in self.keys if any(m.get("type") == "next" for _, m in self.events(c, id, since)))

    def active(self) -> int:
        return sum(1 for c, id in self.keys
                   if any(m.get("type") == "state" and m.get("state") == "active" for _, m in self.events(c, id)))

    async def wait(self, condition, seconds: float, what: str) -> None:
        await wait_for(condition, seconds, what, poll=0.005)

    async def wait_all_resumed(self, since: float, seconds: float) -> float:
        """Waits until every subscription resumed after `since`; returns when the last one did."""
        pending = {(c.name, id): (c, id) for c, id in self.keys}
        last = since
        deadline = time.monotonic() + seconds
        while pending and time.monotonic() < deadline:
            for key, (c, id) in list(pending.items()):
                at = self.resumed_at(c, id, since)
                if at is not None:
                    last = max(last, at)
                    del pending[key]
            if pending:
                await asyncio.sleep(0.005)
        if pending:
            names = sorted(f"{c}/{i}" for c, i in pending)[:10]
            raise AssertionError(f"{len(pending)} subscriptions did not resume (reconnecting, active, a result) within "
                                 f"{seconds}s: {names}")
        return last

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


async def outage(server: Server, kind: str) -> None:
    """One outage: "close" (1012), "abort" (no close frame) or "kill" (SIGKILL and restart)."""
    if kind == "kill":
        server.kill()
        server.start(wait=False)
        await asyncio.get_running_loop().run_in_executor(None, server.wait_ready)
    else:
        await server.drop(kind)


def percentile(values: List[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]  # nearest rank


def daemon_settings(max_operations: int = 100) -> str:
    """The `[upstream]` lines of the outage runs: strawberry's token, its cap of 100 operations
    per connection, and a quick reconnect backoff (the defaults wait 1 s, doubling to 30 s)."""
    return (f'connecting_payload = {{ token = "secret" }}\nmax_operations_per_connection = {max_operations}\n'
            "reconnect_interval = 0.05\nreconnect_max_interval = 0.5\nreconnect_reset_after = 2\n")
