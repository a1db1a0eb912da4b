"""`gqlmuxctl top` on a real terminal: tmux runs it against the real gqlmuxd in front of
strawberry, with clients of several kinds (line clients, a WebSocket and an SSE stream on the
local GraphQL endpoint) and one slow client that subscribes to a fast subscription and never
reads. The screen shows the clients table with the slow client's row, its QUEUED bytes grow
from one refresh to the next, keys switch to the operations table and move the sort column, and
`q` leaves the alternate screen and exits 0. Also `top --once` and `clients --json` without a
terminal.

tmux is needed (scripts/prerequisites.sh test installs it): without it the test is skipped,
or fails when GQLMUX_REQUIRE_ALL=1.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import unittest
from typing import List, Optional

from interop.harness import BIN, Server, endpoint_daemon, held_port, wait_for
from interop.kinds import Line, RawWebSocket, Stream

TMUX = shutil.which("tmux")
SLOW = "slow-reader"
FAST_TICK = "subscription Fast($ms: Int!) { tick(intervalMs: $ms) }"
# The table header's sort mark: ▼/▲ in a UTF-8 locale, `*` otherwise (tmux may show `_`).
MARK = "[▼▲*_]"


def human_bytes(text: str) -> float:
    """`512`, `1.2K`, `3.4M` (powers of 1024) → bytes."""
    match = re.fullmatch(r"([0-9.]+)([KMGTPE]?)", text)
    if not match:
        raise AssertionError(f"not a byte count: {text!r}")
    return float(match[1]) * 1024 ** " KMGTPE".index(match[2] or " ")


class Tmux:
    """A private tmux server (its own socket name) with one session running one command."""

    def __init__(self) -> None:
        self.server = f"gqlmux-test-{os.getpid()}"
        self.session = "top"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([TMUX, "-L", self.server, *args], capture_output=True, text=True, timeout=10, check=check)

    def start(self, command: str, width: int, height: int) -> None:
        # remain-on-exit: the pane stays after the command ends, so its screen and its exit
        # status can be read.
        self.run("-f", "/dev/null", "new-session", "-d", "-s", self.session, "-x", str(width), "-y", str(height), command,
                 ";", "set-option", "-w", "-t", self.session, "remain-on-exit", "on")

    def screen(self, history: bool = False) -> List[str]:
        """The pane's lines; with `history`, those scrolled off the top too (a dead pane's
        "Pane is dead" line scrolls the screen up by one)."""
        return self.run("capture-pane", "-p", "-t", self.session, *(["-S", "-"] if history else [])).stdout.splitlines()

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.session, *keys)

    def pane(self, format: str) -> str:
        return self.run("display-message", "-p", "-t", self.session, format).stdout.strip()

    def kill(self) -> None:
        self.run("kill-server", check=False)


def slow_client(path: str) -> socket.socket:
    """A raw line client that subscribes to a tick every millisecond and never reads."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(json.dumps({"type": "connection_init", "payload": {"client": SLOW}}).encode() + b"\n"
              + json.dumps({"type": "subscribe", "id": "fast", "payload": {"query": FAST_TICK, "variables": {"ms": 1}}}).encode()
              + b"\n")
    return s


def queued_of(screen: List[str], name: str) -> Optional[float]:
    """The QUEUED bytes the clients table shows for the client called `name`, if its row is on screen."""
    header = next((line for line in screen if re.search(r"\bNAME\b", line) and "QUEUED" in line), None)
    row = next((line for line in screen if name in line), None)
    if header is None or row is None:
        return None
    titles = header.split()
    column = next(i for i, title in enumerate(titles) if title.endswith("QUEUED"))
    cells = row.split()
    if len(cells) != len(titles):
        raise AssertionError(f"the row does not line up with the header:\n{header}\n{row}")
    return human_bytes(cells[column])


@unittest.skipUnless(TMUX or os.environ.get("GQLMUX_REQUIRE_ALL") == "1",
                     "tmux is not installed (scripts/prerequisites.sh test installs it)")
class TopTests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        if TMUX is None:
            self.fail("GQLMUX_REQUIRE_ALL=1 and tmux is not installed (scripts/prerequisites.sh test installs it)")
        asyncio.get_running_loop().slow_callback_duration = 5
        self.server = Server("interop.strawberry_app:app", protocols="http")
        self.server.start()
        self.addCleanup(self.server.stop)
        self.port = held_port()
        self.daemon = endpoint_daemon(self.server, listen=f"127.0.0.1:{self.port}")
        self.daemon.start()
        self.addCleanup(self.daemon.stop)
        self.unix = os.path.join(self.daemon.directory, "graphql.sock")
        self.tmux = Tmux()
        self.addCleanup(self.tmux.kill)
        self.clients: list = []
        self.slow: Optional[socket.socket] = None

    async def asyncTearDown(self) -> None:
        for client in self.clients:
            await client.close()
        if self.slow is not None:
            self.slow.close()

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([os.path.join(BIN, "gqlmuxctl"), *args, "--socket", self.daemon.socket],
                              capture_output=True, text=True, timeout=20)

    async def screen_until(self, condition, seconds: float, what: str) -> List[str]:
        """Captures the pane until `condition(screen)` holds; fails with the last screen."""
        deadline = time.monotonic() + seconds
        screen: List[str] = []
        while time.monotonic() < deadline:
            screen = self.tmux.screen()
            if condition(screen):
                return screen
            await asyncio.sleep(0.2)
        raise AssertionError(f"not within {seconds} s: {what}; the screen:\n" + "\n".join(screen))

    async def test_top_shows_a_slow_client_and_answers_its_keys(self) -> None:
        ws = f"ws://127.0.0.1:{self.port}/graphql"
        self.clients = [
            Line(self.daemon.socket, interval_ms=200),
            RawWebSocket("graphql-transport-ws", ws, unix=self.unix, interval_ms=200),
            Stream("sse", unix=self.unix, interval_ms=200),
        ]
        for client in self.clients:
            client.start()
        subscriber = subprocess.Popen([os.path.join(BIN, "gqlmuxctl"), "subscribe", "subscription { tick(intervalMs: 300) }",
                                       "--socket", self.daemon.socket], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (subscriber.kill(), subscriber.wait()))
        await wait_for(lambda: all(c.results >= 2 for c in self.clients), 30, "every kind receiving")
        self.slow = slow_client(self.daemon.socket)

        # Without a terminal: one plain snapshot, and the rows as JSON lines.
        once = self.ctl("top", "--once")
        self.assertEqual(once.returncode, 0, once.stderr)
        self.assertNotIn("\x1b", once.stdout)
        for word in ("CLIENTS", "OPERATIONS", "QUEUED", "RATE/S", SLOW):
            self.assertIn(word, once.stdout)
        rows = [json.loads(line) for line in self.ctl("clients", "--json").stdout.splitlines()]
        self.assertIn(SLOW, [r["name"] for r in rows])
        self.assertGreaterEqual({r["kind"] for r in rows}, {"line", "graphql-transport-ws", "sse"})

        # The live view: the pane's shell prints a line on the main screen, then becomes top.
        # Its exit status goes to a file the shell writes after it (tmux's own pane_dead_status
        # was sometimes never set on a loaded machine, though the process had exited).
        status_file = os.path.join(self.daemon.directory, "top-status")
        self.tmux.start(f"printf 'before top\\n'; env LANG=C.UTF-8 {os.path.join(BIN, 'gqlmuxctl')} top "
                        f"--socket {self.daemon.socket} --interval 0.5; echo $? > {status_file}", 120, 30)
        screen = await self.screen_until(lambda s: queued_of(s, SLOW) is not None, 20, "the clients table with the slow client's row")
        text = "\n".join(screen)
        self.assertTrue(screen[0].startswith("gqlmuxd "), text)
        self.assertRegex(text, r"CLIENTS \d+  upstream all")
        self.assertRegex(text, MARK + "QUEUED")
        self.assertIn(" ws ", text)  # the endpoint's WebSocket (graphql-transport-ws)
        self.assertIn(" sse ", text)
        self.assertIn(" line ", text)
        self.assertNotIn("before top", text, "top draws on the alternate screen")
        self.assertLessEqual(len(screen), 30)
        for line in screen:
            self.assertLessEqual(len(line), 120, line)
        # Its queue grows from one refresh to the next, and it is on top (the most queued first).
        first = queued_of(screen, SLOW)
        grown = await self.screen_until(lambda s: (queued_of(s, SLOW) or 0) > first, 20, "the slow client's QUEUED growing")
        print(f"\n  top: the slow client queued {first:.0f} B, then {queued_of(grown, SLOW):.0f} B", file=sys.stderr)
        header = next(i for i, line in enumerate(grown) if re.search(r"\bNAME\b", line))
        self.assertIn(SLOW, grown[header + 1], "\n".join(grown))

        # u: only the rows of upstream `default`, then every upstream again.
        self.tmux.keys("u")
        await self.screen_until(lambda s: any("upstream default" in line for line in s), 10, "the filter on upstream default")
        self.tmux.keys("u")
        await self.screen_until(lambda s: any("upstream all" in line for line in s), 10, "the filter off again")

        # Tab: the operations table, sorted by RATE/S; S moves the sort one column right (LAST).
        self.tmux.keys("Tab")
        screen = await self.screen_until(lambda s: any("OPERATION" in line and "STATE" in line for line in s), 10, "the operations table")
        self.assertRegex("\n".join(screen), MARK + "RATE/S")
        self.assertRegex("\n".join(screen), r"OPERATIONS \d+")
        self.tmux.keys("S")
        await self.screen_until(lambda s: any(re.search(MARK + "LAST", line) for line in s), 10, "the sort moved to LAST")
        self.tmux.keys("r")
        self.tmux.keys("c")
        await self.screen_until(lambda s: any(re.search(MARK + "QUEUED", line) for line in s), 10, "back to the clients table")

        # q: the main screen again (the line printed before top), and exit status 0.
        self.tmux.keys("q")
        def status() -> str:
            try:
                with open(status_file) as f:
                    return f.read().strip()
            except FileNotFoundError:
                return ""
        await wait_for(lambda: status() != "", 10, "top exiting on q")
        self.assertEqual(status(), "0", "top's exit status")
        screen = self.tmux.screen(history=True)
        text = "\n".join(screen)
        self.assertIn("before top", text, "the alternate screen was left")
        self.assertNotIn("QUEUED", text)
        self.assertFalse(any(line.startswith("gqlmuxd ") for line in screen), text)

        # Ctrl-C: the same, with the status of an interrupted program (130), and the terminal's
        # settings as they were (stty's report before and after is the same).
        self.tmux.kill()
        interrupted = os.path.join(self.daemon.directory, "top-interrupted")
        self.tmux.start(f"stty -a > {interrupted}.before; env LANG=C.UTF-8 {os.path.join(BIN, 'gqlmuxctl')} top "
                        f"--socket {self.daemon.socket}; echo $? > {interrupted}; stty -a > {interrupted}.after", 100, 30)
        await self.screen_until(lambda s: any(re.search(MARK + "QUEUED", line) for line in s), 20, "top again")
        self.tmux.keys("C-c")
        await wait_for(lambda: os.path.exists(interrupted + ".after") and os.path.getsize(interrupted + ".after") > 0, 10, "top ending on Ctrl-C")
        with open(interrupted) as f:
            self.assertEqual(f.read().strip(), "130", "top's exit status on Ctrl-C")
        with open(interrupted + ".before") as before, open(interrupted + ".after") as after:
            self.assertEqual(before.read(), after.read(), "the terminal's settings after Ctrl-C")
        self.assertFalse(any(line.startswith("gqlmuxd ") for line in self.tmux.screen()), "the alternate screen was left")


if __name__ == "__main__":
    unittest.main()
