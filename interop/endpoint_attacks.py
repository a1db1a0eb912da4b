"""Raw HTTP and WebSocket requests as an attacker sends them, for the endpoint's security tests:
hand-written heads (any Host, Origin or Sec-Fetch-Site), over TCP or the Unix socket."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Dict, List, Optional, Tuple, Union

Address = Union[Tuple[str, int], str]  # ("127.0.0.1", port) or a Unix socket path


class Response:
    def __init__(self, status: int, headers: Dict[str, List[str]], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> Optional[str]:
        values = self.headers.get(name.lower())
        return values[0] if values else None

    def json(self):
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<{self.status} {self.headers} {self.body[:200]!r}>"


async def open_connection(address: Address):
    if isinstance(address, str):
        return await asyncio.open_unix_connection(address)
    return await asyncio.open_connection(*address)


def parse_head(head: bytes) -> Tuple[int, Dict[str, List[str]]]:
    """The status and headers (names lower-cased) of a response head."""
    lines = head.decode("latin-1").split("\r\n")
    headers: Dict[str, List[str]] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers.setdefault(name.strip().lower(), []).append(value.strip())
    return int(lines[0].split(" ")[1]), headers


async def read_response(reader: asyncio.StreamReader, timeout: float = 10) -> Response:
    status, headers = parse_head(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout))
    length = headers.get("content-length")
    if status in (204, 304):
        body = b""
    elif length is not None:
        body = await asyncio.wait_for(reader.readexactly(int(length[0])), timeout)
    else:
        body = await asyncio.wait_for(reader.read(), timeout)
    return Response(status, headers, body)


def build(method: str, target: str, host: Optional[str], headers: Optional[Dict[str, str]] = None,
          body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/1.1"]
    if host is not None:
        lines.append(f"Host: {host}")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if (body or method == "POST") and not any(name.lower() == "content-length" for name in (headers or {})):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def request(address: Address, method: str, target: str = "/graphql", host: Optional[str] = "127.0.0.1",
                  headers: Optional[Dict[str, str]] = None, body: bytes = b"", timeout: float = 10) -> Response:
    reader, writer = await open_connection(address)
    try:
        writer.write(build(method, target, host, headers, body))
        await writer.drain()
        return await read_response(reader, timeout)
    finally:
        writer.close()


async def post_json(address: Address, document: str, host: Optional[str] = "127.0.0.1",
                    headers: Optional[Dict[str, str]] = None, content_type: str = "application/json") -> Response:
    return await request(address, "POST", host=host, headers={"Content-Type": content_type, **(headers or {})},
                         body=json.dumps({"query": document}).encode())


def get_target(document: str) -> str:
    return "/graphql?" + urllib.parse.urlencode({"query": document})


async def upgrade(address: Address, host: Optional[str] = "127.0.0.1", headers: Optional[Dict[str, str]] = None,
                  protocol: str = "graphql-transport-ws") -> Tuple[Response, asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket upgrade request; the caller closes the writer."""
    reader, writer = await open_connection(address)
    writer.write(build("GET", "/graphql", host, {
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": protocol, **(headers or {})}))
    await writer.drain()
    status, headers = parse_head(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10))
    return Response(status, headers, b""), reader, writer


def frame(text: str) -> bytes:
    """A masked client text frame (mask of zeros keeps the bytes readable)."""
    payload = text.encode()
    header = bytes([0x81])
    if len(payload) < 126:
        header += bytes([0x80 | len(payload)])
    else:
        header += bytes([0x80 | 126]) + len(payload).to_bytes(2, "big")
    return header + b"\0\0\0\0" + payload


async def read_frame(reader: asyncio.StreamReader, timeout: float = 10) -> Tuple[int, bytes]:
    """(opcode, payload) of one unmasked server frame."""
    first, second = await asyncio.wait_for(reader.readexactly(2), timeout)
    length = second & 0x7F
    if length == 126:
        length = int.from_bytes(await reader.readexactly(2), "big")
    elif length == 127:
        length = int.from_bytes(await reader.readexactly(8), "big")
    return first & 0x0F, await asyncio.wait_for(reader.readexactly(length), timeout)
