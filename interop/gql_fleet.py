"""Endpoint clients made with the gql library (its WebsocketsTransport, both subprotocols) over
gqlmuxd's GraphQL endpoint Unix socket, kept subscribed while something happens to gqlmuxd
(the online restart test runs it inside systemd-nspawn).

    gql_fleet.py SOCKET CLIENTS DIR

Subscribes CLIENTS clients to `subscription { tick }` (half graphql-transport-ws, half the
legacy graphql-ws), writes DIR/ready once every one received a result, then waits for
DIR/mark: it notes each client's count then, waits (at most 30 s) until every one received
more, and writes DIR/report.json: clients, how many received again after the mark, and every
error or end a client saw (a closed connection ends gql's subscription with an error).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from gql import Client, gql
from gql.transport.websockets import WebsocketsTransport


async def client(path: str, index: int, counts: list[int], problems: list[str]) -> None:
    protocol = WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL if index % 2 == 0 else WebsocketsTransport.APOLLO_SUBPROTOCOL
    transport = WebsocketsTransport(
        url="ws://localhost/graphql",
        subprotocols=[protocol],
        connect_args={"unix": True, "path": path},
    )
    try:
        async with Client(transport=transport) as session:
            async for _ in session.subscribe(gql("subscription { tick }")):
                counts[index] += 1
        problems.append(f"client {index} ({protocol}): the subscription ended")
    except Exception as error:  # a closed connection, a protocol error: all count
        problems.append(f"client {index} ({protocol}): {error!r}")


async def main(path: str, n: int, directory: str) -> None:
    counts = [0] * n
    problems: list[str] = []
    tasks = [asyncio.create_task(client(path, i, counts, problems)) for i in range(n)]
    for _ in range(600):
        if all(counts):
            break
        await asyncio.sleep(0.1)
    with open(os.path.join(directory, "ready"), "w") as f:
        f.write(f"{sum(1 for c in counts if c)} of {n} receiving\n")
    while not os.path.exists(os.path.join(directory, "mark")):
        await asyncio.sleep(0.1)
    at_mark = list(counts)
    for _ in range(300):
        if all(c > m for c, m in zip(counts, at_mark)):
            break
        await asyncio.sleep(0.1)
    report = {
        "clients": n,
        "receiving_after_mark": sum(1 for c, m in zip(counts, at_mark) if c > m),
        "results": sum(counts),
        "problems": problems,
    }
    with open(os.path.join(directory, "report.json"), "w") as f:
        json.dump(report, f)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
