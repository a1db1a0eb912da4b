"""Queries and mutations always end: over the legacy graphql-ws protocol against ariadne (which
sends a query's `data` and never `complete`) and strawberry (which refuses queries there), and
at `operation_timeout` on both protocols. Real servers, the real gqlmuxd and gqlmuxctl.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import unittest

from interop.harness import BIN, Daemon, Server


def ctl(daemon: Daemon, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", daemon.socket, "--json"],
                          capture_output=True, text=True, timeout=timeout)


class Rig:
    def __init__(self, app: str, protocols: str, upstream_extra: str = ""):
        self.server = Server(app, protocols)
        self.daemon = Daemon(self.server.url, upstream_extra)

    def __enter__(self) -> Daemon:
        self.server.start()
        self.daemon.start()
        return self.daemon

    def __exit__(self, *_) -> None:
        self.daemon.stop()
        self.server.stop()


class LegacyQueryTests(unittest.TestCase):
    def test_ariadne_legacy_answers_queries_and_runs_a_mutation_once(self) -> None:
        with Rig("interop.ariadne_app:app", "legacy") as daemon:  # protocol = "auto", no http_url
            started = time.monotonic()
            hello = ctl(daemon, "query", "{ hello }")
            self.assertEqual(hello.returncode, 0, hello.stderr)
            self.assertEqual(json.loads(hello.stdout), {"data": {"hello": "world"}})
            self.assertLess(time.monotonic() - started, 10, "answered by its first data, not by a timeout")
            status = json.loads(ctl(daemon, "status").stdout)
            self.assertEqual(status["upstream"]["protocol"], "graphql-ws")
            mutation = ctl(daemon, "query", "mutation { increment }")
            self.assertEqual(json.loads(mutation.stdout), {"data": {"increment": 1}}, mutation.stderr)
            count = ctl(daemon, "query", "{ count }")
            self.assertEqual(json.loads(count.stdout), {"data": {"count": 1}}, "the mutation ran exactly once")
            ticks = ctl(daemon, "subscribe", "subscription { tick(intervalMs: 20) }", "--count", "3")
            self.assertEqual(ticks.returncode, 0, ticks.stderr)
            self.assertEqual([json.loads(line)["data"]["tick"] for line in ticks.stdout.split()], [1, 2, 3])
            status = json.loads(ctl(daemon, "status").stdout)
            self.assertEqual(status["subscriptions"], {"local": 0, "upstream": 0}, "nothing left open upstream")

    def test_strawberry_legacy_refuses_a_query_at_once(self) -> None:
        with Rig("interop.strawberry_app:app", "legacy", 'connecting_payload = { token = "secret" }') as daemon:
            started = time.monotonic()
            hello = ctl(daemon, "query", "{ hello }")
            self.assertEqual(hello.returncode, 1)
            self.assertIn("queries are not allowed", hello.stderr)
            self.assertLess(time.monotonic() - started, 10)

    def test_a_query_without_a_result_ends_at_operation_timeout_on_both_protocols(self) -> None:
        for protocols in ("legacy", "modern"):
            with self.subTest(protocols), Rig("interop.ariadne_app:app", protocols, "operation_timeout = 1") as daemon:
                started = time.monotonic()
                slow = ctl(daemon, "query", "{ slow(ms: 4000) }")
                elapsed = time.monotonic() - started
                self.assertEqual(slow.returncode, 1, slow.stdout)
                error = json.loads(slow.stderr.strip().splitlines()[-1])["error"]
                self.assertEqual(error["code"], "CONNECTION_LOST")
                self.assertIn("operation_timeout", error["message"])
                self.assertGreaterEqual(elapsed, 0.9)
                self.assertLess(elapsed, 3.5, "ended by the timeout, not by the server's late answer")
                time.sleep(3.5)  # ariadne runs one operation of a connection at a time: let `slow` end
                hello = ctl(daemon, "query", "{ hello }")  # the connection is still fine
                self.assertEqual(json.loads(hello.stdout), {"data": {"hello": "world"}}, hello.stderr)


if __name__ == "__main__":
    unittest.main()
