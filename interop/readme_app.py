"""The server the README's snippets talk to (strawberry on uvicorn, for
interop/test_readme_snippets.py): every field they name, and nothing else.

- `{ hello }` is "world"; `{ price }` the price now; `{ me }` the caller, named by the `token` of
  its `connection_init` payload ("anonymous" without one).
- `subscription { tick(intervalMs) }` counts from 1; `subscription { price }` and
  `subscription { priceChanged }` give a price that rises by one every `intervalMs` (1 s), the
  first at once; `subscription { alerts(intervalMs) }` says "alert N".
"""
import asyncio
import time
from typing import AsyncGenerator

import strawberry
from strawberry.asgi import GraphQL
from strawberry.types import Info

STARTED = time.monotonic()


def price_now() -> int:
    """41, then one more every second since the server started."""
    return 41 + int(time.monotonic() - STARTED)


@strawberry.type
class Query:
    @strawberry.field
    def hello(self) -> str:
        return "world"

    @strawberry.field
    def price(self) -> int:
        return price_now()

    @strawberry.field
    def me(self, info: Info) -> str:
        params = info.context.get("connection_params") if isinstance(info.context, dict) else None
        return str(params.get("token")) if params and params.get("token") else "anonymous"


async def prices(interval_ms: int) -> AsyncGenerator[int, None]:
    while True:
        yield price_now()
        await asyncio.sleep(interval_ms / 1000)


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def tick(self, interval_ms: int = 50) -> AsyncGenerator[int, None]:
        n = 0
        while True:
            n += 1
            yield n
            await asyncio.sleep(interval_ms / 1000)

    @strawberry.subscription
    async def price(self, interval_ms: int = 1000) -> AsyncGenerator[int, None]:
        async for value in prices(interval_ms):
            yield value

    @strawberry.subscription
    async def price_changed(self, interval_ms: int = 1000) -> AsyncGenerator[int, None]:
        async for value in prices(interval_ms):
            yield value

    @strawberry.subscription
    async def alerts(self, interval_ms: int = 200) -> AsyncGenerator[str, None]:
        n = 0
        while True:
            n += 1
            yield f"alert {n}"
            await asyncio.sleep(interval_ms / 1000)


app = GraphQL(strawberry.Schema(query=Query, subscription=Subscription))
