"""An ariadne server for gqlmux's interop tests (served by uvicorn), with the same schema as
strawberry_app.py plus `slow(ms)`, a query that answers late.

GQLMUX_INTEROP_PROTOCOLS: "legacy" (graphql-ws, ariadne's GraphQLWSHandler: it sends a query's
`data` and never `complete`) or "modern" (graphql-transport-ws). No authentication.
"""
import asyncio
import os

from ariadne import MutationType, QueryType, SubscriptionType, make_executable_schema
from ariadne.asgi import GraphQL
from ariadne.asgi.handlers import GraphQLTransportWSHandler, GraphQLWSHandler

try:
    from interop.outages import Outages
except ImportError:  # run from inside interop/
    from outages import Outages

type_defs = """
    type Query { hello: String!  count: Int!  slow(ms: Int!): String! }
    type Mutation { increment: Int! }
    type Subscription { tick(intervalMs: Int = 50): Int! }
"""
query, mutation, subscription = QueryType(), MutationType(), SubscriptionType()
counter = 0


@query.field("hello")
def hello(*_):
    return "world"


@query.field("count")
def count(*_):
    return counter


@query.field("slow")
async def slow(*_, ms):
    await asyncio.sleep(ms / 1000)
    return "late"


@mutation.field("increment")
def increment(*_):
    global counter
    counter += 1
    return counter


@subscription.source("tick")
async def tick_source(*_, intervalMs=50):
    n = 0
    while True:
        n += 1
        yield n
        await asyncio.sleep(intervalMs / 1000)


@subscription.field("tick")
def tick(value, *_, **__):
    return value


schema = make_executable_schema(type_defs, query, mutation, subscription)
handler = GraphQLTransportWSHandler() if os.environ.get("GQLMUX_INTEROP_PROTOCOLS") == "modern" else GraphQLWSHandler()
app = Outages(GraphQL(schema, websocket_handler=handler))
