#!/usr/bin/env bash
# Run by SystemdTests inside `unshare -m --propagation private`: a real systemd-journald on a
# private /run, gqlmuxd logging natively to it, and the entries read back with journalctl.
#   journald-test.sh OUT_DIR CONFIG SOCKET BIN_DIR
set -euo pipefail
out=$1 config=$2 sock=$3 bin=$4
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/log/journal
mkdir -p /run/systemd/journal
/lib/systemd/systemd-journald >"$out/journald.log" 2>&1 &
journald=$!
for _ in $(seq 200); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
[ -S /run/systemd/journal/socket ] || { echo "journald did not start" >"$out/error"; exit 1; }

"$bin/gqlmuxd" --config "$config" 2>"$out/gqlmuxd.stderr" &
daemon=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
"$bin/gqlmuxctl" --socket "$sock" subscribe 'subscription { tick }' --count 2 >"$out/subscribe.out" 2>"$out/subscribe.err"
"$bin/gqlmuxctl" --socket "$sock" status >"$out/status.out" 2>&1
# Idle now: wait (at most 10 s) until a client ping has been answered and logged.
for _ in $(seq 100); do [ -n "$(journalctl -q -o cat GQLMUX_EVENT=pong)" ] && break; sleep 0.1; done
kill -TERM "$daemon"
wait "$daemon" || echo "gqlmuxd exit $?" >>"$out/error"
journalctl --sync
journalctl -o json SYSLOG_IDENTIFIER=gqlmuxd >"$out/all.json"
journalctl -o json GQLMUX_EVENT=connected >"$out/connected.json"
journalctl -o verbose SYSLOG_IDENTIFIER=gqlmuxd >"$out/verbose.txt"
kill -KILL "$journald"
echo done >"$out/done"
