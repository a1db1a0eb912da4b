"""Subscriptions without a WebSocket: gqlmuxd with `transport = "multipart"` and `"sse"` in
front of strawberry (real server from PyPI, real gqlmuxd, raw local-protocol clients).

Run by scripts/test.sh:  python3 -m unittest discover -s interop -t .
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import unittest

from interop.fake_stream_server import FakeStreamServer
from interop.harness import BIN, Daemon, LineClient, Server, Subscribers, outage

TICK = "subscription Tick($ms: Int!) { tick(intervalMs: $ms) }"


def settings(server: Server, transport: str, token: str = "secret", extra: str = "") -> str:
    return (f'transport = "{transport}"\nhttp_url = "{server.http_url}"\n'
            "reconnect_interval = 0.05\nreconnect_max_interval = 0.5\nreconnect_reset_after = 2\n"
            f"{extra}[upstream.headers]\nAuthorization = \"Bearer {token}\"\n")


def subscribe(client: LineClient, id: str, query: str, variables: dict | None = None) -> None:
    payload = {"query": query}
    if variables is not None:
        payload["variables"] = variables
    client.send({"type": "subscribe", "id": id, "payload": payload})


def of(client: LineClient, id: str, type: str) -> list:
    return [m for _, m in client.lines if m.get("id") == id and m.get("type") == type]


def ctl(daemon: Daemon, *verb: str) -> str:
    return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *verb, "--socket", daemon.socket],
                          capture_output=True, text=True, timeout=10, check=True).stdout


def status(daemon: Daemon) -> dict:
    return json.loads(ctl(daemon, "status", "--json"))


class HTTPTransportTests:
    """Each test runs once per transport (the subclasses below)."""

    transport = ""

    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.server = Server("interop.strawberry_app:app", protocols="http")
        self.server.start()
        self.daemon: Daemon | None = None
        self.clients: list[LineClient] = []

    async def asyncTearDown(self) -> None:
        for client in self.clients:
            await client.close()
        if self.daemon is not None:
            self.daemon.stop()
        self.server.stop()

    def start_daemon(self, token: str = "secret", extra: str = "") -> Daemon:
        self.daemon = Daemon("", settings(self.server, self.transport, token, extra))
        self.daemon.start()
        return self.daemon

    async def client(self, name: str) -> LineClient:
        client = LineClient(name)
        await client.connect(self.daemon.socket)
        self.clients.append(client)
        return client

    async def wait(self, condition, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{self.transport}: timed out after {seconds}s waiting for: {what}\n{self.daemon.log()[-3000:]}")

    async def test_three_clients_share_one_stream(self) -> None:
        self.start_daemon()
        clients = [await self.client(f"c{i}") for i in range(3)]
        for client in clients:
            subscribe(client, "a", TICK, {"ms": 50})
        await self.wait(lambda: all(len(of(c, "a", "next")) >= 3 for c in clients), 10, "3 results for each client")
        self.assertEqual((await self.server.streams())["running"], 1, "one upstream stream for 3 subscribers")
        upstream = status(self.daemon)
        self.assertEqual(upstream["subscriptions"]["upstream"], 1)
        self.assertEqual(upstream["upstream"]["transport"], self.transport)
        self.assertEqual(upstream["upstream"]["streams"], 1)
        self.assertEqual(upstream["upstream"]["state"], "connected")
        first = json.loads(json.dumps(of(clients[0], "a", "next")[0]["payload"]))
        self.assertEqual(first, {"data": {"tick": 1}})

    async def test_a_hundred_subscriptions_stream_and_resume_after_a_server_kill(self) -> None:
        self.start_daemon()
        subscribers = Subscribers(clients=10, per_client=10, interval_ms=100)
        self.clients += subscribers.clients
        started = time.monotonic()
        await subscribers.subscribe(self.daemon.socket)
        await subscribers.wait(lambda: subscribers.streaming_since(started) == 100, 20, "100 streaming")
        streaming = time.monotonic() - started
        killed = time.monotonic()
        await outage(self.server, "kill")
        resumed = await subscribers.wait_all_resumed(killed, 20)
        self.assertEqual(subscribers.errors(), [])
        # One outage, counted once (as a WebSocket counts it), not once per stream retried.
        self.assertEqual(status(self.daemon)["upstream"]["reconnects"], 1)
        print(f"\n{self.transport}: 100 distinct subscriptions streaming after {streaming:.2f}s; "
              f"all resumed {resumed - killed:.2f}s after a SIGKILL and restart of the server", flush=True)

    async def test_an_error_inside_a_payload_keeps_the_stream(self) -> None:
        self.start_daemon()
        client = await self.client("c")
        subscribe(client, "f", "subscription { flaky(intervalMs: 30) { n bad } }")
        await self.wait(lambda: len(of(client, "f", "next")) >= 4, 10, "4 results")
        results = [m["payload"] for m in of(client, "f", "next")]
        with_errors = [r for r in results if r.get("errors")]
        self.assertTrue(with_errors, results)
        self.assertIn("odd tick", with_errors[0]["errors"][0]["message"])
        self.assertEqual(of(client, "f", "error") + of(client, "f", "complete"), [])

    async def test_a_query_and_a_mutation_over_the_same_http_url(self) -> None:
        self.start_daemon()
        client = await self.client("c")
        subscribe(client, "q", "{ hello }")
        subscribe(client, "m", "mutation { increment }")
        await self.wait(lambda: of(client, "q", "complete") and of(client, "m", "complete"), 10, "both answered")
        self.assertEqual(of(client, "q", "next")[0]["payload"], {"data": {"hello": "world"}})
        self.assertEqual(of(client, "m", "next")[0]["payload"], {"data": {"increment": 1}})
        # A document the server rejects: its GraphQL errors come back (strawberry sends them as
        # a result on the stream, then ends it), and the operation ends.
        subscribe(client, "bad", "subscription { nosuchfield }")
        await self.wait(lambda: of(client, "bad", "error") or of(client, "bad", "complete"), 10, "the bad document ended")
        errors = [e for m in of(client, "bad", "next") for e in m["payload"].get("errors", [])]
        errors += [e for m in of(client, "bad", "error") for e in m["payload"]]
        self.assertIn("nosuchfield", json.dumps(errors))

    async def test_queries_and_mutations_reuse_kept_alive_connections(self) -> None:
        self.start_daemon()
        client = await self.client("c")
        before = await self.server.streams()
        for n in range(30):  # one after another: each could reuse the last one's connection
            subscribe(client, f"q{n}", "{ hello }")
            await self.wait(lambda: of(client, f"q{n}", "complete"), 10, f"query {n} answered")
        for n in range(5):
            subscribe(client, f"m{n}", "mutation { increment }")
            await self.wait(lambda: of(client, f"m{n}", "complete"), 10, f"mutation {n} answered")
        after = await self.server.streams()
        print(f"\n{self.transport}: 35 POSTs to http_url came on {after['connections'] - before['connections']} "
              f"new connection(s) (server-side distinct client ports)", flush=True)
        self.assertEqual(after["posts"] - before["posts"], 35)
        self.assertLessEqual(after["connections"] - before["connections"], 1, "one kept-alive connection for all")
        self.assertEqual(after["mutations"] - before["mutations"], 5, "each mutation ran exactly once")
        self.assertEqual([of(client, f"m{n}", "next")[0]["payload"]["data"]["increment"] for n in range(5)], [1, 2, 3, 4, 5])

    async def test_pause_resume_reload_and_metrics(self) -> None:
        """`pause` drops the streams (subscribers hear `paused`), `resume` requests them again
        (`reconnecting`, `active`, results); a reload with a new token re-requests every stream
        with it; the metrics count the streams by transport."""
        daemon = self.start_daemon()
        client = await self.client("c")
        for n in range(3):
            subscribe(client, f"s{n}", TICK, {"ms": 50 + n})
        await self.wait(lambda: all(of(client, f"s{n}", "next") for n in range(3)), 10, "3 streaming")
        self.assertIn(f'gqlmux_upstream_streams{{transport="{self.transport}",upstream="default"}} 3', ctl(daemon, "metrics"))
        ctl(daemon, "pause")
        await self.wait(lambda: all(of(client, f"s{n}", "state")[-1]["state"] == "paused" for n in range(3)), 10, "paused")
        for _ in range(200):  # the server sees each dropped stream end
            if (await self.server.streams())["running"] == 0:
                break
            await asyncio.sleep(0.05)
        self.assertEqual((await self.server.streams())["running"], 0, "streams dropped while paused")
        self.assertEqual(status(daemon)["upstream"]["state"], "paused")
        ctl(daemon, "resume")
        since = time.monotonic()
        await self.wait(lambda: all(any(t > since and m.get("id") == f"s{n}" and m.get("type") == "next" for t, m in client.lines)
                                    for n in range(3)), 10, "streaming after resume")
        self.assertEqual([m["state"] for m in of(client, "s0", "state")], ["pending", "active", "paused", "reconnecting", "active"])
        # A reload with a wrong token: every stream is requested again with it and refused.
        with open(daemon.config) as f:
            config = f.read()
        with open(daemon.config, "w") as f:
            f.write(config.replace("Bearer secret", "Bearer rotated-wrong"))
        ctl(daemon, "reload")
        await self.wait(lambda: all(of(client, f"s{n}", "error") for n in range(3)), 10, "refused after the reload")
        self.assertIn("401", of(client, "s0", "error")[0]["payload"][0]["message"])

    async def test_a_wrong_token_fails_the_upstream_without_a_hot_loop(self) -> None:
        self.start_daemon(token="wrong")
        client = await self.client("c")
        subscribe(client, "a", TICK, {"ms": 50})
        await self.wait(lambda: of(client, "a", "error"), 10, "an error")
        error = of(client, "a", "error")[0]["payload"][0]
        self.assertEqual(error["extensions"]["code"], "UPSTREAM_CLOSED", error)
        self.assertIn("401", error["message"])
        posts = (await self.server.streams())["posts"]
        await asyncio.sleep(2)
        self.assertEqual((await self.server.streams())["posts"], posts, "no request after the 401")
        self.assertEqual(status(self.daemon)["upstream"]["state"], "failed")


    async def test_a_black_holed_stream_is_declared_dead_after_the_heartbeat_timeout(self) -> None:
        """A proxy stops forwarding the stream's bytes without closing anything (a dead NAT
        entry, a pulled cable): within heartbeat_timeout + 1 s the subscriber hears
        `reconnecting`, and the re-POST through a fresh connection streams again."""
        proxy = BlackHoleProxy(self.server.port)
        await proxy.start()
        try:
            heartbeat = 2.0
            self.daemon = Daemon("", settings(self.server, self.transport, extra=f"heartbeat_timeout = {heartbeat}\n")
                                 .replace(f":{self.server.port}/", f":{proxy.port}/"))
            self.daemon.start()
            client = await self.client("c")
            subscribe(client, "a", TICK, {"ms": 100})
            await self.wait(lambda: len(of(client, "a", "next")) >= 2, 10, "streaming through the proxy")
            holed = time.monotonic()
            proxy.black_hole()
            await self.wait(lambda: any(m.get("state") == "reconnecting" for m in of(client, "a", "state")),
                            heartbeat + 1, f"reconnecting within heartbeat_timeout ({heartbeat}s) + 1s")
            noticed = time.monotonic() - holed
            results = len(of(client, "a", "next"))
            await self.wait(lambda: len(of(client, "a", "next")) > results + 1, 10, "streaming again")
            print(f"\n{self.transport}: black-holed stream declared dead after {noticed:.2f}s "
                  f"(heartbeat_timeout {heartbeat}s), streaming again on a new connection", flush=True)
        finally:
            await proxy.stop()


    async def test_a_broken_stream_is_requested_again_and_disturbs_no_other(self) -> None:
        """Against a server that breaks one stream at a time (invalid UTF-8, garbage, a part
        over max_message_bytes): that stream is dropped and POSTed again with backoff, its
        subscriber hears `reconnecting`, never sees the bad bytes; a healthy stream beside it
        never hears `reconnecting` and keeps streaming."""
        fake = FakeStreamServer(self.transport)
        await fake.start()
        try:
            self.daemon = Daemon("", f'transport = "{self.transport}"\nhttp_url = "http://127.0.0.1:{fake.port}/graphql"\n'
                                     "reconnect_interval = 0.1\nreconnect_max_interval = 0.2\nmax_message_bytes = 1024\n")
            self.daemon.start()
            client = await self.client("c")
            subscribe(client, "good", "subscription { good }")
            for kind in ("badutf8", "garbage", "huge"):
                subscribe(client, kind, "subscription { %s }" % kind)
            await self.wait(lambda: all(fake.posts.get(k, 0) >= 3 for k in ("badutf8", "garbage", "huge")), 15,
                            "each broken stream POSTed again at least twice")
            good = len(of(client, "good", "next"))
            await self.wait(lambda: len(of(client, "good", "next")) > good + 5, 10, "the good stream still streaming")
            self.assertEqual([m["state"] for m in of(client, "good", "state")], ["pending", "active"])
            for kind in ("badutf8", "garbage", "huge"):
                self.assertIn("reconnecting", [m["state"] for m in of(client, kind, "state")], kind)
                self.assertEqual(of(client, kind, "error") + of(client, kind, "complete"), [], kind)
                self.assertTrue(all(m["payload"]["data"]["n"] in (1, 2) for m in of(client, kind, "next")), kind)
            log = self.daemon.log()
            self.assertIn("protocol violation", log)
            print(f"\n{self.transport}: broken streams re-POSTed {fake.posts}; the good one streamed on", flush=True)
        finally:
            await fake.stop()


class BlackHoleProxy:
    """A loopback TCP proxy to `port`; `black_hole()` silently stops forwarding on every
    connection open now (nothing is closed), while new connections forward normally."""

    def __init__(self, port: int):
        self.target = port
        self.port = 0
        self.server: asyncio.base_events.Server | None = None
        self.pipes: list[list] = []  # [holed] flags of open connections
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    def black_hole(self) -> None:
        for flag in self.pipes:
            flag[0] = True

    async def _serve(self, reader, writer) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target)
        flag = [False]
        self.pipes.append(flag)
        self.writers += [writer, upstream_writer]

        async def pump(source, sink) -> None:
            try:
                while data := await source.read(65536):
                    if not flag[0]:
                        sink.write(data)
                        await sink.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                if not flag[0]:
                    sink.close()

        try:
            await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))
        except asyncio.CancelledError:
            # The test's loop is closing: end quietly (Python 3.11's stream callback would log a
            # cancelled handler as an error, burying a real failure's report).
            pass

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in self.writers:
            writer.transport.abort()


class MultipartTests(HTTPTransportTests, unittest.IsolatedAsyncioTestCase):
    transport = "multipart"


class SSETests(HTTPTransportTests, unittest.IsolatedAsyncioTestCase):
    transport = "sse"


if __name__ == "__main__":
    unittest.main()
