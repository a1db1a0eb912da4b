"""Tests of gqlmux.py against the real gqlmuxd and the project's test upstream.

Run by scripts/test.sh:  GQLMUX_BIN_DIR=.build/debug python3 -m unittest discover -s clients/python
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqlmux  # noqa: E402

BIN = os.environ.get("GQLMUX_BIN_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", ".build", "debug")


def wait_for(condition, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {seconds}s waiting for: {what}")


async def eventually(condition, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out after {seconds}s waiting for: {what}")


class Rig:
    """A test upstream (ticking every `tick_ms`) and a gqlmuxd on a temporary socket."""

    def __init__(self, tick_ms: int = 50):
        self.directory = tempfile.mkdtemp(prefix="gqlmux-py-")
        self.socket = os.path.join(self.directory, "gqlmux.sock")
        self.tick_ms = tick_ms
        self.port = 0
        self.upstream = None
        self.daemon = None
        self.logs = []

    def start_upstream(self) -> None:
        log = open(os.path.join(self.directory, "upstream.log"), "w+")
        self.logs.append(log)
        self.upstream = subprocess.Popen([os.path.join(BIN, "gqlmux-test-upstream"), str(self.port), str(self.tick_ms)],
                                         stdout=log, stderr=subprocess.STDOUT)
        url = []

        def listening() -> bool:
            log.seek(0)
            found = re.search(r"ws://127\.0\.0\.1:(\d+)\S*", log.read())
            if found:
                url.append(found.group(0))
                self.port = int(found.group(1))
            return bool(found)

        wait_for(listening, "the test upstream")
        self.url = url[0]

    def start_daemon(self) -> None:
        config = os.path.join(self.directory, "gqlmuxd.toml")
        with open(config, "w") as f:
            f.write(f'[upstream]\nurl = "{self.url}"\nreconnect_interval = 0.1\nreconnect_max_interval = 0.5\n'
                    f'[socket]\npath = "{self.socket}"\n')
        log = open(os.path.join(self.directory, "gqlmuxd.log"), "a")
        self.logs.append(log)
        self.daemon = subprocess.Popen([os.path.join(BIN, "gqlmuxd"), "--config", config],
                                       stdout=subprocess.DEVNULL, stderr=log)
        wait_for(lambda: os.path.exists(self.socket), "the daemon's socket")

    @staticmethod
    def stop(process, sig=signal.SIGTERM) -> None:
        if process is not None and process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def close(self) -> None:
        self.stop(self.daemon)
        self.stop(self.upstream)
        for log in self.logs:
            log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class ClientTests(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.rig = Rig()
        self.addCleanup(self.rig.close)
        self.rig.start_upstream()
        self.rig.start_daemon()

    async def asyncSetUp(self) -> None:
        self.client = gqlmux.Client(self.rig.socket, client_name="python-test")

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def test_query_and_mutation_return_the_execution_result(self) -> None:
        self.assertEqual(await self.client.query("{ hello }"), {"data": {"hello": "world"}})
        first = await self.client.mutate("mutation { increment }")
        second = await self.client.query("mutation { increment }")
        self.assertEqual(second["data"]["increment"], first["data"]["increment"] + 1)

    async def test_operations_started_together_on_a_new_client_are_each_sent_once(self) -> None:
        # The first connects and sends every operation registered by then; the others must not
        # send theirs again (the daemon would answer DUPLICATE_ID).
        results = await asyncio.gather(*(self.client.query("{ hello }") for _ in range(5)))
        self.assertEqual(results, [{"data": {"hello": "world"}}] * 5)
        # One that is not JSON fails alone, for its own caller, beside one that connects.
        fresh = gqlmux.Client(self.rig.socket)
        good, bad = await asyncio.gather(fresh.query("{ hello }"), fresh.query("{ hello }", variables={"at": object()}),
                                         return_exceptions=True)
        await fresh.close()
        self.assertEqual(good, {"data": {"hello": "world"}})
        self.assertIsInstance(bad, gqlmux.GQLMuxError)
        self.assertEqual(bad.code, "BAD_REQUEST")

    async def test_errors_are_typed_with_the_contract_codes(self) -> None:
        with self.assertRaises(gqlmux.GQLMuxError) as caught:
            await self.client.query("{ hello ")
        self.assertEqual(caught.exception.code, "INVALID_DOCUMENT")
        self.assertTrue(caught.exception.message)
        with self.assertRaises(gqlmux.GQLMuxError) as caught:
            await self.client.query("{ hello }", variables=[1])  # type: ignore[arg-type]
        self.assertEqual(caught.exception.code, "BAD_REQUEST")
        with self.assertRaises(gqlmux.GQLMuxError) as caught:
            await self.client.query("{ a " * 200 + "}" * 200)
        self.assertEqual((caught.exception.code, caught.exception.limit), ("LIMIT_EXCEEDED", "max_document_depth"))
        unreachable = gqlmux.Client(os.path.join(self.rig.directory, "none.sock"))
        with self.assertRaises(gqlmux.GQLMuxError) as caught:
            await unreachable.query("{ hello }")
        self.assertEqual(caught.exception.code, "DAEMON_UNAVAILABLE")
        self.assertIn("none.sock", caught.exception.message)

    async def test_subscribe_yields_results_and_tells_states(self) -> None:
        states = []
        ticks = []
        async with contextlib.aclosing(self.client.subscribe("subscription { tick }", on_state=states.append)) as stream:
            async for result in stream:
                ticks.append(result["data"]["tick"])
                if len(ticks) == 3:
                    break
        self.assertEqual(len(ticks), 3)
        self.assertEqual(ticks, sorted(ticks))
        self.assertIn("active", states)
        # Leaving the loop completed it at the daemon: no local subscription remains.
        status = await self.client.status()
        self.assertEqual(status["subscriptions"]["local"], 0, status)

    async def test_identical_subscriptions_share_one_upstream_operation(self) -> None:
        other = gqlmux.Client(self.rig.socket)
        self.addAsyncCleanup(other.close)
        first = self.client.subscribe("subscription { tick }")
        second = other.subscribe("subscription   { tick }")
        self.assertIn("tick", (await first.__anext__())["data"])
        self.assertIn("tick", (await second.__anext__())["data"])
        status = await self.client.status()
        self.assertEqual(status["subscriptions"], {"local": 2, "upstream": 1})
        # The operator's view: two connections, one upstream operation read by both.
        clients = await self.client.clients()
        self.assertEqual(sorted(row["subscriptions"] for row in clients), [1, 1], clients)
        operations = await other.operations()
        self.assertEqual([(row["operation"], row["subscribers"]) for row in operations], [("tick", 2)], operations)
        await first.aclose()
        await second.aclose()

    async def test_a_restarted_daemon_gets_the_subscription_again(self) -> None:
        states = []
        stream = self.client.subscribe("subscription { tick }", on_state=states.append)
        await stream.__anext__()
        self.rig.stop(self.rig.daemon)  # SIGTERM: SHUTTING_DOWN, then the socket goes away
        self.rig.start_daemon()
        await eventually(lambda: "reconnecting" in states, "state reconnecting")
        results = [await asyncio.wait_for(stream.__anext__(), 10) for _ in range(3)]
        self.assertEqual(len(results), 3)
        self.assertEqual(states[-1], "active", states)
        self.assertEqual(states.count("reconnecting"), 1, f"each change told once: {states}")
        self.assertTrue(all(a != b for a, b in zip(states, states[1:])), states)
        status = await self.client.status()
        self.assertEqual(status["subscriptions"]["local"], 1)
        await stream.aclose()

    async def test_a_late_joiner_that_asks_gets_the_latest_result_marked_replayed(self) -> None:
        other = gqlmux.Client(self.rig.socket)
        self.addAsyncCleanup(other.close)
        first = self.client.subscribe("subscription { tick }", replay_last=True)
        self.assertNotIn("extensions", await first.__anext__())
        late = other.subscribe("subscription { tick }", replay_last=True)
        replay = await asyncio.wait_for(late.__anext__(), 5)
        self.assertIs(replay["extensions"]["gqlmux"]["replayed"], True, replay)
        self.assertIn("tick", replay["data"])
        following = await asyncio.wait_for(late.__anext__(), 5)
        self.assertNotIn("extensions", following, "only the replay is marked")
        status = await self.client.status()
        self.assertEqual(status["subscriptions"], {"local": 2, "upstream": 1}, "the option does not split the stream")
        await first.aclose()
        await late.aclose()

    async def test_after_an_outage_the_named_snapshot_comes_first(self) -> None:
        stream = self.client.subscribe("subscription { tick }", resnapshot="{ hello }")
        first = await stream.__anext__()
        self.assertNotIn("extensions", first)
        self.rig.stop(self.rig.upstream, signal.SIGKILL)
        self.rig.start_upstream()  # same port
        while True:  # results already on their way before the outage may come first
            result = await asyncio.wait_for(stream.__anext__(), 10)
            if "hello" in result.get("data", {}):
                break
            self.assertNotIn("extensions", result)
        self.assertEqual(result, {"data": {"hello": "world"}, "extensions": {"gqlmux": {"snapshot": True}}})
        following = await asyncio.wait_for(stream.__anext__(), 10)
        self.assertIn("tick", following["data"])
        await stream.aclose()

    async def test_a_restarted_upstream_is_told_as_reconnecting_then_active(self) -> None:
        states = []
        gaps = []
        stream = self.client.subscribe("subscription { tick }", on_state=states.append, on_gap=gaps.append)
        await stream.__anext__()
        self.rig.stop(self.rig.upstream, signal.SIGKILL)
        await eventually(lambda: "reconnecting" in states, "state reconnecting")
        await asyncio.sleep(0.3)
        self.rig.start_upstream()  # same port
        await eventually(lambda: states[-1] == "active", "state active again")
        self.assertEqual(len(gaps), 1, gaps)
        self.assertGreaterEqual(gaps[0], 300, f"the gap covers the time the server was down: {gaps}")
        result = await asyncio.wait_for(stream.__anext__(), 10)
        self.assertIn("tick", result["data"])
        self.assertEqual(states.count("reconnecting"), 1, f"each change told once: {states}")
        self.assertTrue(all(a != b for a, b in zip(states, states[1:])), states)
        await stream.aclose()

    async def test_a_query_without_a_daemon_fails_at_once(self) -> None:
        self.rig.stop(self.rig.daemon, signal.SIGKILL)
        with self.assertRaises(gqlmux.GQLMuxError) as caught:
            await self.client.query("{ hello }")
        self.assertEqual(caught.exception.code, "DAEMON_UNAVAILABLE")

    async def test_metrics_and_close(self) -> None:
        text = await self.client.metrics()
        self.assertIn('gqlmux_subscriptions{side="local"}', text)
        stream = self.client.subscribe("subscription { tick }")
        await stream.__anext__()
        await self.client.close()
        with self.assertRaises(gqlmux.GQLMuxError) as caught:
            await stream.__anext__()
        self.assertEqual(caught.exception.code, "CLIENT_CLOSED")


if __name__ == "__main__":
    unittest.main()
