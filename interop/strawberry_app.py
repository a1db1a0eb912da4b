"""A strawberry-graphql server for gqlmux's interop tests (served by uvicorn).

Auth: connection_init must carry {"token": "secret"}; anything else is rejected
(strawberry closes 4403 Forbidden).
"""
import asyncio
from typing import AsyncGenerator

import strawberry
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

counter = 0


@strawberry.type
class Query:
    @strawberry.field
    def hello(self) -> str:
        return "world"


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
app = App(schema, subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL])
