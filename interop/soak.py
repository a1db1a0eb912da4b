"""The outage soak: many upstream outages in a row under 100 distinct subscriptions against
strawberry, with the real gqlmuxd. A benchmark-style program: it prints its figures and exits
non-zero if a stream was lost, an outage was not resumed by all 100, the p99 time to
all-resumed after a close or a drop exceeded 2 s, a server restart took over 10 s to be
resumed, or gqlmuxd's RSS grew by 5 MiB or more.

Each outage is, in turn, a 1012 close or a drop without a close frame of every WebSocket by the
server; every 30th (every (OUTAGES ÷ 5)th in a shorter soak, so that there are 5: every 12th of 60) is a
SIGKILL and restart of the server. The next outage comes as soon as all 100 have resumed (told
`reconnecting`, then `active`, then a result): right after the re-subscribes, as in a rolling
deploy. The time to all-resumed is judged apart for the restarts: theirs includes starting a
Python server process, which says nothing of gqlmuxd and would decide the p99 of a short soak.

    python3 -m interop.soak [OUTAGES]        (default 200; GQLMUX_BIN_DIR picks gqlmuxd)
"""

from __future__ import annotations

import asyncio
import sys
import time

from interop.harness import Daemon, Server, Subscribers, daemon_settings, outage, percentile


async def soak(outages: int) -> int:
    server = Server("interop.strawberry_app:app")
    server.start()
    daemon = Daemon(server.url, daemon_settings())
    daemon.start()
    subscribers = Subscribers(clients=10, per_client=10, interval_ms=100)
    failures = []
    durations = []
    restarts = []
    kinds = {"close": 0, "abort": 0, "kill": 0}
    kill_every = min(30, max(2, outages // 5))
    began = time.monotonic()
    try:
        await subscribers.subscribe(daemon.socket)
        await subscribers.wait(lambda: subscribers.active() == 100, 10, "100 subscriptions active")
        await subscribers.wait(lambda: subscribers.streaming_since(0) == 100, 10, "100 subscriptions streaming")
        rss_start = daemon.rss_kib()
        for n in range(outages):
            kind = "kill" if n % kill_every == kill_every - 1 else ("close" if n % 2 == 0 else "abort")
            kinds[kind] += 1
            started = time.monotonic()
            await outage(server, kind)
            try:
                resumed = await subscribers.wait_all_resumed(started, 15)
            except AssertionError as error:
                failures.append(f"outage {n + 1} ({kind}): {error}")
                break
            (restarts if kind == "kill" else durations).append(resumed - started)
            errors = subscribers.errors()
            if errors:
                failures.append(f"outage {n + 1} ({kind}): a subscription ended: {errors[0]}")
                break
            if n % 50 == 49:
                print(f"  {n + 1} outages, p99 so far {percentile(durations, 99):.2f}s", flush=True)
        last = time.monotonic()
        try:
            await subscribers.wait(lambda: subscribers.streaming_since(last) == 100, 10, "all 100 streaming at the end")
        except AssertionError as error:
            failures.append(str(error))
        rss_end = daemon.rss_kib()
    finally:
        await subscribers.close()
        quarantined = daemon.log().count("quarantined")
        daemon.stop()
        server.stop()
    growth = (rss_end - rss_start) / 1024
    p50, p99 = (percentile(durations, 50), percentile(durations, 99)) if durations else (float("nan"), float("nan"))
    print(f"outage soak against strawberry: {len(durations) + len(restarts)} of {outages} outages resumed by all 100 subscriptions "
          f"({kinds['close']} closes 1012, {kinds['abort']} drops without a close frame, {kinds['kill']} SIGKILL restarts) "
          f"in {time.monotonic() - began:.0f}s")
    print(f"  time to all-resumed after a close or a drop ({len(durations)}): p50 {p50:.2f}s, p99 {p99:.2f}s, max {max(durations, default=float('nan')):.2f}s")
    print(f"  time to all-resumed after a server restart ({len(restarts)}): " + ", ".join(f"{d:.2f}s" for d in restarts))
    print(f"  gqlmuxd RSS {rss_start / 1024:.1f} MiB -> {rss_end / 1024:.1f} MiB (growth {growth:+.1f} MiB)")
    print(f"  subscriptions lost: {len(subscribers.errors())}; quarantined: {quarantined}")
    if durations and p99 > 2.0:
        failures.append(f"p99 time to all-resumed after a close or a drop {p99:.2f}s is over 2 s")
    if restarts and max(restarts) > 10.0:
        failures.append(f"a server restart took {max(restarts):.2f}s to be resumed by all 100 (limit 10 s)")
    if growth >= 5:
        failures.append(f"RSS grew by {growth:.1f} MiB (limit 5 MiB)")
    if len(durations) + len(restarts) < outages:
        failures.append(f"only {len(durations) + len(restarts)} of {outages} outages resumed")
    for failure in failures:
        print("FAIL:", failure)
    print("soak: 1 passed, 0 failed" if not failures else "soak: 0 passed, 1 failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(soak(int(sys.argv[1]) if len(sys.argv) > 1 else 200)))
