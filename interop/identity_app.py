"""A strawberry server that tells each caller who it is, for gqlmux's identity tests (served by
uvicorn).

- WebSocket (graphql-transport-ws): `connection_init` must carry `{"token": NAME}`, or the
  upgrade `Authorization: Bearer NAME`; NAME is the caller. `subscription { me(intervalMs) }`
  yields "NAME:n" forever.
- HTTP POST /graphql: `query { me }` answers the caller named by `Authorization: Bearer NAME`.
- GET /control/identity: per caller, the WebSocket connections ever opened, the `me`
  subscriptions running and ever started, and the queries answered.
"""
import asyncio
import json
from typing import AsyncGenerator, Dict

import strawberry
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import Info

stats: Dict[str, Dict[str, int]] = {}


def count(name: str, what: str, by: int = 1) -> None:
    entry = stats.setdefault(name, {"connections": 0, "running": 0, "started": 0, "queries": 0})
    entry[what] += by


def caller(info: Info) -> str:
    context = info.context
    params = context.get("connection_params") if isinstance(context, dict) else None
    if params and params.get("token"):
        return str(params["token"])
    request = context.get("request") if isinstance(context, dict) else getattr(context, "request", None)
    header = request.headers.get("authorization", "") if request is not None else ""
    return header[7:] if header.startswith("Bearer ") else "anonymous"


@strawberry.type
class Query:
    @strawberry.field
    def me(self, info: Info) -> str:
        name = caller(info)
        count(name, "queries")
        return name


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def me(self, info: Info, interval_ms: int = 50) -> AsyncGenerator[str, None]:
        name = caller(info)
        count(name, "started")
        count(name, "running")
        try:
            n = 0
            while True:
                yield f"{name}:{n}"
                n += 1
                await asyncio.sleep(interval_ms / 1000)
        finally:
            count(name, "running", -1)


class App(GraphQL):
    async def on_ws_connect(self, context):
        params = context["connection_params"] or {}
        request = context.get("request")
        header = request.headers.get("authorization", "") if request is not None else ""
        name = params.get("token") or (header[7:] if header.startswith("Bearer ") else None)
        if not name:
            raise ConnectionRejectionError({"reason": "who are you?"})
        context["connection_params"] = {"token": name}
        count(name, "connections")
        return {"welcome": name}


class Control:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/control/identity":
            body = json.dumps(stats).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


schema = strawberry.Schema(query=Query, subscription=Subscription)
app = Control(App(schema, subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL]))
