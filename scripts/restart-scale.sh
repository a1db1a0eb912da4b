#!/usr/bin/env bash
# The online restart at scale, under real systemd in systemd-nspawn: CLIENTS line-protocol
# clients holding SUBS distinct subscriptions each (10,000 with the defaults) carried by
# RESTARTS `systemctl restart`s. Prints the restart probe's table (time from the restart until
# every subscription receives again; gqlmuxd's descriptors and RSS before and after) and the
# handover's own journal events (how long each side took).
#   scripts/restart-scale.sh [CLIENTS [SUBS [RESTARTS]]]     (root; builds the release binaries)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-1000} subs=${2:-10} restarts=${3:-3}
scripts/prerequisites.sh test
swift build -c release --product gqlmuxd >&2
swift build -c release --product gqlmux-bench >&2
swift build -c release --product gqlmux-test-upstream >&2
swift build -c release --product gqlmuxctl >&2
bin=$(swift build -c release --show-bin-path)
out=$(mktemp -d /tmp/gqlmux-scale.XXXXXX)
echo "$clients $subs $restarts" >"$out/params"
# Ticks every 2 s: 10,000 subscriptions are 5,000 results a second through gqlmuxd.
GQLMUX_E2E_INSIDE=restart-scale-inside.sh GQLMUX_E2E_TICK_MS=2000 GQLMUX_E2E_LOG_LEVEL=info scripts/nspawn-e2e.sh "$out" "$bin"
cat "$out/restart-probe.txt"
python3 - "$out/journal.json" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
def at(e): return int(e["__REALTIME_TIMESTAMP"]) / 1e6
marks = [(at(e), e.get("GQLMUX_EVENT"), e) for e in events if e.get("GQLMUX_EVENT") in ("stopping", "handed_over", "started", "adopted")]
stop = None
for t, name, e in marks:
    if name == "stopping": stop = t
    if name == "handed_over" and stop:
        print(f"handed over {e.get('GQLMUX_CLIENTS')} clients, {e.get('GQLMUX_SUBSCRIPTIONS')} subscriptions: {t - stop:.3f} s after SIGTERM")
    if name == "adopted" and stop:
        print(f"adopted {e.get('GQLMUX_CLIENTS')} clients, {e.get('GQLMUX_SUBSCRIPTIONS')} subscriptions: {t - stop:.3f} s after SIGTERM "
              f"(adoption itself {e.get('GQLMUX_DURATION_MS')} ms)")
    if name == "started" and stop:
        print(f"next gqlmuxd started {t - stop:.3f} s after SIGTERM")
PY
[ "$(cat "$out/restart-probe.rc")" = 0 ]
