"""Egress through an HTTP proxy: Debian's tinyproxy, started here with Basic authentication,
tunnels every upstream connection gqlmuxd makes (the WebSocket, `http_url` queries, HTTP
streams with TLS and HTTP/2 inside the tunnel) with CONNECT. A proxy that refuses gives a clear
error and a backoff, not a hot loop; the conventional environment (`http_proxy`, `no_proxy`)
is used when `[upstream] proxy` is not set. The real gqlmuxd, gqlmuxctl, strawberry, hypercorn.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from interop.harness import Daemon, Server, can_connect, reserve_port, terminate
from interop.test_http2 import make_test_ca
from interop.test_legacy import ctl


class TinyProxy:
    """tinyproxy in the foreground on a loopback port; `connects()` reads its log."""

    def __init__(self, user: str = "gqlmux", password: str = "s3cret"):
        self.directory = tempfile.mkdtemp(prefix="gqlmux-proxy-")
        self.reservation = reserve_port()
        self.port = self.reservation.getsockname()[1]
        self.log_path = os.path.join(self.directory, "tinyproxy.log")
        self.config = os.path.join(self.directory, "tinyproxy.conf")
        with open(self.config, "w") as f:
            # No ConnectPort line: CONNECT to any port (the test servers' ports are not 443).
            f.write(f"Port {self.port}\nListen 127.0.0.1\nTimeout 60\nLogLevel Connect\nMaxClients 100\n"
                    f"Allow 127.0.0.1\nBasicAuth {user} {password}\nDisableViaHeader Yes\n")
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.reservation.close()  # tinyproxy binds the port itself
        log = open(self.log_path, "w")
        self.process = subprocess.Popen(["tinyproxy", "-d", "-c", self.config], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if can_connect(self.port):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tinyproxy did not start: {self.log()}")

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def connects(self) -> list[str]:
        """The targets of every CONNECT the proxy was asked for, in order."""
        return re.findall(r"Request \(file descriptor \d+\): CONNECT (\S+) HTTP", self.log())

    def stop(self) -> None:
        terminate(self.process, 5)
        self.process = None


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class ProxyTests(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = TinyProxy()
        self.proxy.start()
        self.cleanups: list = []

    def tearDown(self) -> None:
        for cleanup in reversed(self.cleanups):
            cleanup()
        self.proxy.stop()
        shutil.rmtree(self.proxy.directory, ignore_errors=True)

    def server(self, *args, **kwargs) -> Server:
        server = Server(*args, **kwargs)
        server.start()
        self.cleanups.append(server.stop)
        return server

    def daemon(self, upstream: str, env: dict | None = None) -> Daemon:
        daemon = Daemon("", upstream)
        daemon.start(env=env)
        self.cleanups.append(daemon.stop)
        return daemon

    def test_websocket_and_http_queries_are_tunnelled_with_basic_authentication(self) -> None:
        server = self.server("interop.strawberry_app:app")
        target = f"127.0.0.1:{server.port}"
        # The password is percent-encoded in the URL ("%65" is "e"): gqlmuxd decodes it.
        daemon = self.daemon(f'url = "{server.url}"\nhttp_url = "{server.http_url}"\n'
                             f'proxy = "http://gqlmux:s3cr%65t@127.0.0.1:{self.proxy.port}"\n'
                             'connecting_payload = { token = "secret" }\n')
        ticks = ctl(daemon, "subscribe", "subscription { tick(intervalMs: 20) }", "--count", "3")
        self.assertEqual(ticks.returncode, 0, ticks.stderr + daemon.log())
        self.assertEqual([json.loads(line)["data"]["tick"] for line in ticks.stdout.splitlines()], [1, 2, 3])
        hello = ctl(daemon, "query", "{ hello }")
        self.assertEqual(json.loads(hello.stdout), {"data": {"hello": "world"}}, hello.stderr)
        connects = self.proxy.connects()
        print(f"\ntinyproxy saw CONNECT {connects}", flush=True)
        # One for the WebSocket, at least one for the query; none to anywhere else.
        self.assertGreaterEqual(len(connects), 2)
        self.assertEqual(set(connects), {target})
        self.assertNotIn("Proxy Authentication Required", daemon.log())

    def test_an_sse_stream_over_tls_and_http2_inside_the_tunnel(self) -> None:
        certs = tempfile.mkdtemp(prefix="gqlmux-ca-")
        self.cleanups.append(lambda: shutil.rmtree(certs, ignore_errors=True))
        ca, cert, key = make_test_ca(certs)
        server = self.server("interop.strawberry_app:app", protocols="http", tls=(cert, key))
        daemon = self.daemon(f'transport = "sse"\nhttp_url = "{server.http_url}"\n'
                             f'proxy = "http://gqlmux:s3cret@127.0.0.1:{self.proxy.port}"\n'
                             f'[upstream.headers]\nAuthorization = "Bearer secret"\n'
                             f'[upstream.tls]\nca_file = "{ca}"\n')
        for n in range(2):  # two streams: HTTP/2 carries both on one tunnelled connection
            ticks = ctl(daemon, "subscribe", f"subscription {{ tick(intervalMs: {20 + n}) }}", "--count", "3")
            self.assertEqual(ticks.returncode, 0, ticks.stderr + daemon.log())
            self.assertEqual([json.loads(line)["data"]["tick"] for line in ticks.stdout.splitlines()], [1, 2, 3])
        self.assertEqual(self.proxy.connects(), [f"127.0.0.1:{server.port}"], "one tunnel, TLS and h2 inside it")

    def test_a_refusing_proxy_gives_a_clear_error_and_a_backoff(self) -> None:
        server = self.server("interop.strawberry_app:app")
        daemon = self.daemon(f'url = "{server.url}"\nhttp_url = "{server.http_url}"\n'
                             f'proxy = "http://gqlmux:wrong@127.0.0.1:{self.proxy.port}"\n')
        started = time.monotonic()
        try:
            wait_for(lambda: "401" in json.loads(ctl(daemon, "status").stdout)["upstream"]["detail"], 10, "the refusal in status")
        except AssertionError:
            self.fail(ctl(daemon, "status").stdout + daemon.log())
        detail = json.loads(ctl(daemon, "status").stdout)["upstream"]["detail"]
        print(f"\nstatus detail: {detail}", flush=True)
        self.assertIn(f"127.0.0.1:{server.port} through proxy 127.0.0.1:{self.proxy.port}: "
                      "CONNECT refused: HTTP 401 Unauthorized", detail)  # tinyproxy's answer to a wrong password
        hello = ctl(daemon, "query", "{ hello }")
        self.assertEqual(hello.returncode, 1)
        self.assertIn("CONNECT refused: HTTP 401 Unauthorized", hello.stderr)
        time.sleep(max(0.0, 5 - (time.monotonic() - started)))
        # In 5 s: the first try and retries after about 1 s and 2 s more (plus the query's one).
        attempts = len(self.proxy.connects())
        self.assertLessEqual(attempts, 6, "backoff, not a hot loop")
        self.assertGreaterEqual(attempts, 3)
        self.assertNotIn("wrong", daemon.log(), "the password is never logged")

    def test_an_unreachable_proxy_is_named_once(self) -> None:
        server = self.server("interop.strawberry_app:app")
        closed = reserve_port()  # bound, never listening: connections are refused
        self.cleanups.append(closed.close)
        port = closed.getsockname()[1]
        daemon = self.daemon(f'url = "{server.url}"\nproxy = "http://127.0.0.1:{port}"\n')
        wait_for(lambda: "unreachable" in json.loads(ctl(daemon, "status").stdout)["upstream"]["detail"], 10, "the failure in status")
        detail = json.loads(ctl(daemon, "status").stdout)["upstream"]["detail"]
        self.assertIn(f"127.0.0.1:{server.port} through proxy 127.0.0.1:{port}: the proxy is unreachable: Connection refused", detail)
        self.assertEqual(detail.count(f"127.0.0.1:{port}"), 1, detail)

    def test_the_environment_is_used_when_the_key_is_unset_and_no_proxy_bypasses_it(self) -> None:
        server = self.server("interop.strawberry_app:app")
        upstream = f'url = "{server.url}"\nconnecting_payload = {{ token = "secret" }}\n'
        env = dict(os.environ, http_proxy=f"http://gqlmux:s3cret@127.0.0.1:{self.proxy.port}")
        env.pop("no_proxy", None)
        env.pop("NO_PROXY", None)
        tunnelled = self.daemon(upstream, env)
        wait_for(lambda: json.loads(ctl(tunnelled, "status").stdout)["upstream"]["state"] == "connected", 10, "connected")
        self.assertEqual(self.proxy.connects(), [f"127.0.0.1:{server.port}"])
        direct = self.daemon(upstream, dict(env, no_proxy="localhost,127.0.0.1"))
        wait_for(lambda: json.loads(ctl(direct, "status").stdout)["upstream"]["state"] == "connected", 10, "connected")
        self.assertEqual(len(self.proxy.connects()), 1, "no_proxy: the second daemon connected directly")


if __name__ == "__main__":
    unittest.main()
