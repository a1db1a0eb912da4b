"""Restarts and stops as every client kind sees them, against the real gqlmuxd in front of
strawberry, with no systemd: `interop.fdstore.FDStore` stands in for its file descriptor store.

- Online restarts spaced wider than each kind's own liveness timeout: gql's legacy graphql-ws
  client with `keep_alive_timeout=30` (subscriptions-transport-ws's default), gql's
  graphql-transport-ws client pinging, SSE and multipart readers that give up when a heartbeat
  is missed, a line client. None may close: one restart 32 s before the next, then six 6 s
  apart. GQLMUX_KA_RESTARTS and GQLMUX_KA_SPACING (seconds) make it that many, evenly spaced.
- A stop (SIGTERM without a store) with clients of every kind on the Unix socket and the TCP
  port: each is told SHUTTING_DOWN in its own protocol, a query still running gets its error
  before the close, and the next gqlmuxd binds the same port at once and serves a new client.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import unittest

from interop.fdstore import FDStore
from interop.harness import BIN, Server, endpoint_daemon, held_port
from interop.kinds import GQLClient, Line, RawWebSocket, Stream, told_shutting_down, wait_for


def status(daemon) -> dict:
    out = subprocess.run([os.path.join(BIN, "gqlmuxctl"), "status", "--json", "--socket", daemon.socket],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    return json.loads(out)


class RestartTests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.server = Server("interop.strawberry_app:app", protocols="http")
        self.server.start()
        self.port = held_port()
        self.daemon = endpoint_daemon(self.server, listen=f"127.0.0.1:{self.port}")
        self.unix = os.path.join(self.daemon.directory, "graphql.sock")
        self.clients = []
        self.store = None

    async def asyncTearDown(self) -> None:
        for client in self.clients:
            await client.close()
        self.daemon.stop()
        if self.store is not None:
            self.store.close()
        self.server.stop()

    def every_kind(self, interval_ms: int = 1000) -> list:
        ws = f"ws://127.0.0.1:{self.port}/graphql"
        return [
            GQLClient("graphql-ws", "ws://localhost/graphql", unix=self.unix, interval_ms=interval_ms, keep_alive_timeout=30),
            GQLClient("graphql-ws", ws, interval_ms=interval_ms, keep_alive_timeout=30),
            GQLClient("graphql-transport-ws", "ws://localhost/graphql", unix=self.unix, interval_ms=interval_ms, ping_interval=10),
            GQLClient("graphql-transport-ws", ws, interval_ms=interval_ms, ping_interval=10),
            Stream("sse", unix=self.unix, interval_ms=interval_ms),
            Stream("multipart", port=self.port, interval_ms=interval_ms),
            Line(self.daemon.socket, interval_ms=interval_ms),
        ]

    async def start_clients(self, clients: list) -> None:
        self.clients += clients
        for client in clients:
            client.start()
        await wait_for(lambda: all(c.results > 0 or c.ended for c in clients), 30, "every client receiving")
        self.assertEqual([(c.name, c.ended) for c in clients if c.ended], [])

    def terminate(self) -> int:
        self.daemon.process.send_signal(signal.SIGTERM)
        return self.daemon.process.wait(20)

    async def test_every_kind_keeps_its_liveness_across_restarts_wider_than_its_timeout(self) -> None:
        # One restart wider than every kind's timeout (a keep-alive that never resumes shows),
        # then six 6 s apart, closer than legacy's 10 s `ka` interval, for 36 s (a keep-alive
        # that only resumes 10 s after each adoption never comes at all).
        spacings = [32.0] + [6.0] * 6
        if os.environ.get("GQLMUX_KA_RESTARTS"):
            spacings = [float(os.environ.get("GQLMUX_KA_SPACING", "32"))] * int(os.environ["GQLMUX_KA_RESTARTS"])
        restarts = len(spacings)
        self.store = FDStore(self.daemon.directory)
        self.daemon.start(store=self.store)
        clients = self.every_kind()
        await self.start_clients(clients)
        gaps = []
        for restart in range(restarts):
            began = time.monotonic()
            counts = [c.results for c in clients]
            self.assertEqual(self.terminate(), 0, self.daemon.log()[-3000:])
            self.assertGreaterEqual(self.store.names().get("handover-client", 0), len(clients), self.store.names())
            self.daemon.start(store=self.store)
            await wait_for(lambda: all(c.results > n or c.ended for c, n in zip(clients, counts)), 30,
                           f"every client receiving after restart {restart + 1}")
            gaps.append(time.monotonic() - began)
            self.assertEqual([(c.name, c.ended) for c in clients if c.ended], [], f"after restart {restart + 1}")
            # Longer than every kind's liveness timeout: a kind whose keep-alive did not resume
            # with this process has given up by the end of this wait.
            while time.monotonic() - began < spacings[restart]:
                await asyncio.sleep(0.25)
                self.assertEqual([(c.name, c.ended) for c in clients if c.ended], [], f"{time.monotonic() - began:.1f} s after restart {restart + 1}")
        self.assertEqual(self.store.count(), 0, f"the store is empty while gqlmuxd runs: {self.store.names()}")
        print(f"\n{restarts} restarts spaced {', '.join(f'{x:.0f}' for x in spacings)} s, {len(clients)} clients "
              f"({', '.join(c.name for c in clients)}): none closed; receiving again after "
              f"{', '.join(f'{g:.2f}' for g in gaps)} s")

    async def test_a_client_with_a_query_still_running_after_the_drain_is_told_and_the_others_are_carried(self) -> None:
        self.store = FDStore(self.daemon.directory)
        self.daemon.start(store=self.store)
        tcp = f"ws://127.0.0.1:{self.port}/graphql"
        busy = RawWebSocket("graphql-transport-ws", tcp)
        calm = RawWebSocket("graphql-transport-ws", tcp)
        line = Line(self.daemon.socket, interval_ms=200)
        await self.start_clients([busy, calm, line])
        # Longer than the restart's drain (3 s): it cannot be answered before the handover.
        await busy.query("q", "{ slow(ms: 8000) }")
        await asyncio.sleep(0.3)
        self.assertEqual(self.terminate(), 0, self.daemon.log()[-3000:])
        await wait_for(lambda: busy.ended, 10, "the busy client closed")
        self.assertIsNone(told_shutting_down(busy))
        self.daemon.start(store=self.store)
        counts = (calm.results, line.results)
        await wait_for(lambda: calm.results > counts[0] and line.results > counts[1], 20, "the others receiving again")
        self.assertEqual([c.ended for c in (calm, line)], [None, None])

    async def test_a_stop_tells_every_kind_in_its_protocol_and_the_next_start_serves_at_once(self) -> None:
        self.daemon.start()
        unix, tcp = "ws://localhost/graphql", f"ws://127.0.0.1:{self.port}/graphql"
        line = Line(self.daemon.socket, interval_ms=200)
        modern_tcp = RawWebSocket("graphql-transport-ws", tcp)
        modern_unix = RawWebSocket("graphql-transport-ws", unix, unix=self.unix)
        legacy_tcp = RawWebSocket("graphql-ws", tcp)
        sse = Stream("sse", port=self.port, interval_ms=200)
        multipart = Stream("multipart", unix=self.unix, interval_ms=200)
        clients = [line, modern_tcp, modern_unix, legacy_tcp, sse, multipart]
        await self.start_clients(clients)
        # A query that is still running upstream when the stop comes.
        await modern_tcp.query("q", "{ slow(ms: 8000) }")
        await asyncio.sleep(0.5)

        self.assertEqual(self.terminate(), 0, self.daemon.log()[-3000:])
        stopped = time.monotonic()
        await wait_for(lambda: all(c.ended for c in clients), 10, "every client closed by the stop")

        # Each kind, in its own protocol.
        self.assertEqual([told_shutting_down(c) for c in clients], [None] * len(clients))

        # The next gqlmuxd binds the same port at once (the closed connections are in TIME-WAIT).
        self.daemon.start()
        fresh = GQLClient("graphql-transport-ws", tcp, interval_ms=50)
        self.clients.append(fresh)
        fresh.start()
        await wait_for(lambda: fresh.results > 0 or fresh.ended, 30, "a new client served")
        self.assertIsNone(fresh.ended)
        served = fresh.last_result - stopped
        self.assertIsNone(self.daemon.process.poll(), self.daemon.log()[-3000:])
        print(f"\nstop with {len(clients)} clients (TCP and Unix) → next gqlmuxd serving a new TCP client after {served:.2f} s")


if __name__ == "__main__":
    unittest.main()
