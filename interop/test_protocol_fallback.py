"""`protocol = "auto"` against a subscriptions-transport-ws server (interop/sts_app.py): the
server accepts the upgrade under `graphql-transport-ws`, the first protocol offered, and closes
1002; gqlmuxd falls back to `graphql-ws` on its next attempt and never offers the refused one
again. The real gqlmuxd and gqlmuxctl.
"""

from __future__ import annotations

import asyncio
import json
import time
import unittest

from interop.harness import Daemon, Server
from interop.test_legacy import ctl


class ProtocolFallbackTests(unittest.TestCase):
    def test_auto_falls_back_to_graphql_ws_after_a_1002_and_stays_there(self) -> None:
        server = Server("interop.sts_app:app")
        daemon = Daemon(server.url)  # every [upstream] default: protocol = "auto"
        server.start()
        try:
            daemon.start()
            started = time.monotonic()
            ticks = ctl(daemon, "subscribe", "subscription { tick(intervalMs: 20) }", "--count", "3")
            self.assertEqual(ticks.returncode, 0, ticks.stderr + daemon.log())
            self.assertEqual([json.loads(line)["data"]["tick"] for line in ticks.stdout.splitlines()], [1, 2, 3], ticks.stdout)
            self.assertLess(time.monotonic() - started, 10)
            hello = ctl(daemon, "query", "{ hello }")
            self.assertEqual(json.loads(hello.stdout), {"data": {"hello": "world"}}, hello.stderr)
            status = json.loads(ctl(daemon, "status").stdout)
            self.assertEqual(status["upstream"]["protocol"], "graphql-ws")
            self.assertEqual(status["upstream"]["state"], "connected")
            counters = asyncio.run(server.streams())
            # One refused offer of both protocols, then graphql-ws alone, and nothing else.
            self.assertEqual(counters["refused"], 1, counters)
            self.assertEqual(counters["protocols"], ["graphql-transport-ws", "graphql-ws"], counters)
            log = daemon.log()
            self.assertEqual(log.count("protocol_fallback"), 1, log)
            self.assertIn("offering graphql-ws from now on", log)
        finally:
            daemon.stop()
            server.stop()


if __name__ == "__main__":
    unittest.main()
