"""Secrets kept in files, rotated in place: `connecting_payload_file` and `[upstream.header_files]`
are read again at a reload, so replacing the files and reloading sends the new token and header
upstream on the next connection while every local client stays connected; a file that cannot be
used fails the reload alone (the running credentials are kept). The real gqlmuxd and gqlmuxctl,
and the `websockets` peer that records every upgrade header and `connection_init`.
"""

from __future__ import annotations

import json
import os
import subprocess
import unittest

from interop.harness import BIN, Daemon, LineClient, wait_for
from interop.recording_peer import RecordingPeer


def replace(path: str, text: str) -> None:
    """Writes `text` to `path` as an operator's `install` would: a new file renamed over the old."""
    with open(path + ".new", "w") as f:
        f.write(text)
    os.chmod(path + ".new", 0o640)
    os.rename(path + ".new", path)


class SecretFileRotationTests(unittest.IsolatedAsyncioTestCase):
    async def test_rotated_files_go_upstream_at_reload_and_no_client_closes(self) -> None:
        peer = RecordingPeer("transport-ws")
        self.addCleanup(peer.stop)
        token, header = os.path.join(peer.directory, "token.json"), os.path.join(peer.directory, "authorization")
        replace(token, '{"token": "old-token"}\n')
        replace(header, "Bearer old-header\n")
        daemon = Daemon(peer.url, f'connecting_payload_file = "{token}"\n'
                                  f'[upstream.header_files]\nAuthorization = "{header}"\n')
        daemon.start()
        self.addCleanup(daemon.stop)

        def connections() -> list:
            return [e for e in peer.transcript() if "headers" in e]

        def inits() -> list:
            found = []
            for entry in peer.transcript():
                message = json.loads(entry.get("message") or "{}")
                if message.get("type") == "connection_init":
                    found.append((entry["connection"], message.get("payload")))
            return found

        client = LineClient("app")
        await client.connect(daemon.socket)
        self.addAsyncCleanup(client.close)
        client.send({"type": "subscribe", "id": "t", "payload": {"query": "subscription { tick }"}})

        def ticks() -> int:
            return sum(1 for _, m in client.lines if m.get("id") == "t" and m.get("type") == "next")

        await wait_for(lambda: ticks() >= 3, 15, "ticks before the rotation")
        self.assertEqual([c["headers"].get("authorization") for c in connections()], ["Bearer old-header"])
        self.assertEqual([p for _, p in inits()], [{"token": "old-token"}])

        # The rotation: both files replaced, then the documented command.
        replace(token, '{"token": "new-token"}\n')
        replace(header, "Bearer new-header\n")
        reload = subprocess.run([os.path.join(BIN, "gqlmuxctl"), "reload", "--socket", daemon.socket],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(reload.returncode, 0, reload.stderr)
        await wait_for(lambda: len(connections()) >= 2 and len(inits()) >= 2, 15, "a connection after the reload")
        newest = connections()[-1]["connection"]
        self.assertEqual(connections()[-1]["headers"].get("authorization"), "Bearer new-header")
        self.assertEqual([p for c, p in inits() if c == newest], [{"token": "new-token"}])
        before = ticks()
        await wait_for(lambda: ticks() >= before + 3, 15, "ticks after the rotation, on the same client connection")
        self.assertFalse(client.task.done(), "the client's connection was closed")
        self.assertEqual([m for _, m in client.lines if m.get("type") == "error"], [])

        # A header file that cannot be used fails that reload alone: no new connection, the
        # running credentials kept, the subscription streaming.
        replace(header, "\n")
        count = len(connections())
        bad = subprocess.run([os.path.join(BIN, "gqlmuxctl"), "reload", "--socket", daemon.socket],
                             capture_output=True, text=True, timeout=30)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("header_files Authorization", bad.stderr + bad.stdout)
        before = ticks()
        await wait_for(lambda: ticks() >= before + 3, 15, "ticks after the failed reload")
        self.assertEqual(len(connections()), count)
        # One every user may read is refused the same way, naming the mode.
        replace(header, "Bearer leaked-header\n")
        os.chmod(header, 0o644)
        bad = subprocess.run([os.path.join(BIN, "gqlmuxctl"), "reload", "--socket", daemon.socket],
                             capture_output=True, text=True, timeout=30)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("may be read by every user", bad.stderr + bad.stdout)
        self.assertEqual(len(connections()), count)
        self.assertNotIn("leaked-header", peer.raw_transcript())
        # A FIFO (nothing ever writes it) fails the reload at once instead of holding it.
        os.unlink(header)
        os.mkfifo(header, 0o600)
        fifo = subprocess.run([os.path.join(BIN, "gqlmuxctl"), "reload", "--socket", daemon.socket],
                              capture_output=True, text=True, timeout=30)
        self.assertNotEqual(fifo.returncode, 0)
        self.assertIn("is not a regular file", fifo.stderr + fifo.stdout)
        self.assertEqual(len(connections()), count)
        self.assertNotIn("new-header", daemon.log(), "a header's value reached the log")
        self.assertNotIn("new-token", daemon.log(), "a token reached the log")


if __name__ == "__main__":
    unittest.main()
