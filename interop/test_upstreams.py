"""Several upstreams, each with its own identity: two real servers at once (strawberry and
ariadne) with one killed, clients choosing by name on the line protocol and the endpoint, a
reload that adds and removes upstreams under load, and identities (`client`: each app's own
token; `peer`: the local uid picks the credentials) against a server that tells each caller who
it is. The real gqlmuxd and gqlmuxctl.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from interop.harness import BIN, Daemon, LineClient, Server, wait_for

TICK = "subscription Tick($ms: Int!) { tick(intervalMs: $ms) }"
ME = "subscription { me(intervalMs: 50) }"


def ctl(daemon: Daemon, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", daemon.socket, "--json"],
                          capture_output=True, text=True, timeout=timeout)


def status(daemon: Daemon) -> dict:
    return json.loads(ctl(daemon, "status").stdout)


def nexts(client: LineClient, id: str, since: float = 0.0) -> list:
    return [m["payload"]["data"] for t, m in client.lines if t >= since and m.get("id") == id and m.get("type") == "next"]


def states(client: LineClient, id: str, since: float = 0.0) -> list:
    return [m["state"] for t, m in client.lines if t >= since and m.get("id") == id and m.get("type") == "state"]


def ends(client: LineClient, id: str) -> list:
    return [m for _, m in client.lines if m.get("id") == id and m.get("type") in ("error", "complete")]


def subscribe(client: LineClient, id: str, query: str, variables=None, upstream=None) -> None:
    message = {"type": "subscribe", "id": id, "payload": {"query": query, "variables": variables or {}}}
    if upstream is not None:
        message["upstream"] = upstream
    client.send(message)


def http(port_or_unix, method: str, target: str, body: bytes = b"", headers=None) -> tuple:
    """One HTTP/1.1 request over TCP or a Unix socket; (status, body)."""
    import http.client
    import socket as sock

    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = sock.socket(sock.AF_UNIX)
            self.sock.connect(port_or_unix)

    connection = (UnixConnection("localhost", timeout=10) if isinstance(port_or_unix, str)
                  else http.client.HTTPConnection("127.0.0.1", port_or_unix, timeout=10))
    connection.request(method, target, body, {"Host": "localhost", "Content-Type": "application/json", **(headers or {})})
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    return answer.status, data


class TwoServersTests(unittest.IsolatedAsyncioTestCase):
    """strawberry is `default`, ariadne is `second`: killing strawberry changes nothing for
    ariadne's subscribers."""

    async def asyncSetUp(self) -> None:
        self.strawberry = Server("interop.strawberry_app:app", "modern")
        self.ariadne = Server("interop.ariadne_app:app", "modern")
        self.strawberry.start()
        self.ariadne.start()
        self.daemon = Daemon(self.strawberry.url,
                             'connecting_payload = { token = "secret" }\nreconnect_interval = 0.05\nreconnect_max_interval = 0.5\n',
                             f'[upstreams.second]\nurl = "{self.ariadne.url}"\nprotocol = "graphql-transport-ws"\n'
                             'reconnect_interval = 0.05\n'
                             '[graphql_endpoint]\nlisten = "127.0.0.1:0"\n')
        self.daemon.start()
        self.clients: list = []

    async def asyncTearDown(self) -> None:
        for client in self.clients:
            await client.close()
        self.daemon.stop()
        self.strawberry.stop()
        self.ariadne.stop()

    async def test_killing_one_server_changes_nothing_for_the_other(self) -> None:
        clients = [LineClient(f"c{i}") for i in range(6)]
        self.clients = clients
        for i, client in enumerate(clients):
            await client.connect(self.daemon.socket)
            # Half on each server; every client's two subscriptions are distinct operations.
            upstream = None if i % 2 == 0 else "second"
            for j in range(2):
                subscribe(client, f"s{j}", TICK, {"ms": 40 + i * 2 + j}, upstream)
        # The endpoint's WebSocket at /graphql/second reads ariadne too.
        import websockets
        endpoint = self.daemon.socket.replace("gqlmux.sock", "graphql.sock")
        ws_messages: list = []

        async def read_ws() -> None:
            async with websockets.unix_connect(endpoint, "ws://localhost/graphql/second", subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                await ws.send(json.dumps({"type": "subscribe", "id": "w", "payload": {"query": TICK, "variables": {"ms": 45}}}))
                async for text in ws:
                    ws_messages.append((time.monotonic(), json.loads(text)))

        ws_task = asyncio.create_task(read_ws())
        try:
            await wait_for(lambda: all(len(nexts(c, f"s{j}")) >= 3 for c in clients for j in range(2)), 20, "every subscription streams")
            await wait_for(lambda: sum(1 for _, m in ws_messages if m.get("type") == "next") >= 3, 20, "the endpoint client at /graphql/second streams")
            info = status(self.daemon)
            self.assertEqual(set(info["upstreams"]), {"default", "second"})
            self.assertEqual(info["upstreams"]["second"]["url"], self.ariadne.url)
            self.assertEqual(info["upstreams"]["second"]["subscriptions"]["upstream"], 7)
            self.assertEqual(info["upstreams"]["default"]["subscriptions"]["upstream"], 6)
            self.assertEqual(info["upstream"]["url"], self.strawberry.url)

            killed = time.monotonic()
            self.strawberry.kill()
            await wait_for(lambda: all("reconnecting" in states(c, f"s{j}", killed) for c in clients[0::2] for j in range(2)),
                           10, "strawberry's subscribers are told reconnecting")
            await asyncio.sleep(2.0)
            window = time.monotonic() - killed
            # ariadne's subscribers: results all the while, no state change, no error.
            for client in clients[1::2]:
                for j in range(2):
                    got = nexts(client, f"s{j}", killed)
                    self.assertGreaterEqual(len(got), int(window * 1000 / 60) // 2, f"{client.name}/s{j} kept streaming")
                    self.assertEqual(states(client, f"s{j}", killed), [], f"{client.name}/s{j} saw no state change")
                    self.assertEqual(ends(client, f"s{j}"), [])
            self.assertGreaterEqual(sum(1 for t, m in ws_messages if t >= killed and m.get("type") == "next"), 10)
            # strawberry's: nothing while it is down.
            info = status(self.daemon)
            self.assertEqual(info["upstreams"]["second"]["state"], "connected")
            self.assertNotEqual(info["upstreams"]["default"]["state"], "connected")
            samples = [json.loads(line) for line in ctl(self.daemon, "metrics").stdout.splitlines()]
            connected = {s["labels"]["upstream"]: s["value"] for s in samples
                         if s["name"] == "gqlmux_upstream_connections" and s["labels"]["state"] == "connected"}
            self.assertEqual(connected, {"default": 0, "second": 1})
            self.assertIn("GQLMUX_UPSTREAM=default", self.daemon.log().replace('"', ""))

            back = time.monotonic()
            self.strawberry.start()
            await wait_for(lambda: all(len(nexts(c, f"s{j}", back)) >= 2 for c in clients[0::2] for j in range(2)),
                           20, "strawberry's subscribers resume")
            self.assertEqual([ends(c, f"s{j}") for c in clients for j in range(2)], [[]] * 12)
            print(f"\n  two servers: strawberry killed for {window + (time.monotonic() - back):.1f} s; ariadne's 6 line "
                  f"subscriptions got {sum(len(nexts(c, f's{j}', killed)) for c in clients[1::2] for j in range(2))} results "
                  "meanwhile, no state change, no error; strawberry's 6 were told reconnecting and resumed", file=sys.stderr)
        finally:
            ws_task.cancel()

    async def test_pausing_one_upstream_holds_only_its_subscribers(self) -> None:
        client = LineClient("c")
        self.clients = [client]
        await client.connect(self.daemon.socket)
        subscribe(client, "d", TICK, {"ms": 40})
        subscribe(client, "s", TICK, {"ms": 40}, "second")
        await wait_for(lambda: len(nexts(client, "d")) >= 2 and len(nexts(client, "s")) >= 2, 20, "both stream")
        paused = time.monotonic()
        out = ctl(self.daemon, "pause", "--upstream", "second")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        await wait_for(lambda: "paused" in states(client, "s", paused), 10, "second's subscriber is told paused")
        await asyncio.sleep(1.0)
        self.assertEqual(states(client, "d", paused), [])
        self.assertGreaterEqual(len(nexts(client, "d", paused)), 10)
        self.assertEqual(status(self.daemon)["upstreams"]["second"]["state"], "paused")
        self.assertEqual(status(self.daemon)["upstreams"]["default"]["state"], "connected")
        resumed = time.monotonic()
        self.assertEqual(ctl(self.daemon, "resume", "--upstream", "second").returncode, 0)
        await wait_for(lambda: len(nexts(client, "s", resumed)) >= 2, 10, "second streams again")
        out = ctl(self.daemon, "pause", "--upstream", "nope")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("UNKNOWN_UPSTREAM", out.stdout + out.stderr)

    async def test_an_unknown_upstream_is_an_error_for_that_operation_only(self) -> None:
        client = LineClient("c")
        self.clients = [client]
        await client.connect(self.daemon.socket)
        subscribe(client, "good", TICK, {"ms": 50}, "second")
        subscribe(client, "bad", TICK, {"ms": 50}, "nope")
        client.send({"type": "subscribe", "id": "typed", "upstream": 7, "payload": {"query": TICK, "variables": {"ms": 50}}})
        await wait_for(lambda: len(nexts(client, "good")) >= 3 and ends(client, "bad") and ends(client, "typed"), 20,
                       "the good one streams and the bad ones end")
        self.assertEqual(ends(client, "bad")[0]["payload"][0]["extensions"]["code"], "UNKNOWN_UPSTREAM")
        self.assertIn("nope", ends(client, "bad")[0]["payload"][0]["message"])
        self.assertEqual(ends(client, "typed")[0]["payload"][0]["extensions"]["code"], "BAD_REQUEST")
        self.assertEqual(ends(client, "good"), [])
        endpoint = self.daemon.socket.replace("gqlmux.sock", "graphql.sock")
        code, body = await asyncio.to_thread(http, endpoint, "POST", "/graphql/nope", b'{"query":"{ hello }"}')
        self.assertEqual(code, 404)
        self.assertIn(b"UNKNOWN_UPSTREAM", body)
        code, body = await asyncio.to_thread(http, endpoint, "POST", "/graphql/second", b'{"query":"{ hello }"}')
        self.assertEqual(code, 200, body)
        self.assertIn(b"hello", body)
        import websockets
        with self.assertRaises(Exception) as refused:
            async with websockets.unix_connect(endpoint, "ws://localhost/graphql/nope", subprotocols=["graphql-transport-ws"]):
                pass
        self.assertIn("404", str(refused.exception))
        # gqlmuxctl --upstream, and its status naming each upstream
        human = subprocess.run([os.path.join(BIN, "gqlmuxctl"), "status", "--socket", self.daemon.socket],
                               capture_output=True, text=True, timeout=20).stdout
        self.assertIn(f"upstream second: {self.ariadne.url} — connected", human)
        out = ctl(self.daemon, "subscribe", TICK, "--variables", '{"ms": 30}', "--count", "2", "--upstream", "second")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(len([line for line in out.stdout.splitlines() if '"tick"' in line]), 2)
        out = ctl(self.daemon, "query", "{ hello }", "--upstream", "second")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("hello", out.stdout)
        out = ctl(self.daemon, "query", "{ hello }", "--upstream", "nope")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("UNKNOWN_UPSTREAM", out.stdout + out.stderr)


class ReloadTests(unittest.IsolatedAsyncioTestCase):
    async def test_a_reload_adds_and_removes_upstreams_under_load(self) -> None:
        strawberry = Server("interop.strawberry_app:app", "modern")
        ariadne = Server("interop.ariadne_app:app", "modern")
        strawberry.start()
        ariadne.start()
        base = 'connecting_payload = { token = "secret" }\nreconnect_interval = 0.05\n'
        daemon = Daemon(strawberry.url, base, f'[upstreams.old]\nurl = "{ariadne.url}"\nprotocol = "graphql-transport-ws"\n')
        daemon.start()
        clients = [LineClient(f"c{i}") for i in range(4)]
        try:
            for i, client in enumerate(clients):
                await client.connect(daemon.socket)
                for j in range(5):
                    subscribe(client, f"d{j}", TICK, {"ms": 30 + i * 5 + j})
                    subscribe(client, f"o{j}", TICK, {"ms": 30 + i * 5 + j}, "old")
            await wait_for(lambda: all(len(nexts(c, f"{k}{j}")) >= 2 for c in clients for k in "do" for j in range(5)), 20,
                           "40 subscriptions stream")
            with open(daemon.config, "w") as f:
                f.write(f'[upstream]\nurl = "{strawberry.url}"\n{base}\n[upstreams.new]\nurl = "{ariadne.url}"\n'
                        f'protocol = "graphql-transport-ws"\n[socket]\npath = "{daemon.socket}"\n[log]\ntarget = "stderr"\n')
            reloaded = time.monotonic()
            out = ctl(daemon, "reload")
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            await wait_for(lambda: all(ends(c, f"o{j}") for c in clients for j in range(5)), 10, "old's subscriptions end")
            for client in clients:
                for j in range(5):
                    self.assertEqual(ends(client, f"o{j}")[0]["payload"][0]["extensions"]["code"], "UNKNOWN_UPSTREAM")
            await asyncio.sleep(1.0)
            for client in clients:
                for j in range(5):
                    self.assertEqual(ends(client, f"d{j}"), [])
                    self.assertEqual(states(client, f"d{j}", reloaded), [], "default's subscriptions were not touched")
                    self.assertGreaterEqual(len(nexts(client, f"d{j}", reloaded)), 10)
            subscribe(clients[0], "n", TICK, {"ms": 40}, "new")
            subscribe(clients[0], "o-again", TICK, {"ms": 40}, "old")
            await wait_for(lambda: len(nexts(clients[0], "n")) >= 3 and ends(clients[0], "o-again"), 20, "new serves, old is gone")
            self.assertEqual(ends(clients[0], "o-again")[0]["payload"][0]["extensions"]["code"], "UNKNOWN_UPSTREAM")
            info = status(daemon)
            self.assertEqual(set(info["upstreams"]), {"default", "new"})
            # A bad table changes nothing.
            with open(daemon.config, "a") as f:
                f.write('[upstreams."Bad Name"]\nurl = "ws://127.0.0.1:1/graphql"\n')
            out = ctl(daemon, "reload")
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("upstreams.Bad Name", out.stdout + out.stderr)
            self.assertEqual(set(status(daemon)["upstreams"]), {"default", "new"})
            print(f"\n  reload under load: 20 subscriptions of the removed upstream ended UNKNOWN_UPSTREAM; the 20 of "
                  f"default streamed on untouched; the added upstream served at once", file=sys.stderr)
        finally:
            for client in clients:
                await client.close()
            daemon.stop()
            strawberry.stop()
            ariadne.stop()


class IdentityTests(unittest.IsolatedAsyncioTestCase):
    """identity = "client" and "peer" against a server that tells each caller who it is."""

    async def asyncSetUp(self) -> None:
        self.server = Server("interop.identity_app:app", "modern")
        self.server.start()
        self.daemon = None
        self.clients: list = []

    async def asyncTearDown(self) -> None:
        for client in self.clients:
            await client.close()
        if self.daemon is not None:
            self.daemon.stop()
        self.server.stop()

    def identity_stats(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.server.port}/control/identity", timeout=10) as answer:
            return json.loads(answer.read())

    async def test_client_identity_each_app_sees_only_its_own_and_equal_tokens_dedup(self) -> None:
        self.daemon = Daemon(self.server.url, 'connecting_payload = { token = "host" }\n',
                             f'[upstreams.who]\nurl = "{self.server.url}"\nhttp_url = "{self.server.http_url}"\n'
                             'identity = "client"\nlazy_close_timeout = 0.5\n'
                             '[limits]\nmax_identities = 3\n')
        self.daemon.start()
        tokens = ["alice", "alice", "bob", "bob"]
        clients = [LineClient(f"{t}{i}") for i, t in enumerate(tokens)]
        self.clients = clients
        for client, token in zip(clients, tokens):
            await client.connect(self.daemon.socket)
            client.send({"type": "connection_init", "payload": {"upstream": {"payload": {"token": token}}}})
            subscribe(client, "me", ME, upstream="who")
        host = LineClient("host")
        self.clients.append(host)
        await host.connect(self.daemon.socket)
        subscribe(host, "me", ME)  # the default upstream: the host's credentials
        await wait_for(lambda: all(len(nexts(c, "me")) >= 5 for c in clients + [host]), 20, "every client streams")
        for client, token in zip(clients, tokens):
            seen = {d["me"].split(":")[0] for d in nexts(client, "me")}
            self.assertEqual(seen, {token}, f"{client.name} saw only its own identity")
        self.assertEqual({d["me"].split(":")[0] for d in nexts(host, "me")}, {"host"})
        stats = self.identity_stats()
        self.assertEqual(stats["alice"]["started"], 1, "two alice clients share one upstream subscription")
        self.assertEqual(stats["bob"]["started"], 1)
        self.assertEqual(stats["alice"]["connections"], 1)
        self.assertEqual(stats["bob"]["connections"], 1)

        # The endpoint: a WebSocket client's connection_init payload, an HTTP request's Authorization.
        import websockets
        endpoint = self.daemon.socket.replace("gqlmux.sock", "graphql.sock")
        code, body = await asyncio.to_thread(http, endpoint, "POST", "/graphql/who", b'{"query":"{ me }"}',
                                             {"Authorization": "Bearer erin"})
        self.assertEqual((code, json.loads(body)), (200, {"data": {"me": "erin"}}))
        # erin's connection closed with her request: her identity goes after lazy_close_timeout.
        await wait_for(lambda: len(status(self.daemon)["upstreams"]["who"]["identities"]) == 2, 10, "erin's identity closes")
        async with websockets.unix_connect(endpoint, "ws://localhost/graphql/who", subprotocols=["graphql-transport-ws"]) as ws:
            await ws.send(json.dumps({"type": "connection_init", "payload": {"token": "carol"}}))
            await ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": ME}}))
            seen = []
            while len(seen) < 3:
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if message["type"] == "next":
                    seen.append(message["payload"]["data"]["me"].split(":")[0])
            self.assertEqual(set(seen), {"carol"})
            # A fourth identity is over max_identities = 3.
            dave = LineClient("dave")
            self.clients.append(dave)
            await dave.connect(self.daemon.socket)
            dave.send({"type": "connection_init", "payload": {"upstream": {"payload": {"token": "dave"}}}})
            subscribe(dave, "me", ME, upstream="who")
            await wait_for(lambda: ends(dave, "me"), 10, "dave is refused")
            self.assertEqual(ends(dave, "me")[0]["payload"][0]["extensions"]["code"], "LIMIT_EXCEEDED")
            info = status(self.daemon)["upstreams"]["who"]
            self.assertEqual(info["identity"], "client")
            self.assertEqual(len(info["identities"]), 3)
            self.assertNotIn("alice", json.dumps(status(self.daemon)))
        # The last alice leaves: alice's connection closes after lazy_close_timeout.
        await clients[0].close()
        await clients[1].close()
        await wait_for(lambda: self.identity_stats()["alice"]["running"] == 0, 10, "alice's subscription ends upstream")
        await wait_for(lambda: len(status(self.daemon)["upstreams"]["who"]["identities"]) <= 3 and all(
            i["connections"] >= 0 for i in status(self.daemon)["upstreams"]["who"]["identities"]), 10, "status")
        self.assertEqual(self.identity_stats()["bob"]["running"], 1, "bob's goes on")
        self.assertNotIn("alice", self.daemon.log())
        self.assertNotIn("carol", self.daemon.log())
        print("\n  identity client: alice×2 and bob×2 each saw only their own name; 1 upstream subscription each "
              "(dedup within an identity); carol over the endpoint WebSocket, erin over HTTP; dave refused past "
              "max_identities = 3; alice's connection closed after her last client left", file=sys.stderr)

    @unittest.skipUnless(os.geteuid() == 0 or os.environ.get("GQLMUX_REQUIRE_ALL") == "1", "needs root to act as two local users")
    async def test_peer_identity_the_local_uid_picks_the_credentials(self) -> None:
        directory = tempfile.mkdtemp(prefix="gqlmux-peers-")
        os.chmod(directory, 0o755)
        for name in ("alice", "bob"):
            with open(os.path.join(directory, f"{name}.json"), "w") as f:
                json.dump({"token": name}, f)
        self.daemon = Daemon(self.server.url, 'connecting_payload = { token = "host" }\n',
                             f'[upstreams.who]\nurl = "{self.server.url}"\nidentity = "peer"\n'
                             f'[upstreams.who.peers]\n"uid:0" = "{directory}/alice.json"\n"uid:1001" = "{directory}/bob.json"\n'
                             '[graphql_endpoint]\nlisten = "127.0.0.1:0"\nallow_all_local_users = true\n')
        with open(self.daemon.config) as f:
            text = f.read()
        with open(self.daemon.config, "w") as f:
            f.write(text.replace(f'path = "{self.daemon.socket}"\n', f'path = "{self.daemon.socket}"\nmode = "0666"\n'))
        os.chmod(self.daemon.directory, 0o755)
        self.daemon.start()
        script = (
            "import json, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rwb')\n"
            "f.write(json.dumps({'type': 'subscribe', 'id': 'me', 'upstream': 'who', 'payload': {'query': sys.argv[2]}}).encode() + b'\\n'); f.flush()\n"
            "seen = []\n"
            "while len(seen) < 3:\n"
            "    m = json.loads(f.readline())\n"
            "    if m['type'] == 'next': seen.append(m['payload']['data']['me'].split(':')[0])\n"
            "    if m['type'] in ('error', 'complete'): print(json.dumps(m)); sys.exit(0)\n"
            "print(json.dumps(sorted(set(seen))))\n"
        )
        results = {}
        for uid in (0, 1001, 1002):
            # The system's Python: the test's own may sit where another user cannot read.
            out = await asyncio.to_thread(subprocess.run, ["/usr/bin/python3", "-c", script, self.daemon.socket, ME],
                                          capture_output=True, text=True, timeout=30, user=uid, group=uid, cwd="/")
            self.assertEqual(out.returncode, 0, out.stderr)
            results[uid] = json.loads(out.stdout)
        self.assertEqual(results[0], ["alice"])
        self.assertEqual(results[1001], ["bob"])
        self.assertEqual(results[1002]["payload"][0]["extensions"]["code"], "FORBIDDEN")
        # A TCP client has no uid: refused.
        port = int(status(self.daemon)["graphqlEndpoint"].split(":")[-1].split("/")[0])
        code, body = await asyncio.to_thread(http, port, "POST", "/graphql/who", b'{"query":"{ me }"}')
        self.assertEqual(code, 403, body)
        print("\n  identity peer: uid 0 streamed as alice, uid 1001 as bob, uid 1002 and a TCP client FORBIDDEN", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()


class ClientLibraryIdentityTests(unittest.IsolatedAsyncioTestCase):
    """The Python client presents its app's own credentials and names the upstream."""

    async def test_the_python_client_presents_its_own_credentials(self) -> None:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "clients", "python"))
        import gqlmux
        server = Server("interop.identity_app:app", "modern")
        server.start()
        daemon = Daemon(server.url, 'connecting_payload = { token = "host" }\n',
                        f'[upstreams.who]\nurl = "{server.url}"\nhttp_url = "{server.http_url}"\nidentity = "client"\n')
        daemon.start()
        try:
            async with gqlmux.Client(daemon.socket, upstream_payload={"token": "zoe"},
                                     upstream_headers={"Authorization": "Bearer zoe"}) as client:
                seen = []
                async for result in client.subscribe(ME, upstream="who"):
                    seen.append(result["data"]["me"].split(":")[0])
                    if len(seen) == 3:
                        break
                self.assertEqual(set(seen), {"zoe"})
                self.assertEqual(await client.query("{ me }", upstream="who"), {"data": {"me": "zoe"}})
                async for result in client.subscribe(ME):
                    self.assertEqual(result["data"]["me"].split(":")[0], "host", "the default upstream keeps the host's")
                    break
                with self.assertRaises(gqlmux.GQLMuxError) as refused:
                    await client.query("{ me }", upstream="nope")
                self.assertEqual(refused.exception.code, "UNKNOWN_UPSTREAM")
        finally:
            daemon.stop()
            server.stop()


class CtlIdentityTests(unittest.IsolatedAsyncioTestCase):
    """gqlmuxctl presents an identity's credentials as an app would: --payload-file for the
    connecting payload (subscriptions), --header for the forwarded headers (queries over HTTP)."""

    async def test_gqlmuxctl_speaks_for_an_identity(self) -> None:
        server = Server("interop.identity_app:app", "modern")
        server.start()
        daemon = Daemon(server.url, 'connecting_payload = { token = "host" }\n',
                        f'[upstreams.who]\nurl = "{server.url}"\nhttp_url = "{server.http_url}"\nidentity = "client"\n')
        daemon.start()
        try:
            with tempfile.NamedTemporaryFile("w", suffix=".json") as payload:
                json.dump({"token": "yan"}, payload)
                payload.flush()
                sub = ctl(daemon, "subscribe", ME, "--upstream", "who", "--payload-file", payload.name, "--count", "2")
                self.assertEqual(sub.returncode, 0, sub.stderr)
                self.assertEqual([json.loads(line)["data"]["me"].split(":")[0] for line in sub.stdout.splitlines()], ["yan", "yan"])
                # --json: the state changes are JSON lines on stderr, not lost.
                self.assertIn('{"state":"active"}', sub.stderr.splitlines(), sub.stderr)
                query = ctl(daemon, "query", "{ me }", "--upstream", "who", "--header", "Authorization: Bearer yan")
                self.assertEqual(query.returncode, 0, query.stderr)
                self.assertEqual(json.loads(query.stdout), {"data": {"me": "yan"}})
                # Another identity is another caller; the default (host) upstream never sees either.
                other = ctl(daemon, "query", "{ me }", "--upstream", "who", "--header", "authorization: Bearer zed")
                self.assertEqual(json.loads(other.stdout), {"data": {"me": "zed"}})
                host = ctl(daemon, "subscribe", ME, "--payload-file", payload.name, "--count", "1")
                self.assertEqual(json.loads(host.stdout)["data"]["me"].split(":")[0], "host")
                # Bad credentials are usage errors (exit 64) that name the flag, and send nothing.
                with tempfile.NamedTemporaryFile("w", suffix=".json") as array:
                    array.write("[1]")
                    array.flush()
                    bad = ctl(daemon, "query", "{ me }", "--upstream", "who", "--payload-file", array.name)
                    self.assertEqual(bad.returncode, 64, bad.stderr)
                    self.assertIn("--payload-file", bad.stderr)
                for header in ("Authorization Bearer yan", "X-A: 1\r\nX-B: 2"):
                    bad = ctl(daemon, "query", "{ me }", "--upstream", "who", "--header", header)
                    self.assertEqual(bad.returncode, 64, bad.stderr)
                    self.assertIn("--header", bad.stderr)
                    self.assertNotIn("yan", bad.stderr, "a usage error repeated the header's value")
                # --header-file: the same headers from a file, off the command line.
                with tempfile.NamedTemporaryFile("w") as headers:
                    headers.write("Authorization: Bearer vic\n\nX-Other: 1\n")
                    headers.flush()
                    filed = ctl(daemon, "query", "{ me }", "--upstream", "who", "--header-file", headers.name)
                    self.assertEqual(json.loads(filed.stdout), {"data": {"me": "vic"}}, filed.stderr)
                missing = ctl(daemon, "query", "{ me }", "--upstream", "who", "--payload-file", "/nonexistent/token.json")
                self.assertEqual(missing.returncode, 64, missing.stderr)
                self.assertIn("No such file", missing.stderr)
        finally:
            daemon.stop()
            server.stop()


class RestartTests(unittest.IsolatedAsyncioTestCase):
    """An online restart carries every upstream's clients, each with its own identity."""

    async def test_every_upstream_and_identity_is_carried_over_a_restart(self) -> None:
        from interop.fdstore import FDStore
        import signal
        import websockets
        server = Server("interop.identity_app:app", "modern")
        server.start()
        daemon = Daemon(server.url, 'connecting_payload = { token = "host" }\n',
                        f'[upstreams.who]\nurl = "{server.url}"\nidentity = "client"\n')
        store = FDStore(daemon.directory)
        daemon.start(store=store)
        endpoint = os.path.join(daemon.directory, "graphql.sock")
        line = LineClient("alice")
        seen: dict = {"ws": [], "sse": []}
        tasks = []
        try:
            await line.connect(daemon.socket)
            line.send({"type": "connection_init", "payload": {"upstream": {"payload": {"token": "alice"}}}})
            subscribe(line, "who", ME, upstream="who")
            subscribe(line, "host", ME)

            async def ws_client() -> None:
                async with websockets.unix_connect(endpoint, "ws://localhost/graphql/who", subprotocols=["graphql-transport-ws"]) as ws:
                    await ws.send(json.dumps({"type": "connection_init", "payload": {"token": "carol"}}))
                    await ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": ME}}))
                    async for text in ws:
                        message = json.loads(text)
                        if message["type"] == "next":
                            seen["ws"].append((time.monotonic(), message["payload"]["data"]["me"]))

            async def sse_client() -> None:
                reader, writer = await asyncio.open_unix_connection(endpoint)
                body = json.dumps({"query": ME}).encode()
                writer.write(b"POST /graphql/who HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                             b"Accept: text/event-stream\r\nAuthorization: Bearer dave\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
                buffer = b""
                while True:
                    chunk = await reader.read(65536)
                    if not chunk:
                        return
                    buffer += chunk
                    while b'"me":"' in buffer:
                        _, _, rest = buffer.partition(b'"me":"')
                        value, _, buffer = rest.partition(b'"')
                        seen["sse"].append((time.monotonic(), value.decode()))

            tasks = [asyncio.create_task(ws_client()), asyncio.create_task(sse_client())]
            await wait_for(lambda: len(nexts(line, "who")) >= 3 and len(nexts(line, "host")) >= 3 and len(seen["ws"]) >= 3
                           and len(seen["sse"]) >= 3, 20, "every client streams")
            daemon.process.send_signal(signal.SIGTERM)
            self.assertEqual(daemon.process.wait(20), 0, daemon.log()[-3000:])
            restarted = time.monotonic()
            daemon.start(store=store)
            await wait_for(lambda: len(nexts(line, "who", restarted)) >= 3 and len(nexts(line, "host", restarted)) >= 3
                           and len([v for t, v in seen["ws"] if t >= restarted]) >= 3
                           and len([v for t, v in seen["sse"] if t >= restarted]) >= 3, 20, "every client streams again")
            self.assertEqual({d["me"].split(":")[0] for d in nexts(line, "who")}, {"alice"})
            self.assertEqual({d["me"].split(":")[0] for d in nexts(line, "host")}, {"host"})
            self.assertEqual({v.split(":")[0] for _, v in seen["ws"]}, {"carol"})
            self.assertEqual({v.split(":")[0] for _, v in seen["sse"]}, {"dave"})
            self.assertEqual(ends(line, "who") + ends(line, "host"), [])
            self.assertTrue(all(not t.done() for t in tasks), "the endpoint clients stayed connected")
            self.assertNotIn("alice", daemon.log())
            print("\n  restart: alice (line, identity client), host (line, default), carol (WebSocket /graphql/who) and "
                  "dave (SSE /graphql/who) each streamed only their own identity before and after", file=sys.stderr)
        finally:
            for task in tasks:
                task.cancel()
            await line.close()
            daemon.stop()
            store.close()
            server.stop()
