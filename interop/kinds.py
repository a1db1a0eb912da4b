"""One client of each kind gqlmuxd serves, each recording what it heard and how it ended, for
the restart and stop tests: the line protocol (raw), the gql library over both WebSocket
subprotocols with its own liveness checks on (graphql-ws: `ka` within `keep_alive_timeout`,
as subscriptions-transport-ws's SubscriptionClient checks it, 30 s by default; graphql-transport-ws:
a `ping` answered within `pong_timeout`), and SSE and multipart streams read raw (the bytes
exactly), each closed by the reader when no byte comes for longer than its heartbeat allows.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import List, Optional

from gql import Client, GraphQLRequest, gql
from gql.transport.websockets import WebsocketsTransport

from interop.harness import wait_for  # noqa: F401 (the tests take it from here with the kinds)

TICK = "subscription Tick($ms: Int!) { tick(intervalMs: $ms) }"


class Kind:
    """What every client records: results, the time of the last one, and its end (None while
    it is open)."""

    name = "?"

    def __init__(self) -> None:
        self.results = 0
        self.last_result = 0.0
        self.ended: Optional[str] = None
        self.task: Optional[asyncio.Task] = None

    def result(self) -> None:
        self.results += 1
        self.last_result = time.monotonic()

    def end(self, why: str) -> None:
        if self.ended is None:
            self.ended = why

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Cancels the client and waits for it, 10 s at most (a library's close that hangs on a
        dead peer must not hang the test)."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=10)


class GQLClient(Kind):
    """The gql library's WebsocketsTransport, over the endpoint's Unix socket or TCP port."""

    def __init__(self, subprotocol: str, url: str, unix: Optional[str] = None, interval_ms: int = 1000,
                 keep_alive_timeout: Optional[float] = None, ping_interval: Optional[float] = None) -> None:
        super().__init__()
        self.name = f"gql {subprotocol}" + (" (unix)" if unix else " (tcp)")
        connect_args = {"unix": True, "path": unix} if unix else {}
        self.transport = WebsocketsTransport(url=url, subprotocols=[subprotocol], connect_args=connect_args,
                                             keep_alive_timeout=keep_alive_timeout, ping_interval=ping_interval,
                                             pong_timeout=ping_interval)
        self.interval_ms = interval_ms
        self.errors: List[str] = []

    async def _run(self) -> None:
        try:
            async with Client(transport=self.transport) as session:
                async for _ in session.subscribe(GraphQLRequest(gql(TICK), variable_values={"ms": self.interval_ms})):
                    self.result()
            self.end("the subscription ended")
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a closed connection, a keep-alive timeout, an error message
            self.errors.append(repr(error))
            self.end(repr(error))


class RawWebSocket(Kind):
    """A WebSocket read frame by frame (the `websockets` library), to see every message and the
    close code exactly: a subscription and, optionally, a query still running."""

    def __init__(self, subprotocol: str, url: str, unix: Optional[str] = None, interval_ms: int = 200) -> None:
        super().__init__()
        self.name = f"raw {subprotocol}" + (" (unix)" if unix else " (tcp)")
        self.subprotocol = subprotocol
        self.url = url
        self.unix = unix
        self.interval_ms = interval_ms
        self.messages: List[dict] = []
        self.close_code: Optional[int] = None
        self.ws = None
        self.queries: List[str] = []

    async def _run(self) -> None:
        import websockets
        if self.unix:
            connection = websockets.unix_connect(self.unix, self.url, subprotocols=[self.subprotocol])
        else:
            connection = websockets.connect(self.url, subprotocols=[self.subprotocol])
        legacy = self.subprotocol == "graphql-ws"
        try:
            async with connection as ws:
                self.ws = ws
                await ws.send(json.dumps({"type": "connection_init"}))
                await ws.send(json.dumps({"type": "start" if legacy else "subscribe", "id": "s",
                                          "payload": {"query": TICK, "variables": {"ms": self.interval_ms}}}))
                async for text in ws:
                    message = json.loads(text)
                    self.messages.append(message)
                    if message.get("type") in ("data", "next"):
                        self.result()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.end(repr(error))
        else:
            if self.ws is not None:
                self.close_code = self.ws.close_code
            self.end(f"closed {self.close_code}")
        if self.ws is not None:
            self.close_code = self.ws.close_code

    async def query(self, id: str, document: str) -> None:
        """Starts a query or mutation on this connection (its answer is awaited by the caller)."""
        self.queries.append(id)
        legacy = self.subprotocol == "graphql-ws"
        await self.ws.send(json.dumps({"type": "start" if legacy else "subscribe", "id": id, "payload": {"query": document}}))


class Stream(Kind):
    """An SSE or multipart subscription over HTTP/1.1, read raw; a silence longer than
    `silence` seconds (a missed heartbeat) ends it as a client with a read timeout would."""

    def __init__(self, mode: str, port: Optional[int] = None, unix: Optional[str] = None, interval_ms: int = 1000,
                 silence: Optional[float] = None) -> None:
        super().__init__()
        self.mode = mode
        self.name = f"{mode}" + (" (unix)" if unix else " (tcp)")
        self.port = port
        self.unix = unix
        self.interval_ms = interval_ms
        self.silence = silence if silence is not None else (15.0 if mode == "sse" else 8.0)
        self.body = b""

    def content(self) -> tuple:
        """The response's body with its chunked framing removed, and whether the last chunk
        (`0`) came; raises when the framing is broken."""
        head, _, rest = self.body.partition(b"\r\n\r\n")
        assert b"transfer-encoding: chunked" in head.lower(), head
        out = b""
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                return out, rest == b"\r\n"
            out += rest[:size]
            assert rest[size:size + 2] == b"\r\n", rest[:size + 2]
            rest = rest[size + 2:]
        return out, False

    async def _run(self) -> None:
        accept = "text/event-stream" if self.mode == "sse" else "multipart/mixed;subscriptionSpec=1.0"
        marker = b"event: next" if self.mode == "sse" else b'{"payload":{'
        body = json.dumps({"query": TICK, "variables": {"ms": self.interval_ms}}).encode()
        try:
            if self.unix:
                reader, writer = await asyncio.open_unix_connection(self.unix)
            else:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            writer.write(b"POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         b"Accept: " + accept.encode() + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
            while True:
                try:
                    chunk = await asyncio.wait_for(reader.read(65536), self.silence)
                except asyncio.TimeoutError:
                    self.end(f"no byte for {self.silence} s (a heartbeat missed)")
                    writer.close()
                    return
                if not chunk:
                    self.end("closed")
                    return
                before = self.body.count(marker)
                self.body += chunk
                for _ in range(self.body.count(marker) - before):
                    self.result()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.end(repr(error))


class Line(Kind):
    """A raw line-protocol client."""

    name = "line"

    def __init__(self, path: str, interval_ms: int = 1000) -> None:
        super().__init__()
        self.path = path
        self.interval_ms = interval_ms
        self.messages: List[dict] = []

    async def _run(self) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(self.path, limit=1 << 22)
            writer.write(json.dumps({"type": "connection_init", "payload": {"client": "kinds"}}).encode() + b"\n")
            writer.write(json.dumps({"type": "subscribe", "id": "s", "payload": {
                "query": TICK, "variables": {"ms": self.interval_ms}}}).encode() + b"\n")
            await writer.drain()
            while True:
                line = await reader.readline()
                if not line:
                    self.end("closed")
                    return
                message = json.loads(line)
                self.messages.append(message)
                if message.get("type") == "next":
                    self.result()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.end(repr(error))


def told_shutting_down(client: Kind) -> Optional[str]:
    """None when `client` heard a stop in its own protocol: a line or WebSocket `error` with
    SHUTTING_DOWN for its subscription (and for any query it had running), a WebSocket close
    1001, an SSE stream's `next` with `errors` then `complete`, a multipart stream's transport
    `errors` part then the closing delimiter, each ending its response whole. Else what was
    wrong."""
    import re
    if isinstance(client, Line):
        errors = [m for m in client.messages if m.get("type") == "error" and m.get("id") == "s"]
        return None if errors and "SHUTTING_DOWN" in json.dumps(errors[-1]) else f"line: {client.messages[-3:]}"
    if isinstance(client, RawWebSocket):
        problems = []
        for id in ["s", *client.queries]:
            told = [m for m in client.messages if m.get("id") == id]
            if not told or told[-1].get("type") != "error" or "SHUTTING_DOWN" not in json.dumps(told[-1]):
                problems.append(f"{id}: {told[-2:]}")
        if client.close_code != 1001:
            problems.append(f"close code {client.close_code}")
        return f"{client.name}: {problems}" if problems else None
    if isinstance(client, Stream):
        try:
            body, whole = client.content()
        except AssertionError as error:
            return f"{client.name}: broken chunked framing {error}"
        text = body.decode(errors="replace")[-400:]
        if client.mode == "sse":
            pattern = r'event: next\ndata: \{"errors":\[\{[^\n]*"SHUTTING_DOWN"[^\n]*\}\]\}\n\nevent: complete\ndata:\n\n$'
        else:
            pattern = r'\{"payload":null,"errors":\[\{[^\n]*"SHUTTING_DOWN"[^\n]*\}\]\}\r\n--graphql--\r\n$'
        if not whole:
            return f"{client.name}: the response did not end with its last chunk: {text!r}"
        return None if re.search(pattern, text) else f"{client.name}: {text!r}"
    return f"{client.name}: not a kind told_shutting_down knows"
