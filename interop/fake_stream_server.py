"""A tiny HTTP/1.1 streaming server (asyncio, standard library) that misbehaves on request:
for the isolation tests of gqlmuxd's multipart and SSE readers.

Each POST's body names what to stream (it is the GraphQL request; the query text decides):
  "good"     a result every 50 ms, forever
  "badutf8"  one result, then an event/part whose JSON holds invalid UTF-8
  "garbage"  one result, then a part or `next` event that is not JSON
  "huge"     one result, then a part/event larger than max_message_bytes
`posts` counts the POSTs per kind.
"""

from __future__ import annotations

import asyncio
import json


class FakeStreamServer:
    def __init__(self, flavor: str):
        self.flavor = flavor  # "multipart" or "sse"
        self.posts: dict[str, int] = {}
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in self.writers:
            writer.transport.abort()

    def _frame(self, payload: bytes) -> bytes:
        if self.flavor == "sse":
            return b"event: next\r\ndata: " + payload + b"\r\n\r\n"
        return (b"\r\nContent-Type: application/json\r\n\r\n{\"payload\":" + payload + b"}\r\n--graphql")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = json.loads(await reader.readexactly(length))
            kind = next((k for k in ("badutf8", "garbage", "huge", "good") if k in body["query"]), "good")
            self.posts[kind] = self.posts.get(kind, 0) + 1
            content_type = b"text/event-stream" if self.flavor == "sse" else b'multipart/mixed; boundary="graphql"'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\nTransfer-Encoding: chunked\r\n\r\n")

            def chunk(data: bytes) -> None:
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))

            n = 0
            while True:
                n += 1
                chunk(self._frame(b'{"data":{"n":%d}}' % n))
                await writer.drain()
                if n == 2 and kind != "good":
                    bad = {
                        "badutf8": self._frame(b'{"data":{"s":"\xff\xfe"}}'),
                        "garbage": b"event: next\r\ndata: {{{{ not json\r\n\r\n" if self.flavor == "sse" else b"\r\n{{{{ not json }}\r\n--graphql",
                        "huge": self._frame(b'{"data":{"s":"' + b"x" * 4000 + b'"}}'),
                    }[kind]
                    chunk(bad)
                    await writer.drain()
                    await asyncio.sleep(30)
                await asyncio.sleep(0.05)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
