"""HTTP/2: strawberry under hypercorn with TLS (a test CA made here) and ALPN `h2`; gqlmuxd
with `transport = "multipart"` and `"sse"` carries 50 distinct subscriptions on ONE TCP
connection, and they resume on a new one after the server is killed and restarted.

Run by scripts/test.sh:  python3 -m unittest discover -s interop -t .
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time
import unittest

from interop.harness import BIN, Daemon, Server, Subscribers, outage


def make_test_ca(directory: str) -> tuple[str, str, str]:
    """A CA and a server certificate for 127.0.0.1 signed by it: (ca, cert, key) paths."""
    ca_key, ca, key, csr, cert = (os.path.join(directory, n) for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    ext = os.path.join(directory, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n")
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=gqlmux test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext)
    return ca, cert, key


class HTTP2Tests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.certs = tempfile.mkdtemp(prefix="gqlmux-ca-")
        self.ca, cert, key = make_test_ca(self.certs)
        self.server = Server("interop.strawberry_app:app", protocols="http", tls=(cert, key))
        self.server.start()
        self.daemon: Daemon | None = None
        self.subscribers: Subscribers | None = None

    async def asyncTearDown(self) -> None:
        if self.subscribers is not None:
            await self.subscribers.close()
        if self.daemon is not None:
            self.daemon.stop()
        self.server.stop()

    async def fifty_streams_on_one_connection(self, transport: str) -> None:
        self.daemon = Daemon("", f'transport = "{transport}"\nhttp_url = "{self.server.http_url}"\n'
                                 "reconnect_interval = 0.05\nreconnect_max_interval = 0.5\n"
                                 f'[upstream.headers]\nAuthorization = "Bearer secret"\n'
                                 f'[upstream.tls]\nca_file = "{self.ca}"\n')
        self.daemon.start()
        s = self.subscribers = Subscribers(clients=5, per_client=10, interval_ms=100)
        started = time.monotonic()
        await s.subscribe(self.daemon.socket)
        await s.wait(lambda: s.streaming_since(started) == 50, 20, "50 subscriptions streaming")
        streaming = time.monotonic() - started
        seen = await self.server.streams()
        self.assertEqual(seen["running"], 50)
        self.assertEqual(seen["versions"], ["2"], seen)
        self.assertEqual(seen["connections"], 1, f"50 streams over one TCP connection: {seen}")
        killed = time.monotonic()
        await outage(self.server, "kill")
        resumed = await s.wait_all_resumed(killed, 20)
        seen = await self.server.streams()  # the restarted server counts afresh
        self.assertEqual((seen["running"], seen["connections"], seen["versions"]), (50, 1, ["2"]), seen)
        self.assertEqual(s.errors(), [])
        print(f"\nHTTP/2 {transport}: 50 streams on 1 TCP connection after {streaming:.2f}s; "
              f"all resumed on a new connection {resumed - killed:.2f}s after a SIGKILL and restart", flush=True)
        # Queries and mutations ride the same HTTP/2 connection as the streams.
        ctl = lambda *args: subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", self.daemon.socket],
                                           capture_output=True, text=True, timeout=20)
        for _ in range(10):
            self.assertEqual(ctl("query", "{ hello }").stdout.strip(), '{"data":{"hello":"world"}}')
        mutation = ctl("query", "mutation { increment }")
        self.assertEqual(mutation.stdout.strip(), '{"data":{"increment":1}}', mutation.stderr)
        seen = await self.server.streams()
        self.assertEqual((seen["connections"], seen["mutations"]), (1, 1), f"11 requests on the streams' connection: {seen}")
        print(f"HTTP/2 {transport}: 10 queries and 1 mutation on that same connection ({seen['posts']} POSTs, "
              f"{seen['connections']} connection)", flush=True)

    async def test_multipart_streams_share_one_http2_connection(self) -> None:
        await self.fifty_streams_on_one_connection("multipart")

    async def test_sse_streams_share_one_http2_connection(self) -> None:
        await self.fifty_streams_on_one_connection("sse")


if __name__ == "__main__":
    unittest.main()
