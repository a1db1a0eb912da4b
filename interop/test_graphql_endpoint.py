"""gqlmuxd as a local GraphQL endpoint: clients no one here wrote (gql from PyPI over both
WebSocket subprotocols and over HTTP) and raw `websockets` conformance checks, against gqlmuxd
in front of strawberry.

Run by scripts/test.sh (with the interop virtualenv's Python, which has gql and websockets).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import unittest

import aiohttp
import websockets
from gql import Client, GraphQLRequest, gql
from gql.transport.aiohttp import AIOHTTPTransport
from gql.transport.exceptions import TransportQueryError
from gql.transport.websockets import WebsocketsTransport

from interop.harness import BIN, Daemon, Server, endpoint_daemon, outage

TICK = gql("subscription Tick($ms: Int!) { tick(intervalMs: $ms) }")


def ctl(daemon: Daemon, *args: str, timeout: float = 10) -> str:
    return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", daemon.socket],
                          capture_output=True, text=True, timeout=timeout, check=True).stdout


class EndpointTests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.server = Server("interop.strawberry_app:app", protocols="http")
        self.server.start()
        self.daemon = endpoint_daemon(self.server)
        self.daemon.start()
        addresses = json.loads(ctl(self.daemon, "status", "--json"))["graphqlEndpoint"].split()
        self.unix = next(a for a in addresses if a.startswith("/"))
        self.http = next(a for a in addresses if a.startswith("http://"))
        self.ws = self.http.replace("http://", "ws://")

    async def asyncTearDown(self) -> None:
        self.daemon.stop()
        self.server.stop()

    async def collect(self, session, document, variables, count: int) -> list:
        results = []
        async for result in session.subscribe(GraphQLRequest(document, variable_values=variables)):
            results.append(result)
            if len(results) == count:
                break
        return results

    # -- gql from PyPI -------------------------------------------------------------------

    async def test_gql_subscribes_over_graphql_transport_ws(self) -> None:
        transport = WebsocketsTransport(url=self.ws, subprotocols=[WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL])
        async with Client(transport=transport) as session:
            results = await asyncio.wait_for(self.collect(session, TICK, {"ms": 20}, 3), 15)
        self.assertEqual([r["tick"] for r in results], [1, 2, 3])

    async def test_gql_subscribes_over_legacy_graphql_ws(self) -> None:
        transport = WebsocketsTransport(url=self.ws, subprotocols=[WebsocketsTransport.APOLLO_SUBPROTOCOL])
        async with Client(transport=transport) as session:
            results = await asyncio.wait_for(self.collect(session, TICK, {"ms": 20}, 3), 15)
        self.assertEqual([r["tick"] for r in results], [1, 2, 3])

    async def test_gql_query_mutation_and_a_bad_document_over_http(self) -> None:
        async with Client(transport=AIOHTTPTransport(url=self.http)) as session:
            self.assertEqual(await session.execute(gql("{ hello }")), {"hello": "world"})
            first = (await session.execute(gql("mutation { increment }")))["increment"]
            second = (await session.execute(gql("mutation { increment }")))["increment"]
            self.assertEqual(second, first + 1, "a mutation runs exactly once")
        async with Client(transport=AIOHTTPTransport(url=self.http), fetch_schema_from_transport=False) as session:
            with self.assertRaises(TransportQueryError) as caught:
                await session.execute(gql("{ nosuchfield }"))
            self.assertIn("nosuchfield", str(caught.exception))

    async def test_gql_and_gqlmuxctl_share_one_upstream_subscription(self) -> None:
        query = "subscription { tick(intervalMs: 30) }"
        ctl_process = subprocess.Popen([os.path.join(BIN, "gqlmuxctl"), "subscribe", query, "--socket", self.daemon.socket],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            transport = WebsocketsTransport(url=self.ws)
            async with Client(transport=transport) as session:
                results = 0
                async for _ in session.subscribe(gql(query)):
                    results += 1
                    if results == 3:
                        break
                    # Still subscribed here: wait until gqlmuxctl has subscribed too.
                    status = json.loads(ctl(self.daemon, "status", "--json"))
                    if status["subscriptions"]["local"] < 2:
                        results -= 1
                self.assertEqual(status["subscriptions"]["local"], 2, status)
                self.assertEqual(status["subscriptions"]["upstream"], 1, status)
        finally:
            ctl_process.kill()
            output, _ = ctl_process.communicate()
        self.assertTrue(output.count('"tick"') >= 1, "gqlmuxctl got results too")

    async def test_a_gql_subscription_survives_a_server_kill(self) -> None:
        transport = WebsocketsTransport(url=self.ws)
        async with Client(transport=transport) as session:
            seen: list[int] = []

            async def read() -> None:
                async for result in session.subscribe(GraphQLRequest(TICK, variable_values={"ms": 50})):
                    seen.append(result["tick"])

            reader = asyncio.create_task(read())
            try:
                while len(seen) < 3:
                    await asyncio.sleep(0.02)
                await outage(self.server, "kill")
                killed_at = len(seen)
                deadline = time.monotonic() + 20

                def restarted() -> bool:  # the restarted server counts from 1 again
                    return any(seen[i] < seen[i - 1] for i in range(max(1, killed_at - 1), len(seen)))

                while not (restarted() and seen[-1] >= 3) and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                self.assertTrue(restarted() and seen[-1] >= 3, f"resumed after the restart: {seen}")
                self.assertFalse(reader.done(), "the subscription did not end")
            finally:
                reader.cancel()

    async def test_a_late_websocket_joiner_that_asks_gets_the_latest_result_marked_in_extensions(self) -> None:
        query = "subscription { tick(intervalMs: 2000) }"

        async def subscriber(subprotocol: str, extensions: dict | None):
            ws = await self.connect(subprotocol)
            await ws.send(json.dumps({"type": "connection_init"}))
            self.assertEqual(json.loads(await ws.recv())["type"], "connection_ack")
            payload = {"query": query} | ({"extensions": extensions} if extensions else {})
            verb = "subscribe" if subprotocol == "graphql-transport-ws" else "start"
            await ws.send(json.dumps({"type": verb, "id": "s", "payload": payload}))
            return ws

        async def next_result(ws, timeout: float) -> dict:
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                if message["type"] in ("next", "data"):
                    return message["payload"]

        first = await subscriber("graphql-transport-ws", {"gqlmux": {"replayLast": True}})
        self.assertEqual(await next_result(first, 10), {"data": {"tick": 1}})
        asking = await subscriber("graphql-transport-ws", {"gqlmux": {"replayLast": True}})
        started = time.monotonic()
        replay = await next_result(asking, 1.5)  # the server's next tick is 2 s away
        print(f"late WebSocket joiner with replayLast: first result after {1000 * (time.monotonic() - started):.0f} ms: {replay}")
        self.assertEqual(replay, {"data": {"tick": 1}, "extensions": {"gqlmux": {"replayed": True}}})
        legacy = await subscriber("graphql-ws", {"gqlmux": {"replayLast": True}})
        self.assertEqual((await next_result(legacy, 1.5))["extensions"], {"gqlmux": {"replayed": True}})
        plain = await subscriber("graphql-transport-ws", None)
        with self.assertRaises(asyncio.TimeoutError):
            await next_result(plain, 0.5)
        status = json.loads(ctl(self.daemon, "status", "--json"))
        self.assertEqual(status["subscriptions"], {"local": 4, "upstream": 1}, status)
        self.assertEqual(await next_result(plain, 5), {"data": {"tick": 2}}, "a subscriber that did not ask gets the next real result")
        for ws in (first, asking, legacy, plain):
            await ws.close()

    async def test_a_websocket_client_that_names_a_snapshot_gets_it_before_the_resumed_stream(self) -> None:
        ws = await self.connect()
        await ws.send(json.dumps({"type": "connection_init"}))
        self.assertEqual(json.loads(await ws.recv())["type"], "connection_ack")
        payload = {"query": "subscription { tick(intervalMs: 100) }", "extensions": {"gqlmux": {"resnapshot": "{ hello }"}}}
        await ws.send(json.dumps({"type": "subscribe", "id": "s", "payload": payload}))
        seen: list = []

        async def read_until(done) -> None:
            while not done():
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                self.assertEqual(message["type"], "next", message)
                seen.append(message["payload"])

        await read_until(lambda: len(seen) >= 2)
        await outage(self.server, "close")
        await read_until(lambda: any("hello" in r.get("data", {}) for r in seen) and "tick" in seen[-1].get("data", {}))
        at = next(i for i, r in enumerate(seen) if "hello" in r.get("data", {}))
        print(f"endpoint snapshot after an outage: {seen[at - 1]} … {seen[at]} … {seen[at + 1]}")
        self.assertEqual(seen[at], {"data": {"hello": "world"}, "extensions": {"gqlmux": {"snapshot": True}}})
        before = [r["data"]["tick"] for r in seen[:at]]
        self.assertEqual(before, list(range(1, len(before) + 1)), "no result of the resumed stream before the snapshot")
        self.assertEqual(seen[at + 1], {"data": {"tick": 1}}, "the resumed stream follows the snapshot")
        await ws.close()

    # -- raw WebSocket conformance (graphql-transport-ws, as a server) --------------------

    async def connect(self, subprotocol: str = "graphql-transport-ws"):
        return await websockets.connect(self.ws, subprotocols=[subprotocol])

    async def closed_with(self, ws, code: int) -> str:
        try:
            while True:
                await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed as closed:
            self.assertEqual(closed.rcvd.code if closed.rcvd else None, code, f"close {closed.rcvd}")
            return closed.rcvd.reason

    async def test_4408_without_connection_init(self) -> None:
        ws = await self.connect()
        self.assertEqual(await self.closed_with(ws, 4408), "Connection initialisation timeout")

    async def test_4429_on_a_second_connection_init(self) -> None:
        ws = await self.connect()
        await ws.send(json.dumps({"type": "connection_init", "payload": {"token": "ignored"}}))
        self.assertEqual(json.loads(await ws.recv())["type"], "connection_ack")
        await ws.send(json.dumps({"type": "connection_init"}))
        await self.closed_with(ws, 4429)

    async def test_4400_on_a_malformed_message(self) -> None:
        for bad in ["not json", json.dumps({"type": "subscribe", "id": "1"}), json.dumps({"type": "nonsense"}),
                    json.dumps({"type": "pause"})]:
            ws = await self.connect()
            await ws.send(json.dumps({"type": "connection_init"}))
            await ws.recv()
            await ws.send(bad)
            await self.closed_with(ws, 4400)

    async def test_4401_on_subscribe_before_the_ack(self) -> None:
        ws = await self.connect()
        await ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": "{ hello }"}}))
        await self.closed_with(ws, 4401)

    async def test_4409_on_a_duplicate_id(self) -> None:
        ws = await self.connect()
        await ws.send(json.dumps({"type": "connection_init"}))
        await ws.recv()
        subscribe = {"type": "subscribe", "id": "x", "payload": {"query": "subscription { tick(intervalMs: 100) }"}}
        await ws.send(json.dumps(subscribe))
        await ws.send(json.dumps(subscribe))
        self.assertEqual(await self.closed_with(ws, 4409), "Subscriber for x already exists")

    async def test_ping_pong_complete_both_ways_and_a_terminal_error(self) -> None:
        ws = await self.connect()
        await ws.send(json.dumps({"type": "connection_init"}))
        await ws.recv()
        await ws.send(json.dumps({"type": "ping", "payload": {"n": 1}}))
        self.assertEqual(json.loads(await ws.recv()), {"type": "pong", "payload": {"n": 1}})
        pong = await ws.ping(b"frame")
        await asyncio.wait_for(pong, 5)  # a WebSocket ping frame is answered
        await ws.send(json.dumps({"type": "subscribe", "id": "q", "payload": {"query": "{ hello }"}}))
        self.assertEqual(json.loads(await ws.recv()), {"type": "next", "id": "q", "payload": {"data": {"hello": "world"}}})
        self.assertEqual(json.loads(await ws.recv()), {"type": "complete", "id": "q"})
        await ws.send(json.dumps({"type": "subscribe", "id": "s", "payload": {"query": "subscription { tick(intervalMs: 20) }"}}))
        self.assertEqual(json.loads(await ws.recv())["type"], "next")
        await ws.send(json.dumps({"type": "complete", "id": "s"}))
        await ws.send(json.dumps({"type": "subscribe", "id": "bad", "payload": {"query": "subscription { nosuchfield }"}}))
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if message["id"] == "bad":
                break
        self.assertEqual(message["type"], "error", message)
        self.assertIsInstance(message["payload"], list)
        await ws.close()

    async def test_legacy_graphql_ws_messages(self) -> None:
        ws = await self.connect("graphql-ws")
        await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
        self.assertEqual(json.loads(await ws.recv()), {"type": "connection_ack"})
        self.assertEqual(json.loads(await ws.recv()), {"type": "ka"})
        await ws.send(json.dumps({"type": "start", "id": "1", "payload": {"query": "subscription { tick(intervalMs: 20) }"}}))
        message = json.loads(await ws.recv())
        self.assertEqual((message["type"], message["id"], message["payload"]), ("data", "1", {"data": {"tick": 1}}))
        await ws.send(json.dumps({"type": "stop", "id": "1"}))
        await ws.send(json.dumps({"type": "connection_terminate"}))
        await self.closed_with(ws, 1000)

    async def test_the_unix_socket_serves_websocket_and_http(self) -> None:
        async with websockets.unix_connect(self.unix, "ws://localhost/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            await ws.send(json.dumps({"type": "connection_init"}))
            await ws.recv()
            await ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": "{ hello }"}}))
            self.assertEqual(json.loads(await ws.recv())["payload"], {"data": {"hello": "world"}})
        connector = aiohttp.UnixConnector(path=self.unix)
        async with aiohttp.ClientSession(connector=connector) as http:
            async with http.post("http://localhost/graphql", json={"query": "{ hello }"}) as response:
                self.assertEqual(response.status, 200)
                self.assertEqual(await response.json(content_type=None), {"data": {"hello": "world"}})

    async def test_a_websocket_client_that_stops_reading_is_closed_with_1008_alone(self) -> None:
        """A client that stops reading its subscription fills its buffer and is closed with 1008
        and a reason naming the limit; a client beside it on the same subscription streams on."""
        self.daemon.stop()
        self.daemon = Daemon(self.server.url, 'connecting_payload = { token = "secret" }\n',
                             "[graphql_endpoint]\n[limits]\nclient_buffer_bytes = 8192\n")
        self.daemon.start()
        unix = json.loads(ctl(self.daemon, "status", "--json"))["graphqlEndpoint"].split()[0]
        query = {"query": "subscription { tick(intervalMs: 1) }"}
        async with websockets.unix_connect(unix, "ws://localhost/graphql", subprotocols=["graphql-transport-ws"],
                                           max_queue=4) as stalled, \
                websockets.unix_connect(unix, "ws://localhost/graphql", subprotocols=["graphql-transport-ws"]) as reader:
            for ws in (stalled, reader):
                await ws.send(json.dumps({"type": "connection_init"}))
                await ws.recv()
                await ws.send(json.dumps({"type": "subscribe", "id": "1", "payload": query}))
            started = time.monotonic()
            # `stalled` reads nothing more until gqlmuxd cuts it; `reader` reads on.
            while "fell behind" not in self.daemon.log() and time.monotonic() - started < 60:
                await asyncio.wait_for(reader.recv(), 10)
            cut = time.monotonic() - started
            # Once it reads again, it gets what was queued, then the close frame with its reason.
            with self.assertRaises(websockets.ConnectionClosed):
                while True:
                    await asyncio.wait_for(stalled.recv(), 10)
            self.assertEqual(stalled.close_code, 1008, f"closed with {stalled.close_code} {stalled.close_reason}")
            self.assertIn("client_buffer_bytes", stalled.close_reason)
            before = json.loads(await reader.recv())["payload"]["data"]["tick"]
            for _ in range(20):
                after = json.loads(await asyncio.wait_for(reader.recv(), 10))["payload"]["data"]["tick"]
            self.assertGreater(after, before, "the other client streams on")
            print(f"\nWebSocket slow consumer cut after {cut:.1f}s, closed 1008: {stalled.close_reason}", flush=True)

    async def test_a_peer_not_in_allowed_uids_is_refused_on_the_unix_socket(self) -> None:
        """SO_PEERCRED on the endpoint's Unix socket, as on the line socket: uid 65534 (not in
        allowed_uids) gets 403 FORBIDDEN over HTTP; root (always allowed) is served."""
        self.daemon.stop()
        self.daemon = Daemon(self.server.url, 'connecting_payload = { token = "secret" }\n',
                             '[graphql_endpoint]\nmode = "0666"\n[security]\nallowed_uids = [4242]\n')
        self.daemon.start()
        os.chmod(self.daemon.directory, 0o755)  # the socket's directory, so the other user reaches it
        unix = json.loads(ctl(self.daemon, "status", "--json"))["graphqlEndpoint"]
        client = (
            "import socket,sys\n"
            "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "b=b'{\"query\":\"{ hello }\"}'\n"
            "s.sendall(b'POST /graphql HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n' % len(b) + b)\n"
            "print(s.recv(65536).decode())\n"
        )
        refused = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", client, unix],
                                 capture_output=True, text=True, timeout=20)
        self.assertIn("HTTP/1.1 403", refused.stdout, refused.stdout + refused.stderr)
        self.assertIn("FORBIDDEN", refused.stdout)
        served = subprocess.run(["/usr/bin/python3", "-c", client, unix], capture_output=True, text=True, timeout=20)
        self.assertIn("HTTP/1.1 200", served.stdout, served.stdout + served.stderr)

    # -- HTTP streams ----------------------------------------------------------------------

    async def test_http_sse_and_multipart_subscriptions_and_a_get_query(self) -> None:
        async with aiohttp.ClientSession() as http:
            async with http.get(self.http, params={"query": "{ hello }"}) as response:  # Accept: */*
                self.assertEqual(response.status, 200)
                self.assertEqual(response.headers["Content-Type"], "application/json; charset=utf-8")
                self.assertEqual(await response.json(content_type=None), {"data": {"hello": "world"}})
            body = {"query": "subscription { tick(intervalMs: 20) }"}
            async with http.post(self.http, json=body, headers={"Accept": "text/event-stream"}) as response:
                self.assertEqual(response.headers["Content-Type"], "text/event-stream")
                text = b""
                while text.count(b"event: next") < 3:
                    text += await asyncio.wait_for(response.content.readany(), 10)
                self.assertIn(b'event: next\ndata: {"data":{"tick":1}}\n\n', text)
            async with http.post(self.http, json=body, headers={"Accept": "multipart/mixed;subscriptionSpec=1.0"}) as response:
                self.assertTrue(response.headers["Content-Type"].startswith("multipart/mixed"))
                text = b""
                while text.count(b'{"payload":') < 3:
                    text += await asyncio.wait_for(response.content.readany(), 10)
                self.assertIn(b'{"payload":{"data":{"tick":1}}}', text)
            async with http.post(self.http, json=body) as response:
                self.assertEqual(response.status, 406, "a subscription without a stream Accept")


if __name__ == "__main__":
    unittest.main()
