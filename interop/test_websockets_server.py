"""An upstream built on Python's `websockets` server (interop/websockets_app.py, websockets
15.0.1), which refuses an upgrade `GET` that carries a body header: gqlmuxd streams from it in
graphql-transport-ws and in AWS AppSync's real-time dialect, and its upgrade carries none."""

from __future__ import annotations

import asyncio
import os
import unittest

from interop.harness import Daemon, LineClient, wait_for
from interop.recording_peer import RecordingPeer


def nexts(client: LineClient, id: str) -> list:
    return [m["payload"] for _, m in client.lines if m.get("type") == "next" and m.get("id") == id]


class WebsocketsServerTests(unittest.TestCase):
    def stream(self, peer: RecordingPeer, daemon: Daemon, query: str) -> list:
        async def run() -> list:
            client = LineClient("app")
            await client.connect(daemon.socket)
            client.send({"type": "subscribe", "id": "t", "payload": {"query": query}})
            await wait_for(lambda: len(nexts(client, "t")) >= 3, 20,
                           f"three results through gqlmuxd; gqlmuxd: {daemon.log()[-2000:]} server: {peer.log()[-2000:]}")
            await client.close()
            return nexts(client, "t")

        try:
            daemon.start()
            return asyncio.run(asyncio.wait_for(run(), 30))
        finally:
            daemon.stop()

    def upgrades(self, peer: RecordingPeer) -> list:
        return [entry["headers"] for entry in peer.transcript() if "headers" in entry]

    def test_graphql_transport_ws_streams_through_gqlmuxd(self) -> None:
        peer = RecordingPeer("transport-ws")
        try:
            results = self.stream(peer, Daemon(peer.url), "subscription { tick }")
            self.assertEqual(results[:3], [{"data": {"tick": n}} for n in (1, 2, 3)])
            # The proof is that it streams (websockets 15 refuses an upgrade with a body header and
            # logs why); the recorded headers show what an accepted upgrade carried.
            self.assertNotIn("unsupported request body", peer.log())
            upgrades = self.upgrades(peer)
            self.assertGreaterEqual(len(upgrades), 1)
            for headers in upgrades:
                self.assertNotIn("content-length", headers)
                self.assertNotIn("transfer-encoding", headers)
            self.assertNotIn("unsupported request body", peer.log())
        finally:
            peer.stop()

    def test_the_appsync_dialect_streams_through_gqlmuxd(self) -> None:
        peer = RecordingPeer("appsync", secrets=["da2-websockets-key"])
        try:
            key_file = os.path.join(peer.directory, "api-key")
            with open(key_file, "w") as f:
                f.write("da2-websockets-key\n")
            daemon = Daemon(f"ws://127.0.0.1:{peer.port}/graphql/realtime",
                            f'transport = "appsync"\nhttp_url = "http://127.0.0.1:{peer.port}/graphql"\n'
                            f'[upstream.appsync]\nauth = "api_key"\napi_key_file = "{key_file}"\n')
            results = self.stream(peer, daemon, "subscription { onTick { n by } }")
            self.assertEqual([r["data"]["onTick"]["n"] for r in results[:3]], [1, 2, 3])
            self.assertEqual({r["data"]["onTick"]["by"] for r in results}, {"da2-websockets-key"})
            for headers in self.upgrades(peer):
                self.assertNotIn("content-length", headers)
                self.assertEqual(headers.get("sec-websocket-protocol"), "graphql-ws")
        finally:
            peer.stop()


if __name__ == "__main__":
    unittest.main()
