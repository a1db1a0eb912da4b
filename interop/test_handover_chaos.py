"""The online restart under chaos, against the real gqlmuxd in front of strawberry with the
fd-store stand-in (interop/fdstore.py) playing systemd: gqlmuxd is SIGKILLed at each step of its
handover (GQLMUX_TEST_FAULT_FILE), stalled and then sent SIGABRT as a watchdog does, and sent a
second SIGTERM 50 ms after the first. Each time the next gqlmuxd starts from whatever the store
holds, as systemd's Restart= does, and within 10 s every client is either carried (receiving
again) or closed, none hangs open without results, the store is empty, a new client is served,
and gqlmuxd holds no descriptor more than its clients explain.

The table is printed; GQLMUX_CHAOS_TABLE=FILE writes it there too.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
import unittest

from interop.fdstore import FDStore
from interop.harness import BIN, Server, endpoint_daemon, held_port
from interop.kinds import Line, RawWebSocket, Stream, wait_for

CASES = [
    ("kill", "draining"),
    ("kill", "flushing"),
    ("kill", "storing"),
    ("kill", "stored"),
    ("kill", "exiting"),
    ("watchdog", "flushing"),  # stalled there, then SIGABRT (what systemd's watchdog sends)
    ("watchdog", "storing"),
    ("double", "SIGTERM twice, 50 ms apart"),
]


def descriptors(pid: int) -> list:
    """What a process has open: one name per descriptor (socket:[…], anon_inode:[eventpoll], …)."""
    folder = f"/proc/{pid}/fd"
    names = []
    for fd in os.listdir(folder):
        try:
            names.append(re.sub(r"\[\d+\]$", "", os.readlink(os.path.join(folder, fd))))
        except OSError:
            pass
    return sorted(names)


async def settled_descriptors(pid: int, clients) -> tuple:
    """The descriptors less the clients, once the count is the same three times in a row 0.2 s
    apart (a connection still closing, or the upstream's being replaced, is not a leak): the
    count and the kinds, for the failure message."""
    seen = []
    for _ in range(15):
        names = descriptors(pid)
        seen.append(len(names) - clients())
        if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]:
            break
        await asyncio.sleep(0.2)
    return seen[-1], names


class HandoverChaosTests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.server = Server("interop.strawberry_app:app", protocols="http")
        self.server.start()

    async def asyncTearDown(self) -> None:
        self.server.stop()

    def status(self, daemon) -> dict:
        out = subprocess.run([os.path.join(BIN, "gqlmuxctl"), "status", "--json", "--socket", daemon.socket],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return json.loads(out)

    async def run_case(self, fault: str, step: str) -> dict:
        port = held_port()
        daemon = endpoint_daemon(self.server, listen=f"127.0.0.1:{port}")
        store = FDStore(daemon.directory)
        fault_file = os.path.join(daemon.directory, "fault")
        env = dict(os.environ, GQLMUX_TEST_FAULT_FILE=fault_file)
        unix = os.path.join(daemon.directory, "graphql.sock")
        tcp = f"ws://127.0.0.1:{port}/graphql"
        clients = [
            Line(daemon.socket, interval_ms=200),
            Line(daemon.socket, interval_ms=300),
            RawWebSocket("graphql-transport-ws", tcp),
            RawWebSocket("graphql-ws", "ws://localhost/graphql", unix=unix),
            Stream("sse", unix=unix, interval_ms=200, silence=60),
            Stream("multipart", port=port, interval_ms=200, silence=60),
        ]
        fresh = None
        try:
            daemon.start(store=store, env=env)
            for client in clients:
                client.start()
            await wait_for(lambda: all(c.results > 0 for c in clients), 30, "every client receiving")
            fds_before, kinds_before = await settled_descriptors(
                daemon.process.pid, lambda: self.status(daemon)["clients"])

            if fault in ("kill", "watchdog"):
                with open(fault_file, "w") as f:
                    f.write(f"{'kill' if fault == 'kill' else 'stall'} {step}\n")
            old = daemon.process
            old.send_signal(signal.SIGTERM)
            if fault == "double":
                await asyncio.sleep(0.05)
                if old.poll() is None:
                    old.send_signal(signal.SIGTERM)
            if fault == "watchdog":
                await wait_for(lambda: not os.path.exists(fault_file) or old.poll() is not None, 15, f"the {step} step")
                await asyncio.sleep(1.0)  # stalled: no watchdog ping comes
                if old.poll() is None:
                    old.send_signal(signal.SIGABRT)
                # Then SIGKILL after TimeoutAbortSec= (2 s here, as in the nspawn test's unit).
                try:
                    await asyncio.get_running_loop().run_in_executor(None, old.wait, 2)
                except subprocess.TimeoutExpired:
                    old.kill()
            code = await asyncio.get_running_loop().run_in_executor(None, old.wait, 20)
            killed = time.monotonic()
            stored = store.names()
            counts = [c.results for c in clients]

            # systemd's Restart=: the next gqlmuxd, with whatever the store holds.
            daemon.start(store=store)
            settled = lambda: all(c.ended or c.results > n for c, n in zip(clients, counts))
            try:
                await wait_for(settled, 10, "every client carried or closed")
            except AssertionError:
                pass
            took = time.monotonic() - killed
            carried = sum(1 for c, n in zip(clients, counts) if not c.ended and c.results > n)
            closed = sum(1 for c in clients if c.ended)
            hung = len(clients) - carried - closed

            fresh = RawWebSocket("graphql-transport-ws", tcp)
            fresh.start()
            await wait_for(lambda: fresh.results > 0 or fresh.ended, 15, "a new client served")
            await wait_for(lambda: store.count() == 0, 5, "the store empty")
            fds_after, kinds_after = await settled_descriptors(
                daemon.process.pid, lambda: self.status(daemon)["clients"])
            return {
                "case": f"{fault} {step}" if fault != "double" else step,
                "exit": code, "stored": stored, "carried": carried, "closed": closed, "hung": hung,
                "settled_s": round(took, 2), "new_client": fresh.results > 0 and not fresh.ended,
                "store_after": store.count(), "fds_before": fds_before, "fds_after": fds_after,
                "kinds_before": kinds_before, "kinds_after": kinds_after,
                "alive": daemon.process.poll() is None,
                "new_client_end": fresh.ended,
            }
        except BaseException as error:
            raise AssertionError(f"{fault} {step}: {error!r}\n{daemon.log()[-4000:]}") from error
        finally:
            for client in clients + ([fresh] if fresh else []):
                await client.close()
            daemon.stop()
            store.close()

    async def test_every_fault_leaves_every_client_carried_or_closed_and_gqlmuxd_whole(self) -> None:
        rows = []
        for fault, step in CASES:
            rows.append(await self.run_case(fault, step))
        lines = ["case | gqlmuxd exit | store held | carried | closed | hung | settled (s) | new client | store after | fds (less clients) before → after"]
        for r in rows:
            lines.append(f"{r['case']} | {r['exit']} | {r['stored']} | {r['carried']} | {r['closed']} | {r['hung']} | "
                         f"{r['settled_s']} | {'served' if r['new_client'] else 'NOT served'} | {r['store_after']} | "
                         f"{r['fds_before']} → {r['fds_after']}")
        table = "\n".join(lines)
        print("\n" + table)
        if os.environ.get("GQLMUX_CHAOS_TABLE"):
            with open(os.environ["GQLMUX_CHAOS_TABLE"], "w") as f:
                f.write(table + "\n")
        for r in rows:
            with self.subTest(case=r["case"]):
                self.assertEqual(r["hung"], 0, r)
                self.assertTrue(r["new_client"] and r["alive"], r)
                self.assertEqual(r["store_after"], 0, r)
                # Two processes: the new one may hold one descriptor fewer than the old (a
                # connection the old one had not yet let go of), never more: every descriptor
                # it adopted or refused and every client that went away is closed.
                self.assertLessEqual(r["fds_after"], r["fds_before"], r)
        # The fault really struck where it was meant to.
        for r in rows:
            if r["case"].startswith(("kill", "watchdog")):
                self.assertIn(r["exit"], (-signal.SIGKILL, -signal.SIGABRT), r)
        # Killed once everything was stored, nothing is lost: every client is carried.
        for r in rows:
            if r["case"] in ("kill stored", "kill exiting"):
                self.assertEqual(r["carried"], 6, r)


if __name__ == "__main__":
    unittest.main()
