"""The local GraphQL endpoint tried as an attacker would: a web page's requests (foreign or null
Origin, Sec-Fetch-Site), DNS rebinding (a foreign Host), GET and media-type tricks, a local user
without the token, and floods of every listener. The real gqlmuxd in front of a real strawberry,
whose counters prove what reached the server.

Run by scripts/test.sh with the interop virtualenv's Python.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import time
import unittest

import websockets

from interop import endpoint_attacks as attack
from interop.harness import BIN, Daemon, LineClient, Server, endpoint_daemon

ALLOWED = "http://127.0.0.3:8000"


def raise_own_open_file_limit() -> int:
    """The floods open more connections than a shell's default 1,024 descriptors: this test
    process takes its hard limit (as gqlmuxd does). Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
MUTATION = "mutation { increment }"
TOKEN = "0123456789abcdef-0123456789abcdef"


def ctl(daemon: Daemon, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", daemon.socket],
                          capture_output=True, text=True, timeout=20, check=check)


class EndpointCase(unittest.IsolatedAsyncioTestCase):
    """strawberry (all transports) and gqlmuxd with `listen`; `endpoint` is extra
    `[graphql_endpoint]` TOML, `extra` any other section."""

    endpoint = f'allowed_origins = ["{ALLOWED}"]\n'
    extra = ""
    prefix = None

    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.server = Server("interop.strawberry_app:app", protocols="http")
        self.server.start()
        # The extra sections go first: endpoint_daemon ends inside [graphql_endpoint].
        self.daemon = endpoint_daemon(self.server, self.endpoint)
        with open(self.daemon.config) as f:
            text = f.read()
        with open(self.daemon.config, "w") as f:
            f.write(text.replace("[graphql_endpoint]\n", self.extra + "[graphql_endpoint]\n", 1))
        self.daemon.start(self.prefix)
        addresses = json.loads(ctl(self.daemon, "status", "--json").stdout)["graphqlEndpoint"].split()
        self.unix = next(a for a in addresses if a.startswith("/"))
        http = next(a for a in addresses if a.startswith("http://"))
        self.port = int(http.split(":")[2].split("/")[0])
        self.tcp = ("127.0.0.1", self.port)
        self.host = f"127.0.0.1:{self.port}"

    async def asyncTearDown(self) -> None:
        self.daemon.stop()
        self.server.stop()

    async def counts(self) -> dict:
        return await self.server.streams()

    async def line_subscriber(self, interval_ms: int = 50) -> LineClient:
        client = LineClient("victim")
        await client.connect(self.daemon.socket)
        client.send({"type": "subscribe", "id": "t", "payload": {"query": f"subscription {{ tick(intervalMs: {interval_ms}) }}"}})
        await self.results_after(client, time.monotonic() - 60, 1, 20)
        return client

    async def results_after(self, client: LineClient, since: float, count: int, seconds: float) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got = sum(1 for t, m in client.lines if t >= since and m.get("type") == "next")
            if got >= count:
                return got
            await asyncio.sleep(0.02)
        self.fail(f"{client.name} got fewer than {count} results in {seconds}s: {client.lines[-3:]}")


class BrowserChecksTests(EndpointCase):
    async def test_pages_and_rebinding_reach_nothing_upstream(self) -> None:
        evil = {"Origin": "https://evil.example"}
        attempts = [
            ("WS upgrade, foreign Origin", attack.upgrade(self.tcp, self.host, evil), 403),
            ("WS upgrade, Origin null (sandboxed iframe)", attack.upgrade(self.tcp, self.host, {"Origin": "null"}), 403),
            ("WS upgrade, rebinding Host", attack.upgrade(self.tcp, f"evil.example:{self.port}"), 403),
            ("WS upgrade, legacy protocol, foreign Origin", attack.upgrade(self.tcp, self.host, evil, "graphql-ws"), 403),
            ("POST JSON, foreign Origin", attack.post_json(self.tcp, MUTATION, self.host, evil), 403),
            ("POST text/plain from a page", attack.post_json(self.tcp, MUTATION, self.host,
                                                           {**evil, "Sec-Fetch-Site": "cross-site"}, "text/plain"), 403),
            ("POST rebinding Host", attack.post_json(self.tcp, MUTATION, f"evil.example:{self.port}"), 403),
            ("POST no Host", attack.post_json(self.tcp, MUTATION, None), 400),
            ("POST application/jsonx", attack.post_json(self.tcp, MUTATION, self.host, content_type="application/jsonx"), 415),
            ("POST text/plain", attack.post_json(self.tcp, MUTATION, self.host, content_type="text/plain"), 415),
            ("GET <img> query", attack.request(self.tcp, "GET", attack.get_target("{ hello }"), self.host,
                                               {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"}), 403),
            ("GET mutation", attack.request(self.tcp, "GET", attack.get_target(MUTATION), self.host), 405),
            ("GET unparsable mutation", attack.request(self.tcp, "GET", attack.get_target("mutation { increment"), self.host), 405),
            ("GET EventSource subscription", attack.request(self.tcp, "GET", attack.get_target("subscription { tick }"), self.host,
                                                            {**evil, "Accept": "text/event-stream"}), 403),
            ("Unix socket, rebinding Host", attack.post_json(self.unix, MUTATION, "evil.example"), 403),
            ("Unix socket, foreign Origin", attack.post_json(self.unix, MUTATION, "localhost", evil), 403),
            ("Unix socket, WS with foreign Origin", attack.upgrade(self.unix, "localhost", evil), 403),
        ]
        for name, attempt, status in attempts:
            result = await attempt
            response = result[0] if isinstance(result, tuple) else result
            if isinstance(result, tuple):
                result[2].close()
            self.assertEqual(response.status, status, f"{name}: {response}")
            self.assertIsNone(response.header("access-control-allow-origin"), name)
        counts = await self.counts()
        self.assertEqual((counts["mutations"], counts["hellos"], counts["started"]), (0, 0, 0), counts)
        log = self.daemon.log()
        self.assertIn("GQLMUX_REASON=foreign_origin", log)
        self.assertIn("GQLMUX_REASON=foreign_host", log)
        metrics = ctl(self.daemon, "metrics").stdout

        def refused(listener: str, reason: str) -> float:
            name = f'gqlmux_refused_total{{listener="{listener}",reason="{reason}"}}'
            return next(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(name))

        self.assertGreaterEqual(refused("endpoint-tcp", "foreign_origin"), 7)
        self.assertGreaterEqual(refused("endpoint-tcp", "foreign_host"), 2)
        self.assertEqual(refused("endpoint", "foreign_host"), 1)
        self.assertEqual(refused("endpoint", "foreign_origin"), 2)
        # The same requests without the browser's headers work: the counters can count.
        for address, host in [(self.tcp, self.host), (self.tcp, "localhost"), (self.unix, "localhost")]:
            response = await attack.post_json(address, MUTATION, host)
            self.assertEqual(response.status, 200, response)
        response = await attack.request(self.tcp, "GET", attack.get_target("{ hello }"), f"[::1]:{self.port}")
        self.assertEqual((response.status, response.json()), (200, {"data": {"hello": "world"}}))
        counts = await self.counts()
        self.assertEqual((counts["mutations"], counts["hellos"]), (3, 1), counts)

    async def test_a_page_retrying_in_a_loop_is_counted_not_logged_each_time(self) -> None:
        for _ in range(200):
            response = await attack.post_json(self.tcp, MUTATION, self.host, {"Origin": "https://loop.example"})
            self.assertEqual(response.status, 403)
        entries = self.daemon.log().count("GQLMUX_ORIGIN=https://loop.example")
        self.assertTrue(1 <= entries <= 20, f"{entries} journal entries for 200 refusals")
        metrics = ctl(self.daemon, "metrics").stdout
        line = next(line for line in metrics.splitlines() if line.startswith('gqlmux_refused_total{listener="endpoint-tcp",reason="foreign_origin"}'))
        self.assertEqual(float(line.split()[-1]), 200)
        self.assertEqual((await self.counts())["mutations"], 0)

    async def test_an_allowed_origin_gets_cors_and_never_a_wildcard(self) -> None:
        preflight = await attack.request(self.tcp, "OPTIONS", host=self.host, headers={
            "Origin": ALLOWED, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization"})
        self.assertEqual(preflight.status, 204, preflight)
        self.assertEqual(preflight.header("access-control-allow-origin"), ALLOWED)
        self.assertEqual(preflight.header("access-control-allow-headers"), "content-type, authorization")
        self.assertIn("POST", preflight.header("access-control-allow-methods"))
        foreign = await attack.request(self.tcp, "OPTIONS", host=self.host, headers={
            "Origin": "http://127.0.0.2:8000", "Access-Control-Request-Method": "POST"})
        self.assertEqual(foreign.status, 403, foreign)
        response = await attack.post_json(self.tcp, "{ hello }", self.host, {"Origin": ALLOWED, "Sec-Fetch-Site": "cross-site"})
        self.assertEqual(response.status, 200, response)
        self.assertEqual(response.header("access-control-allow-origin"), ALLOWED)
        self.assertEqual(response.header("vary"), "Origin")
        plain = await attack.post_json(self.tcp, "{ hello }", self.host)
        self.assertIsNone(plain.header("access-control-allow-origin"))
        upgrade, reader, writer = await attack.upgrade(self.tcp, self.host, {"Origin": ALLOWED})
        writer.close()
        self.assertEqual(upgrade.status, 101, upgrade)


class ReloadedLimitsTests(EndpointCase):
    extra = "[limits]\nmax_document_tokens = 5\n"

    async def test_reloaded_document_limits_apply_to_every_listener_at_once(self) -> None:
        six_tokens = "mutation { increment increment increment }"
        eight_tokens = "{ a: hello b: hello }"
        for address, host in [(self.tcp, self.host), (self.unix, "localhost")]:
            response = await attack.post_json(address, eight_tokens, host)
            self.assertEqual(response.status, 429, response)  # LIMIT_EXCEEDED
        with open(self.daemon.config) as f:
            text = f.read()
        with open(self.daemon.config, "w") as f:
            f.write(text.replace("max_document_tokens = 5", "max_document_tokens = 1000"))
        ctl(self.daemon, "reload")
        for address, host in [(self.tcp, self.host), (self.unix, "localhost")]:
            response = await attack.post_json(address, eight_tokens, host)
            self.assertEqual((response.status, response.json()), (200, {"data": {"a": "world", "b": "world"}}))
            # Before, the GET guard parsed with start-up limits, failed, and let the mutation run.
            response = await attack.request(address, "GET", attack.get_target(six_tokens), host)
            self.assertEqual(response.status, 405, response)
        self.assertEqual((await self.counts())["mutations"], 0)


class TokenTests(EndpointCase):
    extra = "[security]\nallowed_uids = [12345]\n"

    async def asyncSetUp(self) -> None:
        self.token_dir = os.path.join("/tmp", f"gqlmux-token-{os.getpid()}-{id(self)}")
        os.makedirs(self.token_dir, exist_ok=True)
        self.token_file = os.path.join(self.token_dir, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(self.token_file, 0o600)
        self.endpoint = f'token_file = "{self.token_file}"\n'
        await super().asyncSetUp()

    async def test_tcp_clients_need_the_token_unix_clients_do_not(self) -> None:
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                        {"Authorization": f"Bearer {TOKEN}x"}]:
            response = await attack.post_json(self.tcp, MUTATION, self.host, headers)
            self.assertEqual(response.status, 401, (headers, response))
            self.assertEqual(response.header("www-authenticate"), 'Bearer realm="gqlmuxd"')
        upgrade, _, writer = await attack.upgrade(self.tcp, self.host, {"Authorization": "Bearer wrong"})
        writer.close()
        self.assertEqual(upgrade.status, 401, upgrade)
        self.assertEqual((await self.counts())["mutations"], 0)
        response = await attack.post_json(self.tcp, MUTATION, self.host, {"Authorization": f"Bearer {TOKEN}"})
        self.assertEqual(response.status, 200, response)
        response = await attack.post_json(self.unix, MUTATION, "localhost")
        self.assertEqual(response.status, 200, response)
        self.assertEqual((await self.counts())["mutations"], 2)
        self.assertIn("GQLMUX_EVENT=unauthorized", self.daemon.log())

    async def test_websocket_clients_present_the_token_in_a_header_or_connection_init(self) -> None:
        url = f"ws://{self.host}/graphql"
        async with websockets.connect(url, subprotocols=["graphql-transport-ws"],
                                      additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            await ws.send(json.dumps({"type": "connection_init"}))
            self.assertEqual(json.loads(await ws.recv())["type"], "connection_ack")
        async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
            await ws.send(json.dumps({"type": "connection_init", "payload": {"token": TOKEN}}))
            self.assertEqual(json.loads(await ws.recv())["type"], "connection_ack")
            await ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": "{ hello }"}}))
            self.assertEqual(json.loads(await ws.recv())["payload"], {"data": {"hello": "world"}})
        for payload in [{"token": "wrong-wrong-wrong-wrong"}, {"authorization": "Bearer nope"}, None]:
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init", **({"payload": payload} if payload else {})}))
                await ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": MUTATION}}))
                with self.assertRaises(websockets.ConnectionClosed) as closed:
                    while True:
                        await asyncio.wait_for(ws.recv(), 10)
                self.assertEqual(closed.exception.rcvd.code, 4403, payload)
        async with websockets.connect(url, subprotocols=["graphql-ws"]) as ws:
            await ws.send(json.dumps({"type": "start", "id": "1", "payload": {"query": MUTATION}}))
            self.assertEqual(json.loads(await ws.recv())["type"], "connection_error")
            with self.assertRaises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            self.assertEqual(closed.exception.rcvd.code, 4403)
        self.assertEqual((await self.counts())["mutations"], 0)

    async def test_listen_with_allowed_uids_and_no_token_is_refused_at_start_and_at_reload(self) -> None:
        bare = Daemon(self.server.url, "", "[security]\nallowed_uids = [12345]\n[graphql_endpoint]\nlisten = \"127.0.0.1:0\"\n")
        try:
            result = subprocess.run([os.path.join(BIN, "gqlmuxd"), "--config", bare.config], capture_output=True, text=True, timeout=20)
            self.assertEqual(result.returncode, 1, result)
            self.assertIn("token_file", result.stderr)
            self.assertIn("allow_all_local_users", result.stderr)
        finally:
            bare.stop()
        with open(self.daemon.config) as f:
            text = f.read().replace(f'token_file = "{self.token_file}"', "")
        # Dropping the token, and also `listen` (a start-only key: the TCP port stays open).
        for edited in [text, text.replace('listen = "127.0.0.1:0"', "")]:
            with open(self.daemon.config, "w") as f:
                f.write(edited)
            reload = ctl(self.daemon, "reload", check=False)
            self.assertNotEqual(reload.returncode, 0, reload)
            self.assertIn("allow_all_local_users", reload.stderr + reload.stdout)
            response = await attack.post_json(self.tcp, "{ hello }", self.host)
            self.assertEqual(response.status, 401, "the running configuration, with its token, is kept")


class TimeoutTests(EndpointCase):
    async def test_stalled_and_trickling_requests_are_closed_after_the_header_timeout(self) -> None:
        async def stall(partial: bytes, after_a_request: bool = False) -> tuple:
            reader, writer = await attack.open_connection(self.tcp)
            if after_a_request:  # a kept-alive connection: its next request gets the same 10 s
                writer.write(attack.build("POST", "/graphql", "127.0.0.1", {"Content-Type": "application/json"},
                                          b'{"query":"{ hello }"}'))
                self.assertEqual((await attack.read_response(reader)).status, 200)
                await asyncio.sleep(1)
            started = time.monotonic()
            writer.write(partial)
            await writer.drain()

            async def trickle() -> None:  # a byte every 2 s: never a whole head
                while partial:
                    await asyncio.sleep(2)
                    writer.write(b"X")
                    await writer.drain()

            trickler = asyncio.create_task(trickle())
            answer = await asyncio.wait_for(reader.read(), 20)
            elapsed = time.monotonic() - started
            trickler.cancel()
            writer.close()
            return elapsed, answer

        head = b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        results = await asyncio.gather(stall(b""), stall(head), stall(head, after_a_request=True))
        for elapsed, answer in results:
            self.assertTrue(9 <= elapsed <= 16, elapsed)
            self.assertTrue(answer.startswith(b"HTTP/1.1 408"), answer[:100])
        self.assertIn("GQLMUX_TIMEOUT=header", self.daemon.log())


class FloodTests(EndpointCase):
    extra = "[limits]\nmax_clients = 20\ntotal_buffer_bytes = 1048576\nclient_buffer_bytes = 65536\n"
    endpoint = "socket_max_connections = 20\nlisten_max_connections = 20\n"

    async def flood(self, address, count: int) -> list:
        connections = []
        self.addCleanup(lambda: [writer.close() for _, writer in connections])
        for _ in range(count):
            connections.append(await attack.open_connection(address))
        return connections

    async def check_others_work(self, victim: LineClient, flooded: str) -> None:
        since = time.monotonic()
        await self.results_after(victim, since, 3, 10)
        if flooded != "tcp":
            response = await attack.post_json(self.tcp, "{ hello }", self.host)
            self.assertEqual(response.status, 200, f"TCP while {flooded} is flooded: {response}")
        if flooded != "unix":
            response = await attack.post_json(self.unix, "{ hello }", "localhost")
            self.assertEqual(response.status, 200, f"endpoint socket while {flooded} is flooded: {response}")
        if flooded != "line":
            client = LineClient("late")
            await client.connect(self.daemon.socket)
            client.send({"type": "subscribe", "id": "q", "payload": {"query": "{ hello }"}})
            await self.results_after(client, since, 1, 10)
            await client.close()
        if flooded != "line":  # gqlmuxctl itself uses the line socket
            status = json.loads(ctl(self.daemon, "status", "--json").stdout)
            self.assertEqual(status["upstream"]["state"], "connected", status)

    async def test_each_listener_flood_refuses_only_its_own_listener(self) -> None:
        victim = await self.line_subscriber()
        for name, address in [("tcp", self.tcp), ("unix", self.unix), ("line", self.daemon.socket)]:
            connections = await self.flood(address, 40)
            # The 21st and later are refused at once, with an answer their protocol understands.
            reader, _ = connections[-1]
            refusal = await asyncio.wait_for(reader.read(), 10)
            expected = b'"code":"LIMIT_EXCEEDED"' if name == "line" else b"HTTP/1.1 503"
            self.assertIn(expected, refusal[:300], name)
            await self.check_others_work(victim, name)
            for _, writer in connections:
                writer.close()
            await asyncio.sleep(0.3)
        self.assertIn("GQLMUX_LIMIT=listen_max_connections", self.daemon.log())
        await victim.close()

    async def test_half_sent_bodies_are_refused_past_the_memory_budget(self) -> None:
        victim = await self.line_subscriber()
        rss_before = self.daemon.rss_kib()
        chunk = b"x" * 60_000
        writers, refused = [], 0
        self.addCleanup(lambda: [writer.close() for _, writer in writers])
        for i in range(30):
            address, host = (self.tcp, self.host) if i % 2 else (self.unix, "localhost")
            reader, writer = await attack.open_connection(address)
            writer.write(attack.build("POST", "/graphql", host, {"Content-Type": "application/json", "Content-Length": "1000000"}))
            writer.write(b'{"query":"' + chunk)
            await writer.drain()
            writers.append((reader, writer))
        await asyncio.sleep(1)
        # 30 × 60 kB is over 1 MiB: some are refused (or cut for a smaller one), not buffered.
        await self.check_others_work(victim, "none")
        for reader, _ in writers:
            try:
                answer = await asyncio.wait_for(reader.read(200), 0.5)
            except asyncio.TimeoutError:
                continue
            refused += answer.startswith(b"HTTP/1.1 503")
        self.assertGreaterEqual(refused, 1)
        self.assertIn("total_buffer_bytes (1048576)", self.daemon.log())
        for _, writer in writers:
            writer.close()
        await self.budget_returns_to_zero()
        self.assertLess(self.daemon.rss_kib() - rss_before, 64 * 1024, "memory stays within the budget's reach")
        for _, writer in writers:
            writer.close()
        await victim.close()


    async def test_half_sent_websocket_messages_count_in_the_memory_budget(self) -> None:
        victim = await self.line_subscriber()
        sockets = []
        self.addCleanup(lambda: [writer.close() for _, writer in sockets])
        for i in range(20):
            address, host = (self.tcp, self.host) if i % 2 else (self.unix, "localhost")
            response, reader, writer = await attack.upgrade(address, host)
            self.assertEqual(response.status, 101, response)
            # A frame that announces 1,000,000 bytes and sends 100 kB of them.
            writer.write(bytes([0x81, 0x80 | 127]) + (1_000_000).to_bytes(8, "big") + b"\0\0\0\0" + b"x" * 100_000)
            await writer.drain()
            sockets.append((reader, writer))
        await asyncio.sleep(1)
        await self.check_others_work(victim, "none")
        closed = 0
        for reader, _ in sockets:
            try:
                data = await asyncio.wait_for(reader.read(200), 0.5)
            except (asyncio.TimeoutError, ConnectionError):
                continue
            closed += data == b"" or data[:1] == b"\x88"  # EOF or a close frame
        self.assertGreaterEqual(closed, 10, "20 × 100 kB does not fit 1 MiB: connections were closed, not buffered")
        self.assertIn("total_buffer_bytes (1048576)", self.daemon.log())
        for _, writer in sockets:
            writer.close()
        await self.budget_returns_to_zero()
        await victim.close()

    async def budget_returns_to_zero(self) -> None:
        """Every closed connection gave its share of the budget back."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            buffers = json.loads(ctl(self.daemon, "status", "--json").stdout)["buffers"]
            if buffers["inbound"] == 0:
                return
            await asyncio.sleep(0.1)
        self.fail(f"unfinished-request bytes still counted after every such connection closed: {buffers}")


# gqlmuxd's limit in the flood test: systemd's default soft limit (1,024), or less where this
# process cannot hold more connections than that (a shell's hard limit of 1,024).
FLOODED_LIMIT = min(1024, (raise_own_open_file_limit() - 300) * 9 // 10)


class OpenFileLimitTests(EndpointCase):
    """systemd's default soft limit without a raise (1,024), and the flood that once made every
    listener time out and the upstream reconnect fail with "Too many open files"."""

    prefix = ["prlimit", f"--nofile={FLOODED_LIMIT}:{FLOODED_LIMIT}"]

    async def test_1100_idle_tcp_connections_leave_the_upstream_and_the_other_listeners_alone(self) -> None:
        log = self.daemon.log()
        self.assertIn(f"GQLMUX_NOFILE={FLOODED_LIMIT}", log)
        self.assertIn("lowered in proportion", log)
        count = FLOODED_LIMIT + 76  # 1,100: more connections than gqlmuxd has descriptors
        victim = await self.line_subscriber()
        connections, refused = [], 0
        self.addCleanup(lambda: [writer.close() for _, writer in connections])
        for _ in range(count):
            connections.append(await attack.open_connection(self.tcp))
        await asyncio.sleep(0.5)
        for reader, _ in connections:
            if reader.at_eof() or reader._buffer:  # noqa: SLF001 (answered at once: 503)
                refused += 1
        self.assertGreater(refused, count - 200, "the TCP port's own limit refuses the rest at once")
        # The upstream reconnects through the flood: descriptors are reserved for it.
        await self.server.drop("close")
        since = time.monotonic()
        await self.results_after(victim, since, 3, 15)
        response = await attack.post_json(self.unix, "{ hello }", "localhost")
        self.assertEqual(response.status, 200, response)
        self.assertNotIn("Too many open files", self.daemon.log())
        for _, writer in connections:
            writer.close()
        await asyncio.sleep(0.5)
        response = await attack.post_json(self.tcp, "{ hello }", self.host)
        self.assertEqual(response.status, 200, "the TCP port serves again once the flood is gone")
        await victim.close()

    async def test_the_soft_limit_is_raised_to_the_hard_one(self) -> None:
        hard = min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        raised = Daemon(self.server.url, "", "")
        try:
            raised.start(["prlimit", f"--nofile={hard // 4}:{hard}"])
            deadline = time.monotonic() + 10
            while "GQLMUX_NOFILE" not in raised.log() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            self.assertIn(f"GQLMUX_NOFILE={hard}", raised.log())
        finally:
            raised.stop()

    async def test_an_accept_without_descriptors_waits_and_is_logged_then_serves_again(self) -> None:
        """Out of descriptors altogether (the limit lowered on the running process to what it
        holds): accept fails with EMFILE; gqlmuxd logs it, waits, and serves the clients waiting
        in the backlog once descriptors are free, without a new connection to wake it."""
        pid = self.daemon.process.pid
        held = LineClient("holder")
        await held.connect(self.daemon.socket)
        await asyncio.sleep(0.2)
        count = len(os.listdir(f"/proc/{pid}/fd"))
        subprocess.run(["prlimit", "--pid", str(pid), f"--nofile={count}:"], check=True)  # the soft limit only
        waiting = [await attack.open_connection(self.tcp) for _ in range(3)]
        self.addCleanup(lambda: [writer.close() for _, writer in waiting])
        for _, writer in waiting:
            writer.write(attack.build("POST", "/graphql", self.host, {"Content-Type": "application/json"},
                                      b'{"query":"{ hello }"}'))
        deadline = time.monotonic() + 10
        while "GQLMUX_EVENT=accept_failed" not in self.daemon.log() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.assertIn("Too many open files", self.daemon.log())
        subprocess.run(["prlimit", "--pid", str(pid), f"--nofile={count + 32}:"], check=True)  # room again
        answers = [await attack.read_response(reader, 10) for reader, _ in waiting]
        self.assertEqual([a.status for a in answers], [200, 200, 200], answers)
        for _, writer in waiting:
            writer.close()
        await held.close()


if __name__ == "__main__":
    unittest.main()
