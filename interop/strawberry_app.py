"""A strawberry-graphql server for gqlmux's interop tests (served by uvicorn).

Auth: connection_init must carry {"token": "secret"}; anything else is rejected
(graphql-transport-ws: strawberry closes 4403 Forbidden; graphql-ws: connection_error).

`POST /control/drop?how=close|abort` drops every WebSocket (see outages.py).

GQLMUX_INTEROP_PROTOCOLS picks the WebSocket protocols: "modern" (graphql-transport-ws, the
default), "legacy" (graphql-ws only, with `ka` keep-alives every 0.5 s), or "both".
"""
import asyncio
import os
from typing import AsyncGenerator

import strawberry
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL

try:
    from interop.outages import Outages
except ImportError:  # run from inside interop/
    from outages import Outages

counter = 0


@strawberry.type
class Query:
    @strawberry.field
    def hello(self) -> str:
        return "world"

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
        n = 0
        while True:
            n += 1
            yield n
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
}[os.environ.get("GQLMUX_INTEROP_PROTOCOLS", "modern")]
app = Outages(App(schema, subscription_protocols=PROTOCOLS, keep_alive=GRAPHQL_WS_PROTOCOL in PROTOCOLS, keep_alive_interval=0.5))
