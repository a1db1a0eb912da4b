"""A rolling restart of the upstream, against strawberry (real server, real gqlmuxd, raw local
clients): nothing an outage does may end or hold back a subscription.

Run by scripts/test.sh:  python3 -m unittest discover -s interop -t .
"""

from __future__ import annotations

import asyncio
import time
import unittest

from interop.harness import Daemon, Server, Subscribers, daemon_settings, outage


class RollingRestartTests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5  # unittest's debug loop: starting servers is slow by design
        self.server = Server("interop.strawberry_app:app")
        self.server.start()
        self.daemon = Daemon(self.server.url, daemon_settings())
        self.daemon.start()
        self.subscribers = Subscribers(clients=10, per_client=10, interval_ms=100)

    async def asyncTearDown(self) -> None:
        await self.subscribers.close()
        self.daemon.stop()
        self.server.stop()

    async def test_a_rolling_restart_loses_no_subscription(self) -> None:
        """100 distinct subscriptions; the server drops every connection (1012, no close frame)
        or is SIGKILLed and restarted, 5 times, the first right after the subscribes and each
        next one right after all were re-sent: afterwards all 100 stream, none got an error,
        every subscriber heard `reconnecting` then `active` for each outage, and gqlmuxd had all
        100 resumed within 5 s of each close or drop (the server stayed up: that time is
        gqlmuxd's own reconnect and re-subscribe)."""
        s = self.subscribers
        await s.subscribe(self.daemon.socket)
        await s.wait(lambda: s.active() == 100, 10, "100 subscriptions active")
        subscribed = time.monotonic()
        kinds = ["close", "abort", "kill", "close", "abort"]
        report = []
        took = []
        for n, kind in enumerate(kinds):
            started = time.monotonic()
            await outage(self.server, kind)
            resumed = await s.wait_all_resumed(started, 15)
            report.append(f"{kind} at +{started - subscribed:.2f}s, all 100 resumed after {resumed - started:.2f}s")
            took.append((kind, resumed - started))
            self.assertEqual(s.errors(), [], f"outage {n + 1} ({kind})")
        last = time.monotonic()
        await s.wait(lambda: s.streaming_since(last) == 100, 10, "all 100 streaming after the last outage")
        print("\nrolling restart against strawberry:\n  " + "\n  ".join(report), flush=True)
        for n, (kind, seconds) in enumerate(took):
            if kind != "kill":
                self.assertLess(seconds, 5.0, f"outage {n + 1} ({kind}): all 100 resumed only after {seconds:.2f}s")
        self.assertEqual(s.errors(), [])
        self.assertNotIn("quarantined", self.daemon.log())


if __name__ == "__main__":
    unittest.main()
