"""The mixed soak: online restarts, upstream outages and reloads interleaved, for SECONDS, under
clients of every kind (line protocol; gql's legacy graphql-ws client with its 30 s `ka` check
and its graphql-transport-ws client pinging; raw WebSockets; SSE and multipart streams; on the
Unix socket and the TCP port), against strawberry and the real gqlmuxd, with the fd-store
stand-in (interop/fdstore.py) playing systemd. A benchmark-style program: it prints a summary
and exits non-zero if a subscription was lost (a client closed, or not receiving again within
20 s of an event), or gqlmuxd's descriptors (less its clients) changed, or its RSS grew by more
than 10 % and 4 MiB from the first quarter of the run to the last, or it saw a kind of event
fewer than 5 times. The events come in shuffled rounds (each round: two restarts, an outage, a
reload, a restart during an outage), so every kind recurs at an even pace; a run goes on past
SECONDS (up to three times it) until each kind has been seen 5 times.

    .venv-interop/bin/python -m interop.restart_soak [SECONDS]     (default 150)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time

from interop.fdstore import FDStore
from interop.harness import BIN, Server, endpoint_daemon, held_port, outage
from interop.kinds import GQLClient, Line, RawWebSocket, Stream, wait_for

# Each kind of event at least this many times in a run (a shorter run goes on until it has them).
MIN_EACH = 5


def status(daemon) -> dict:
    out = subprocess.run([os.path.join(BIN, "gqlmuxctl"), "status", "--json", "--socket", daemon.socket],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    return json.loads(out)


def descriptors(daemon) -> tuple:
    """gqlmuxd's open descriptors less its clients, and what they are."""
    info = status(daemon)
    folder = f"/proc/{daemon.process.pid}/fd"
    listing = []
    for fd in os.listdir(folder):
        try:
            listing.append(os.readlink(os.path.join(folder, fd)))
        except OSError:
            pass
    kinds = {}
    for target in listing:
        kind = target.split(":")[0] if ":" in target else target
        kinds[kind] = kinds.get(kind, 0) + 1
    return len(listing) - info["clients"], kinds


async def soak(seconds: float) -> int:
    rng = random.Random(int(os.environ.get("GQLMUX_SOAK_SEED", "33")))
    server = Server("interop.strawberry_app:app", protocols="http")
    server.start()
    port = held_port()
    daemon = endpoint_daemon(server, listen=f"127.0.0.1:{port}")
    store = FDStore(daemon.directory)
    daemon.start(store=store)
    unix = os.path.join(daemon.directory, "graphql.sock")
    tcp = f"ws://127.0.0.1:{port}/graphql"
    clients = []
    for i in range(4):
        clients.append(Line(daemon.socket, interval_ms=100 + i))
    clients += [
        GQLClient("graphql-ws", "ws://localhost/graphql", unix=unix, interval_ms=200, keep_alive_timeout=30),
        GQLClient("graphql-ws", tcp, interval_ms=201, keep_alive_timeout=30),
        GQLClient("graphql-transport-ws", tcp, interval_ms=202, ping_interval=10),
        RawWebSocket("graphql-transport-ws", "ws://localhost/graphql", unix=unix, interval_ms=203),
        RawWebSocket("graphql-ws", tcp, interval_ms=204),
        Stream("sse", unix=unix, interval_ms=205),
        Stream("sse", port=port, interval_ms=205),
        Stream("multipart", unix=unix, interval_ms=206),
        Stream("multipart", port=port, interval_ms=206),
    ]
    events = {"restart": 0, "outage": 0, "reload": 0, "restart during outage": 0}
    recoveries = {name: [] for name in events}
    samples = []
    failures = []
    began = time.monotonic()
    try:
        for client in clients:
            client.start()
        await wait_for(lambda: all(c.results > 0 for c in clients), 30, "every client receiving")
        baseline_fds = None
        deck: list[str] = []

        def enough() -> bool:
            return min(events.values()) >= MIN_EACH

        while not failures and (time.monotonic() - began < seconds or (not enough() and time.monotonic() - began < 3 * seconds)):
            if not deck:
                deck = ["restart", "restart", "outage", "reload", "restart during outage"]
                rng.shuffle(deck)
            kind = deck.pop()
            counts = [c.results for c in clients]
            start = time.monotonic()
            if kind in ("restart", "restart during outage"):
                if kind == "restart during outage":
                    server.kill()
                    await asyncio.sleep(0.5)
                daemon.process.send_signal(signal.SIGTERM)
                code = await asyncio.get_running_loop().run_in_executor(None, daemon.process.wait, 20)
                if code != 0:
                    failures.append(f"gqlmuxd exited {code} at a restart")
                    break
                daemon.start(store=store)
                if kind == "restart during outage":
                    await asyncio.sleep(rng.uniform(0.2, 1.5))
                    server.start()
            elif kind == "outage":
                await outage(server, rng.choice(["close", "abort", "kill"]))
            else:
                with open(daemon.config, "a") as f:
                    f.write(f"# reload {events['reload']}\n")
                daemon.process.send_signal(signal.SIGHUP)
            events[kind] += 1
            try:
                await wait_for(lambda: all(c.results > n for c, n in zip(clients, counts)), 20, f"every client receiving after {kind}")
            except AssertionError as error:
                failures.append(str(error) + ": " + ", ".join(c.name for c, n in zip(clients, counts) if c.results <= n))
            recoveries[kind].append(time.monotonic() - start)
            ended = [f"{c.name}: {c.ended}" for c in clients if c.ended]
            if ended:
                failures.append(f"closed after {kind}: {ended}")
            fds, listing = descriptors(daemon)
            baseline_fds = fds if baseline_fds is None else baseline_fds
            if fds != baseline_fds:
                await asyncio.sleep(2)  # something in passing (a connection closing) settles
                fds, listing = descriptors(daemon)
            if fds != baseline_fds:
                failures.append(f"descriptors less clients {baseline_fds} → {fds} after {kind}: {listing}")
            samples.append((time.monotonic() - began, daemon.rss_kib(), fds))
            await asyncio.sleep(rng.uniform(0.5, 2.0))
    finally:
        lost = [f"{c.name}: {c.ended}" for c in clients if c.ended]
        for client in clients:
            await client.close()
        log = daemon.log()
        daemon.stop()
        store.close()
        server.stop()

    elapsed = time.monotonic() - began
    few = [f"{name} {count}×" for name, count in events.items() if count < MIN_EACH]
    if few and not failures:
        failures.append(f"each kind of event at least {MIN_EACH} times, but: {', '.join(few)}")
    quarter = max(1, len(samples) // 4)
    early = max(s[1] for s in samples[:quarter]) if samples else 0
    late = max(s[1] for s in samples[-quarter:]) if samples else 0
    if late > early * 1.10 and late - early > 4096:
        failures.append(f"RSS grew {early} → {late} KiB")
    print(f"mixed soak, {elapsed:.0f} s, {len(clients)} clients of every kind (line ×4, gql graphql-ws ×2 with ka checks, "
          f"gql graphql-transport-ws pinging, raw WebSocket ×2, SSE ×2, multipart ×2; Unix socket and TCP port):")
    for name, times in recoveries.items():
        if times:
            times = sorted(times)
            print(f"  {name:<22} {len(times):>3}×  every client receiving again after p50 {times[len(times) // 2]:.2f} s, max {times[-1]:.2f} s")
    print(f"  subscriptions lost: {len(lost)}; clients closed: {len(lost)}{' (' + '; '.join(lost) + ')' if lost else ''}")
    if samples:
        print(f"  gqlmuxd RSS first quarter max {early} KiB, last quarter max {late} KiB; descriptors less clients "
              f"{samples[0][2]} → {samples[-1][2]} over {len(samples)} samples")
    if failures:
        print("FAILED: " + "; ".join(failures[:5]))
        print(log[-3000:])
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(soak(float(sys.argv[1]) if len(sys.argv) > 1 else 150)))
