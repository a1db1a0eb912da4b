"""A GraphQL subscription server built on Python's `websockets` library (its asyncio server),
the stack many Python GraphQL servers and test servers use. It is strict about the upgrade: a
`GET` with a body header (even `Content-Length: 0`) is refused as "unsupported request body".

It also records, as JSON lines in `--transcript`, every upgrade's path and headers and every
message a client sends: the tests read it to see exactly what gqlmuxd sent upstream.

    python interop/websockets_app.py --dialect transport-ws|appsync [--secrets FILE] [--transcript FILE]

Binds 127.0.0.1 port 0 and prints `PORT N` once it listens.

- `transport-ws`: graphql-transport-ws. `connection_init` → `connection_ack`; `subscribe` of a
  document naming `tick` streams `{"tick": n}` every 50 ms; `whoami` yields what this connection
  presented (its `connection_init` payload and its upgrade's `authorization`), then completes;
  `tick(intervalMs: N)` every N ms instead;
  anything else answers `{"hello": "world"}` and completes. `ping` → `pong`.
- `appsync`: AWS AppSync's real-time dialect (subprotocol `graphql-ws`): the authorization
  headers come base64-encoded in the `header` query parameter and again in each `start`'s
  `extensions.authorization`; each must carry one of the secrets in `--secrets` (one per line)
  as `x-api-key` or `Authorization`, or the connection gets `connection_error` / the start an
  `error`. A started subscription gets `data` every 50 ms, `{"onTick": {"n": n, "by": SECRET}}`
  where SECRET is the one its start carried, so a test sees whose credential ran it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import time
from typing import Optional
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve

ARGS: argparse.Namespace
CONNECTIONS = [0]


def record(entry: dict) -> None:
    if ARGS.transcript:
        with open(ARGS.transcript, "a") as f:
            f.write(json.dumps(entry) + "\n")


def secrets() -> list:
    if not ARGS.secrets:
        return []
    with open(ARGS.secrets) as f:
        return [line.strip() for line in f if line.strip()]


def authorizing(headers: Optional[dict]) -> Optional[str]:
    """The secret `headers` carry, if it is one of ours."""
    if not isinstance(headers, dict):
        return None
    lower = {str(k).lower(): v for k, v in headers.items()}
    for value in (lower.get("x-api-key"), lower.get("authorization")):
        if isinstance(value, str) and value in secrets():
            return value
    return None


async def ticks(websocket: ServerConnection, sid: str, kind: str, by: Optional[str] = None, interval: float = 0.05) -> None:
    n = 0
    while True:
        n += 1
        if kind == "next":
            await websocket.send(json.dumps({"type": "next", "id": sid, "payload": {"data": {"tick": n}}}))
        else:
            await websocket.send(json.dumps({"type": "data", "id": sid, "payload": {"data": {"onTick": {"n": n, "by": by}}}}))
        await asyncio.sleep(interval)


async def transport_ws(websocket: ServerConnection, key: int) -> None:
    init_payload = None
    running: dict = {}
    try:
        async for text in websocket:
            record({"connection": key, "message": text})
            message = json.loads(text)
            kind = message.get("type")
            if kind == "connection_init":
                init_payload = message.get("payload")
                await websocket.send(json.dumps({"type": "connection_ack"}))
            elif kind == "ping":
                await websocket.send(json.dumps({"type": "pong"}))
            elif kind == "subscribe":
                sid = message["id"]
                query = message.get("payload", {}).get("query", "")
                if "tick" in query:
                    every = re.search(r"intervalMs:\s*(\d+)", query)
                    interval = int(every.group(1)) / 1000 if every else 0.05
                    running[sid] = asyncio.create_task(ticks(websocket, sid, "next", interval=interval))
                    continue
                if "whoami" in query:
                    presented = {"payload": init_payload,
                                 "authorization": websocket.request.headers.get("authorization")}
                    data = {"whoami": json.dumps(presented, sort_keys=True)}
                else:
                    data = {"hello": "world"}
                await websocket.send(json.dumps({"type": "next", "id": sid, "payload": {"data": data}}))
                await websocket.send(json.dumps({"type": "complete", "id": sid}))
            elif kind == "complete":
                task = running.pop(message.get("id"), None)
                if task:
                    task.cancel()
    finally:
        for task in running.values():
            task.cancel()


async def appsync(websocket: ServerConnection, key: int) -> None:
    query = parse_qs(urlsplit(websocket.request.path).query)
    try:
        headers = json.loads(base64.b64decode(query["header"][0]))
    except Exception:
        headers = None
    record({"connection": key, "connect_header": headers})
    running: dict = {}
    keep_alive: Optional[asyncio.Task] = None

    async def keep_alives() -> None:
        while True:
            await websocket.send(json.dumps({"type": "ka"}))
            await asyncio.sleep(10)

    try:
        async for text in websocket:
            record({"connection": key, "message": text})
            message = json.loads(text)
            kind = message.get("type")
            if kind == "connection_init":
                if authorizing(headers) is None:
                    await websocket.send(json.dumps({"type": "connection_error", "payload": {"errors": [
                        {"errorType": "UnauthorizedException", "message": "You are not authorized to make this call.", "errorCode": 401}]}}))
                    await websocket.close(1000)
                    return
                await websocket.send(json.dumps({"type": "connection_ack", "payload": {"connectionTimeoutMs": 300000}}))
                keep_alive = asyncio.create_task(keep_alives())
            elif kind == "start":
                sid = message.get("id")
                payload = message.get("payload") or {}
                by = authorizing((payload.get("extensions") or {}).get("authorization"))
                if by is None:
                    await websocket.send(json.dumps({"type": "error", "id": sid, "payload": {"errors": [
                        {"errorType": "UnauthorizedException", "message": "You are not authorized to make this call."}]}}))
                    continue
                await websocket.send(json.dumps({"type": "start_ack", "id": sid}))
                running[sid] = asyncio.create_task(ticks(websocket, sid, "data", by))
            elif kind == "stop":
                task = running.pop(message.get("id"), None)
                if task:
                    task.cancel()
                await websocket.send(json.dumps({"type": "complete", "id": message.get("id")}))
    finally:
        if keep_alive:
            keep_alive.cancel()
        for task in running.values():
            task.cancel()


async def handler(websocket: ServerConnection) -> None:
    CONNECTIONS[0] += 1
    key = CONNECTIONS[0]
    record({"connection": key, "path": websocket.request.path, "subprotocol": websocket.subprotocol,
            "headers": {name.lower(): value for name, value in websocket.request.headers.raw_items()},
            "at": time.monotonic()})
    try:
        if ARGS.dialect == "appsync":
            await appsync(websocket, key)
        else:
            await transport_ws(websocket, key)
    except Exception:
        pass  # the client went away


async def main() -> None:
    protocols = ["graphql-ws"] if ARGS.dialect == "appsync" else ["graphql-transport-ws"]
    async with serve(handler, "127.0.0.1", 0, subprotocols=protocols) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"PORT {port}", flush=True)
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dialect", choices=["transport-ws", "appsync"], default="transport-ws")
    parser.add_argument("--secrets")
    parser.add_argument("--transcript")
    ARGS = parser.parse_args()
    asyncio.run(main())
