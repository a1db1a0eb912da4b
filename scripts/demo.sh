#!/usr/bin/env bash
# The first command for newcomers: builds gqlmux, starts the project's own test upstream
# (a graphql-transport-ws server ticking every second), starts gqlmuxd on a temporary
# socket, and subscribes with gqlmuxctl. Ctrl-C stops and removes everything.
#   DEMO_COUNT=N scripts/demo.sh   stops after N events (non-interactive runs).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/prerequisites.sh build
echo "==> building (the first build takes a few minutes)"
swift build --product gqlmuxd >&2
swift build --product gqlmuxctl >&2
swift build --product gqlmux-test-upstream >&2
bin=$(swift build --show-bin-path)

work=$(mktemp -d /tmp/gqlmux-demo.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin/gqlmux-test-upstream" 0 1000 >"$work/upstream.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/upstream.log" && break; sleep 0.1; done
url=$(grep -o 'ws://[^ ]*' "$work/upstream.log")
echo "==> test upstream: $url"

cat >"$work/gqlmuxd.toml" <<TOML
[upstream]
url = "$url"
client_name = "gqlmux-demo"

[socket]
path = "$work/gqlmux.sock"
TOML
"$bin/gqlmuxd" --config "$work/gqlmuxd.toml" 2>"$work/gqlmuxd.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/gqlmux.sock" ] && break; sleep 0.1; done
export GQLMUX_SOCKET="$work/gqlmux.sock"
sleep 0.5

echo "==> gqlmuxctl status"
"$bin/gqlmuxctl" status
echo "==> gqlmuxctl subscribe 'subscription { tick }'   (Ctrl-C to stop; daemon log: $work/gqlmuxd.log)"
count_args=()
[ -n "${DEMO_COUNT:-}" ] && count_args=(--count "$DEMO_COUNT")
"$bin/gqlmuxctl" subscribe 'subscription { tick }' "${count_args[@]}"
