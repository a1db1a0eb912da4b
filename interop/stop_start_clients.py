"""Clients of every kind, on gqlmuxd's Unix sockets and its TCP port, held open across a
`systemctl stop` (the nspawn end-to-end test runs it): each must be told SHUTTING_DOWN in its
own protocol and closed.

    python -m interop.stop_start_clients LINE_SOCKET GRAPHQL_SOCKET TCP_PORT DIR

Writes DIR/ready once every client receives, then waits (at most 60 s) until every one is
closed and writes DIR/report.json: each client's name, how it ended, and what was wrong with
what it was told (null when nothing).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from interop.kinds import Line, RawWebSocket, Stream, told_shutting_down, wait_for


async def main(line_socket: str, graphql_socket: str, port: int, directory: str) -> None:
    tcp = f"ws://127.0.0.1:{port}/graphql"
    clients = [
        Line(line_socket, interval_ms=200),
        RawWebSocket("graphql-transport-ws", tcp),
        RawWebSocket("graphql-transport-ws", "ws://localhost/graphql", unix=graphql_socket),
        RawWebSocket("graphql-ws", tcp),
        RawWebSocket("graphql-ws", "ws://localhost/graphql", unix=graphql_socket),
        Stream("sse", port=port, silence=60),
        Stream("sse", unix=graphql_socket, silence=60),
        Stream("multipart", port=port, silence=60),
        Stream("multipart", unix=graphql_socket, silence=60),
    ]
    for client in clients:
        client.start()
    await wait_for(lambda: all(c.results > 0 or c.ended for c in clients), 30, "every client receiving")
    with open(os.path.join(directory, "ready"), "w") as f:
        f.write(f"{sum(1 for c in clients if c.results and not c.ended)} of {len(clients)} receiving\n")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(c.ended for c in clients):
        await asyncio.sleep(0.1)
    report = [{"client": c.name, "ended": c.ended, "problem": told_shutting_down(c) if c.ended else "still open"} for c in clients]
    with open(os.path.join(directory, "report.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
