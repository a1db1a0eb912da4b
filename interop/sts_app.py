"""A GraphQL server that behaves as subscriptions-transport-ws 0.11's `SubscriptionServer` with
its defaults does behind the `ws` library (Apollo Server 2, and servers built on it). The npm
registry is out of reach here, so its observable rules are written out as an ASGI app:

- `ws` without `handleProtocols` selects the FIRST subprotocol the client offers, whatever it is;
- `SubscriptionServer` then closes 1002 unless that protocol contains `graphql-ws` or
  `graphql-subscriptions` (so `graphql-transport-ws, graphql-ws` is accepted, then closed 1002);
- `connection_init` → `connection_ack` (no `ka` unless `keepAlive` is set: the default has none);
- `start` → `data` messages, `complete` when a query ends; `stop` ends a subscription with no
  `complete`; `connection_terminate` closes.

Operations: `{ hello }` and `subscription { tick(intervalMs: N) }`. `GET /control/streams` tells
{"upgrades": WebSocket upgrades accepted, "refused": those closed 1002, "protocols": what each
selected}.
"""

from __future__ import annotations

import asyncio
import json
import re

GRAPHQL_WS = "graphql-ws"
GRAPHQL_SUBSCRIPTIONS = "graphql-subscriptions"

counters = {"upgrades": 0, "refused": 0, "protocols": []}


async def app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        body = json.dumps(counters).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
        return
    await websocket(scope, receive, send)


async def websocket(scope, receive, send) -> None:
    connect = await receive()
    assert connect["type"] == "websocket.connect"
    offered = scope.get("subprotocols") or []
    selected = offered[0] if offered else None  # `ws`: the first protocol the client offers
    await send({"type": "websocket.accept", "subprotocol": selected})
    counters["upgrades"] += 1
    counters["protocols"].append(selected)
    if selected is None or (GRAPHQL_WS not in selected and GRAPHQL_SUBSCRIPTIONS not in selected):
        counters["refused"] += 1
        await send({"type": "websocket.close", "code": 1002})
        return
    tasks: dict[str, asyncio.Task] = {}

    async def reply(message: dict) -> None:
        await send({"type": "websocket.send", "text": json.dumps(message)})

    async def run(op_id: str, query: str) -> None:
        if match := re.search(r"tick\s*\(\s*intervalMs\s*:\s*(\d+)\s*\)", query):
            n = 0
            while True:
                await asyncio.sleep(int(match.group(1)) / 1000)
                n += 1
                await reply({"type": "data", "id": op_id, "payload": {"data": {"tick": n}}})
        elif "hello" in query:
            await reply({"type": "data", "id": op_id, "payload": {"data": {"hello": "world"}}})
            await reply({"type": "complete", "id": op_id})
        else:
            await reply({"type": "error", "id": op_id, "payload": {"message": "unknown operation"}})

    try:
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                return
            message = json.loads(event.get("text") or "{}")
            kind = message.get("type")
            if kind == "connection_init":
                await reply({"type": "connection_ack"})
            elif kind == "start":
                op_id = str(message.get("id"))
                tasks[op_id] = asyncio.create_task(run(op_id, message.get("payload", {}).get("query", "")))
            elif kind == "stop":
                task = tasks.pop(str(message.get("id")), None)
                if task:
                    task.cancel()
            elif kind == "connection_terminate":
                await send({"type": "websocket.close", "code": 1000})
                return
    finally:
        for task in tasks.values():
            task.cancel()
