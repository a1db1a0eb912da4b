"""Online restarts in bad weather, against the real gqlmuxd in front of strawberry with the
fd-store stand-in (interop/fdstore.py) playing systemd: during an upstream outage, during a
reload, with a query in flight, and with a slow consumer's backlog.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import unittest

from interop.fdstore import FDStore
from interop.harness import Server, endpoint_daemon, held_port
from interop.kinds import Line, RawWebSocket, Stream, wait_for


class RestartWeatherTests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.server = Server("interop.strawberry_app:app", protocols="http")
        self.server.start()
        self.clients = []

    async def asyncTearDown(self) -> None:
        for client in self.clients:
            await client.close()
        self.daemon.stop()
        self.store.close()
        self.server.stop()

    def start(self, extra: str = "") -> None:
        self.port = held_port()
        self.daemon = endpoint_daemon(self.server, extra=extra, listen=f"127.0.0.1:{self.port}")
        self.store = FDStore(self.daemon.directory)
        self.daemon.start(store=self.store)
        self.unix = os.path.join(self.daemon.directory, "graphql.sock")

    async def connect(self, clients: list) -> None:
        self.clients += clients
        for client in clients:
            client.start()
        await wait_for(lambda: all(c.results > 0 for c in clients), 30, "every client receiving")

    async def restart(self) -> None:
        self.daemon.process.send_signal(signal.SIGTERM)
        code = await asyncio.get_running_loop().run_in_executor(None, self.daemon.process.wait, 20)
        self.assertEqual(code, 0, self.daemon.log()[-3000:])
        self.daemon.start(store=self.store)

    async def test_a_restart_during_an_upstream_outage_resumes_every_subscription_when_it_ends(self) -> None:
        self.start()
        line = Line(self.daemon.socket, interval_ms=200)
        ws = RawWebSocket("graphql-transport-ws", f"ws://127.0.0.1:{self.port}/graphql")
        sse = Stream("sse", unix=self.unix, interval_ms=200, silence=60)
        await self.connect([line, ws, sse])
        self.server.kill()
        await wait_for(lambda: any(m.get("state") == "reconnecting" for m in line.messages), 10, "the outage told")
        await self.restart()
        await asyncio.sleep(2)
        counts = [c.results for c in self.clients]
        self.assertEqual(counts, [c.results for c in self.clients])
        self.server.start()
        await wait_for(lambda: all(c.results > n for c, n in zip(self.clients, counts)), 30, "every subscription back")
        self.assertEqual([c.ended for c in self.clients], [None] * 3)
        active = [m for m in line.messages if m.get("state") == "active" and "gapMs" in m]
        self.assertTrue(active and active[-1]["gapMs"] >= 2000, f"the gap told, outage included: {line.messages[-6:]}")
        self.assertIn("adopted", self.daemon.log())

    async def test_a_restart_during_a_reload_carries_everyone_and_the_next_process_has_the_new_configuration(self) -> None:
        self.start()
        line = Line(self.daemon.socket, interval_ms=200)
        ws = RawWebSocket("graphql-ws", "ws://localhost/graphql", unix=self.unix)
        multipart = Stream("multipart", port=self.port, interval_ms=200, silence=60)
        await self.connect([line, ws, multipart])
        with open(self.daemon.config, "a") as f:
            f.write("[subscriptions]\nreplay_last = true\n")
        self.daemon.process.send_signal(signal.SIGHUP)
        await asyncio.sleep(0.02)
        counts = [c.results for c in self.clients]
        await self.restart()
        await wait_for(lambda: all(c.results > n for c, n in zip(self.clients, counts)), 20, "every client receiving again")
        self.assertEqual([c.ended for c in self.clients], [None] * 3)
        # The new process runs the new file: a late joiner of the shared stream gets the latest result at once.
        late = Line(self.daemon.socket, interval_ms=200)
        self.clients.append(late)
        late.start()
        await wait_for(lambda: late.results > 0, 10, "the late joiner served")
        first = next(m for m in late.messages if m.get("type") == "next")
        self.assertIn("replayed", json.dumps(first), first)

    async def test_a_query_in_flight_is_answered_before_the_handover_and_its_client_carried(self) -> None:
        self.start()
        ws = RawWebSocket("graphql-transport-ws", f"ws://127.0.0.1:{self.port}/graphql")
        await self.connect([ws])
        await ws.query("q", "{ slow(ms: 1000) }")
        await asyncio.sleep(0.2)
        counts = ws.results
        await self.restart()
        await wait_for(lambda: ws.results > counts, 20, "receiving again")
        answer = [m for m in ws.messages if m.get("id") == "q"]
        self.assertEqual([m["type"] for m in answer], ["next", "complete"], answer)
        self.assertEqual(answer[0]["payload"], {"data": {"slow": "slow"}})
        self.assertIsNone(ws.ended)

    async def test_a_slow_consumers_backlog_is_carried_whole_or_the_client_is_closed_never_corrupted(self) -> None:
        self.start("[limits]\nclient_buffer_bytes = 262144\n")
        # Two raw clients, 20 subscriptions each ticking every 10 ms: one stops reading for a
        # second around the restart (within the flush wait), the other never reads again.
        async def raw(subscriptions: int):
            reader, writer = await asyncio.open_unix_connection(self.daemon.socket, limit=1 << 22)
            for i in range(subscriptions):
                writer.write(json.dumps({"type": "subscribe", "id": f"s{i}", "payload": {
                    "query": "subscription Tick($ms: Int!) { tick(intervalMs: $ms) }", "variables": {"ms": 10 + i}}}).encode() + b"\n")
            await writer.drain()
            return reader, writer
        pausing, pausing_writer = await raw(20)
        stalled, stalled_writer = await raw(20)
        first = await pausing.readline()
        await stalled.readline()
        self.assertTrue(first.endswith(b"\n"))
        await asyncio.sleep(1.0)  # neither reads: a backlog builds in the kernel and in gqlmuxd
        self.daemon.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)

        received = bytearray(first)
        async def drain_pausing():
            while True:
                chunk = await pausing.read(1 << 16)
                if not chunk:
                    return
                received.extend(chunk)
        reading = asyncio.create_task(drain_pausing())
        code = await asyncio.get_running_loop().run_in_executor(None, self.daemon.process.wait, 20)
        self.assertEqual(code, 0)
        self.daemon.start(store=self.store)
        await asyncio.sleep(3)
        reading.cancel()

        def check(data: bytes, what: str) -> dict:
            lines = data.split(b"\n")
            whole = [json.loads(line) for line in lines[:-1]]
            last = {}
            for message in whole:
                if message.get("type") == "state":
                    last.pop(message.get("id"), None)  # resumed upstream: the server counts from 1 again
                if message.get("type") == "next":
                    tick = message["payload"]["data"]["tick"]
                    self.assertGreater(tick, last.get(message["id"], 0), f"{what}: {message['id']} in order, once each")
                    last[message["id"]] = tick
            return {"lines": len(whole), "partial": len(lines[-1]), "types": {m.get("type") for m in whole},
                    "errors": [m for m in whole if m.get("type") == "error"]}

        carried = check(bytes(received), "the pausing client")
        states = [json.loads(l) for l in bytes(received).split(b"\n")[:-1]]
        self.assertTrue(any(m.get("state") == "active" and "gapMs" in m for m in states),
                        f"the pausing client was carried and resumed: {carried}")
        # The stalled one: whatever it reads now is whole lines in order, then its end (closed at
        # the flush wait, or cut as a slow consumer), never a line that does not parse.
        data = bytearray()
        ended = False
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                chunk = await asyncio.wait_for(stalled.read(1 << 16), 5)
            except asyncio.TimeoutError:
                break
            if not chunk:
                ended = True
                break
            data.extend(chunk)
        stalled_result = check(bytes(data), "the stalled client")
        resumed = any(m.get("state") == "active" and "gapMs" in m for m in
                      (json.loads(l) for l in bytes(data).split(b"\n")[:-1]))
        self.assertTrue(ended or resumed, f"the stalled client is neither carried nor closed: {stalled_result}")
        if stalled_result["errors"]:
            self.assertIn("SLOW_CONSUMER", json.dumps(stalled_result["errors"][-1]))
        print(f"\nslow consumers across a restart: pausing client {carried['lines']} whole lines, carried; "
              f"stalled client {stalled_result['lines']} whole lines, "
              + ("carried" if not ended else f"then closed ({stalled_result['partial']} bytes of a cut line)"))
        pausing_writer.close()
        stalled_writer.close()


if __name__ == "__main__":
    unittest.main()
