"""The operator's view through the real gqlmuxd: `gqlmuxctl clients` and `operations` list
clients of every kind and listener with who they are, an admin sees every row and another local
user (uid 65534, over the same socket) only its own, and `status` and the metrics carry the
upstream's keep-alive round trip."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import unittest

from interop.harness import BIN, Daemon, Server, wait_for
from interop.kinds import GQLClient, Line, Stream

NOBODY = 65534

OWN_CLIENT = (
    "import json, socket, sys, time\n"
    "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rwb')\n"
    "def send(m): f.write(json.dumps(m).encode() + b'\\n'); f.flush()\n"
    "def answer(kind):\n"
    "    while True:\n"
    "        m = json.loads(f.readline())\n"
    "        if m['type'] == kind: return m['payload']\n"
    "send({'type': 'connection_init', 'payload': {'client': 'nobody-app'}})\n"
    "send({'type': 'subscribe', 'id': 's', 'payload': {'query': sys.argv[2], 'variables': {'ms': 200}}})\n"
    "while json.loads(f.readline())['type'] != 'next': pass\n"
    "send({'type': 'clients', 'id': 'c'}); clients = answer('clients')\n"
    "send({'type': 'operations', 'id': 'o'}); operations = answer('operations')\n"
    "print(json.dumps({'clients': clients, 'operations': operations}))\n"
)


def ctl(daemon: Daemon, *args: str) -> str:
    return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", daemon.socket],
                          capture_output=True, text=True, timeout=20, check=True).stdout


class OperatorViewTests(unittest.IsolatedAsyncioTestCase):
    wire = ""  # more keys of [upstream]

    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 5
        self.server = Server("interop.strawberry_app:app", protocols="http")
        self.server.start()
        self.addCleanup(self.server.stop)
        # A ping each second, so the round trip is known soon; the socket open to every user.
        self.daemon = Daemon(self.server.url,
                             'connecting_payload = { token = "secret" }\nping_interval = 1\n' + self.wire +
                             f'http_url = "{self.server.http_url}"\n[upstream.headers]\nAuthorization = "Bearer secret"\n',
                             '[graphql_endpoint]\nlisten = "127.0.0.1:0"\n')
        with open(self.daemon.config) as f:
            text = f.read()
        with open(self.daemon.config, "w") as f:
            f.write(text.replace(f'path = "{self.daemon.socket}"\n', f'path = "{self.daemon.socket}"\nmode = "0666"\n'))
        os.chmod(self.daemon.directory, 0o755)
        self.daemon.start()
        self.addCleanup(self.daemon.stop)
        addresses = json.loads(ctl(self.daemon, "status", "--json"))["graphqlEndpoint"].split()
        self.unix = next(a for a in addresses if a.startswith("/"))
        self.port = int(next(a for a in addresses if a.startswith("http://")).rsplit(":", 1)[1].split("/")[0])
        self.clients = []

    async def asyncTearDown(self) -> None:
        for client in self.clients:
            await client.close()

    async def test_every_kind_is_listed_and_another_user_sees_only_its_own(self) -> None:
        ws = f"ws://127.0.0.1:{self.port}/graphql"
        self.clients = [
            Line(self.daemon.socket, interval_ms=200),
            GQLClient("graphql-transport-ws", ws, unix=self.unix, interval_ms=200),
            GQLClient("graphql-ws", ws, unix=self.unix, interval_ms=200),
            Stream("sse", unix=self.unix, interval_ms=200),
            Stream("multipart", port=self.port, interval_ms=200),
        ]
        for client in self.clients:
            client.start()
        await wait_for(lambda: all(c.results >= 2 for c in self.clients), 30, "every kind receiving")

        listed = [json.loads(line) for line in ctl(self.daemon, "clients", "--json").splitlines()]
        # The asker is listed too: gqlmuxctl's own connection, with nothing open.
        asker = [r for r in listed if r["process"] == "gqlmuxctl"]
        self.assertEqual(len(asker), 1, listed)
        self.assertEqual((asker[0]["kind"], asker[0]["subscriptions"], asker[0]["upstreams"]), ("line", 0, []))
        rows = [r for r in listed if r["process"] != "gqlmuxctl"]
        self.assertEqual(len(rows), 5, listed)
        kinds = sorted((r["kind"], r["listener"]) for r in rows)
        self.assertIn(("line", "line"), kinds)
        for kind in ("graphql-transport-ws", "graphql-ws", "sse"):
            self.assertIn((kind, "endpoint"), kinds, rows)
        self.assertIn(("multipart", "endpoint-tcp"), kinds, rows)
        for row in rows:
            if row["listener"] == "endpoint-tcp":
                self.assertIsNone(row["uid"], row)
                self.assertIsNone(row["process"], row)
            else:
                self.assertEqual(row["uid"], os.getuid(), row)
                self.assertIsInstance(row["process"], str, row)
            self.assertEqual(row["upstreams"], [{"upstream": "default", "identity": "host"}], row)
            self.assertGreaterEqual(row["results"], 2, row)
            self.assertGreater(row["bytes"], 0, row)
        # Every kind subscribed to the same document and variables: one upstream operation.
        operations = [json.loads(line) for line in ctl(self.daemon, "operations", "--json").splitlines()]
        self.assertEqual(len(operations), 1, operations)
        self.assertEqual(operations[0]["operation"], "Tick")
        self.assertEqual(operations[0]["subscribers"], 5)

        # Another user, over the same socket: its own row and its own reader only.
        out = await asyncio.to_thread(
            subprocess.run, ["/usr/bin/python3", "-c", OWN_CLIENT, self.daemon.socket,
                             "subscription Tick($ms: Int!) { tick(intervalMs: $ms) }"],
            capture_output=True, text=True, timeout=30, user=NOBODY, group=NOBODY, cwd="/")
        self.assertEqual(out.returncode, 0, out.stderr)
        seen = json.loads(out.stdout)
        self.assertEqual([r["uid"] for r in seen["clients"]], [NOBODY], seen["clients"])
        self.assertEqual(seen["clients"][0]["name"], "nobody-app")
        self.assertEqual(len(seen["operations"]), 1, seen["operations"])
        self.assertEqual(seen["operations"][0]["subscribers"], 1, "another user's readers are not counted for it")
        print(f"\n  clients as root: {len(rows)} rows {kinds}; as uid {NOBODY}: {len(seen['clients'])} row, "
              f"its operation with {seen['operations'][0]['subscribers']} reader (6 in all)", file=sys.stderr)

    async def test_status_and_metrics_carry_the_keepalive_round_trip(self) -> None:
        line = Line(self.daemon.socket, interval_ms=500)
        self.clients = [line]
        line.start()
        await wait_for(lambda: line.results >= 1, 20, "a result")

        def rtt():
            entry = json.loads(ctl(self.daemon, "status", "--json"))["upstreams"]["default"]
            return entry.get("pingRTT"), entry.get("lastMessageAge")

        await wait_for(lambda: rtt()[0] is not None, 10, "a ping answered")
        round_trip, age = rtt()
        self.assertGreater(round_trip, 0)
        self.assertLess(round_trip, 1.0)
        self.assertIsNotNone(age)
        self.assertLess(age, 2.0)
        metrics = ctl(self.daemon, "metrics")
        self.assertIn('gqlmux_upstream_ping_rtt_seconds_count{upstream="default"}', metrics)
        print(f"\n  {self.wire.strip() or 'graphql-transport-ws'}: keep-alive ping round trip {1000 * round_trip:.2f} ms, "
              f"last message {age:.2f} s ago", file=sys.stderr)


class LegacyOperatorViewTests(OperatorViewTests):
    """The same against graphql-ws, which has no ping message: WebSocket ping frames measure it."""
    wire = 'protocol = "graphql-ws"\n'

    async def test_every_kind_is_listed_and_another_user_sees_only_its_own(self) -> None:
        self.skipTest("the same daemon side as above; only the round trip differs")


if __name__ == "__main__":
    unittest.main()
