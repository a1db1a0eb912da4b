"""A strawberry-graphql server for gqlmux's interop tests (served by uvicorn).

Auth: connection_init must carry {"token": "secret"}; anything else is rejected
(graphql-transport-ws: strawberry closes 4403 Forbidden; graphql-ws: connection_error).

`POST /control/drop?how=close|abort` drops every WebSocket (see outages.py).

GQLMUX_INTEROP_PROTOCOLS picks the protocols: "modern" (graphql-transport-ws, the default),
"legacy" (graphql-ws only, with `ka` keep-alives every 0.5 s), "both", or "http" (both
WebSocket protocols plus multipart subscriptions and GraphQL over SSE on POST /graphql).

With "http", a POST to /graphql must carry `Authorization: Bearer secret` (else 401), and
`GET /control/streams` answers how many subscription generators run (and ever started), how many
POSTs arrived, and how many times the `increment` mutation and the `hello` query ran.
"""
import asyncio
import json
import os
from typing import AsyncGenerator, Optional

import strawberry
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import (
    GRAPHQL_SSE_PROTOCOL,
    GRAPHQL_TRANSPORT_WS_PROTOCOL,
    GRAPHQL_WS_PROTOCOL,
    MULTIPART_SUBSCRIPTION_PROTOCOL,
)

try:
    from interop.outages import Outages
except ImportError:  # run from inside interop/
    from outages import Outages

counter = 0
hellos = 0  # times the hello query ran (the browser and flood tests count what reached us)
started = 0  # subscription generators ever started
running = 0  # subscription generators alive (one per upstream stream or operation)
posts = 0  # POST /graphql requests received
peers = set()  # (client address, port) of each POST: one per TCP connection
versions = set()  # HTTP versions the POSTs came with


@strawberry.type
class Flaky:
    n: int

    @strawberry.field
    def bad(self) -> Optional[str]:
        """Fails on odd ticks: a result with an error inside it, the stream goes on."""
        if self.n % 2:
            raise ValueError(f"odd tick {self.n}")
        return "fine"


@strawberry.type
class Query:
    @strawberry.field
    def hello(self) -> str:
        global hellos
        hellos += 1
        return "world"

    @strawberry.field
    async def slow(self, ms: int = 5000) -> str:
        """Answers after `ms` milliseconds: a query still running when something happens."""
        await asyncio.sleep(ms / 1000)
        return "slow"

    @strawberry.field
    def count(self) -> int:
        """How many times increment has run (a mutation must run exactly once)."""
        return counter


@strawberry.type
class Mutation:
    @strawberry.mutation
    def increment(self) -> int:
        global counter
        counter += 1
        return counter


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def tick(self, interval_ms: int = 50) -> AsyncGenerator[int, None]:
        global running, started
        running += 1
        started += 1
        try:
            n = 0
            while True:
                n += 1
                yield n
                await asyncio.sleep(interval_ms / 1000)
        finally:
            running -= 1

    @strawberry.subscription
    async def flaky(self, interval_ms: int = 50) -> AsyncGenerator[Flaky, None]:
        n = 0
        while True:
            n += 1
            yield Flaky(n=n)
            await asyncio.sleep(interval_ms / 1000)


class App(GraphQL):
    async def on_ws_connect(self, context):
        params = context["connection_params"] or {}
        if params.get("token") != "secret":
            raise ConnectionRejectionError({"reason": "bad token"})
        return {"welcome": True}


schema = strawberry.Schema(query=Query, mutation=Mutation, subscription=Subscription)
PROTOCOLS = {
    "modern": [GRAPHQL_TRANSPORT_WS_PROTOCOL],
    "legacy": [GRAPHQL_WS_PROTOCOL],
    "both": [GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL],
    "http": [GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL, MULTIPART_SUBSCRIPTION_PROTOCOL, GRAPHQL_SSE_PROTOCOL],
}[os.environ.get("GQLMUX_INTEROP_PROTOCOLS", "modern")]


class HTTPGate:
    """With the HTTP transports: POST /graphql needs `Authorization: Bearer secret`; GET
    /control/streams tells the test how many subscriptions run upstream and how many POSTs came."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        global posts
        if scope["type"] == "http" and scope["path"] == "/control/streams":
            body = json.dumps({"running": running, "posts": posts, "connections": len(peers),
                               "versions": sorted(versions), "mutations": counter, "hellos": hellos,
                               "started": started}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/graphql":
            posts += 1
            peers.add(tuple(scope.get("client") or ()))
            versions.add(scope.get("http_version", "?"))
            if dict(scope["headers"]).get(b"authorization") != b"Bearer secret":
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"bad token"})
                return
        await self.app(scope, receive, send)


app = Outages(App(schema, subscription_protocols=PROTOCOLS, keep_alive=GRAPHQL_WS_PROTOCOL in PROTOCOLS, keep_alive_interval=0.5))
if GRAPHQL_SSE_PROTOCOL in PROTOCOLS:
    app = HTTPGate(app)
