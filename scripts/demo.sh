#!/usr/bin/env bash
# The first command for newcomers, in under a minute: three apps subscribe to the same
# subscription through ONE gqlmuxd, which keeps ONE upstream connection; the upstream server is
# killed and restarted, and every app prints `state: reconnecting`, `state: active`, and its
# ticks go on; then a query.
#   scripts/demo.sh                  the show, then the apps keep printing until Ctrl-C
#   DEMO_COUNT=N scripts/demo.sh     non-interactive: stops once each app has N ticks after the
#                                    restart, and exits 1 if any app missed a state or a tick
#   GQLMUX_BIN_DIR=DIR               use binaries already built there (the tests do)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n ${GQLMUX_BIN_DIR:-} ]]; then
    bin=$GQLMUX_BIN_DIR
else
    scripts/prerequisites.sh build
    echo "==> swift build (the first build takes a few minutes)"
    swift build --product gqlmuxd
    swift build --product gqlmuxctl
    swift build --product gqlmux-test-upstream
    bin=$(swift build --show-bin-path)
fi

work=$(mktemp -d /tmp/gqlmux-demo.XXXXXX)
pids=()
upstream_pid=
cleanup() {
    for pid in "${pids[@]}" $upstream_pid; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}" $upstream_pid; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -t 1 ]]; then
    say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
else
    say() { printf '\n==> %s\n' "$*"; }
fi
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.1 s
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq $((seconds * 10))); do "$@" && return 0; sleep 0.1; done
    echo "demo: timed out after ${seconds}s waiting for $what" >&2
    return 1
}

start_upstream() {  # start_upstream PORT (0: any free port)
    : >"$work/upstream.log"
    "$bin/gqlmux-test-upstream" "$1" 500 >>"$work/upstream.log" 2>&1 &
    upstream_pid=$!
    wait_for 10 "the test upstream" grep -q "listening on" "$work/upstream.log"
}

say "a test GraphQL server (graphql-transport-ws; subscription { tick } ticks twice a second)"
start_upstream 0
url=$(grep -o 'ws://[^ ]*' "$work/upstream.log")
port=${url#ws://127.0.0.1:}
port=${port%%/*}
echo "    $url"

say "gqlmuxd on $work/gqlmux.sock"
cat >"$work/gqlmuxd.toml" <<TOML
[upstream]
url = "$url"
client_name = "gqlmux-demo"
reconnect_interval = 0.25
reconnect_max_interval = 1

[socket]
path = "$work/gqlmux.sock"
TOML
"$bin/gqlmuxd" --config "$work/gqlmuxd.toml" 2>"$work/gqlmuxd.log" &
pids+=($!)
wait_for 10 "gqlmuxd's socket" test -S "$work/gqlmux.sock"
export GQLMUX_SOCKET="$work/gqlmux.sock"

say "three apps subscribe to the same subscription:  gqlmuxctl subscribe 'subscription { tick }'"
for app in 1 2 3; do
    # Each app's results (stdout) and states (stderr), prefixed with its name.
    "$bin/gqlmuxctl" subscribe 'subscription { tick }' > >(sed -u "s/^/    app$app | /" | tee "$work/app$app.log") 2>&1 &
    pids+=($!)
done
ticks() {
    local n
    n=$(grep -c '"tick"' "$work/app$1.log" 2>/dev/null) || true
    echo "${n:-0}"
}
each_app() { for app in 1 2 3; do "$@" "$app" || return 1; done; }
has_ticks() { (($(ticks "$2") >= $1)); }
has_2_ticks() { has_ticks 2 "$1"; }
wait_for 15 "each app's first ticks" each_app has_2_ticks

say "gqlmuxctl status: 3 local subscriptions share 1 upstream subscription"
"$bin/gqlmuxctl" status | sed 's/^/    /'

say "killing the upstream server (SIGKILL): every app is told it is reconnecting"
kill -KILL "$upstream_pid"
wait "$upstream_pid" 2>/dev/null || true
upstream_pid=
reconnecting() { grep -q 'state: reconnecting' "$work/app$1.log" 2>/dev/null; }
wait_for 10 "state: reconnecting in every app" each_app reconnecting
sleep 1

say "restarting the upstream server on the same port: gqlmuxd reconnects and re-subscribes"
for app in 1 2 3; do ticks "$app" >"$work/app$app.before"; done
start_upstream "$port"
active_again() { (($(sed -n '/state: reconnecting/,$p' "$work/app$1.log" | grep -c 'state: active') > 0)); }
wait_for 15 "state: active again in every app" each_app active_again
ticks_after() { (($(ticks "$2") - $(cat "$work/app$2.before") >= $1)); }
has_1_tick_after() { ticks_after 1 "$1"; }
wait_for 15 "ticks after the restart" each_app has_1_tick_after

say "a query goes through the same connection:  gqlmuxctl query '{ hello }'"
"$bin/gqlmuxctl" query '{ hello }' | sed 's/^/    /'

if [[ -n ${DEMO_COUNT:-} ]]; then
    has_count_after() { ticks_after "$DEMO_COUNT" "$1"; }
    wait_for 30 "$DEMO_COUNT ticks after the restart in every app" each_app has_count_after
    say "demo done: 3 apps, 1 upstream connection, 1 restart survived (daemon log: gqlmuxd.log)"
    exit 0
fi
say "the apps keep printing; Ctrl-C stops everything (daemon log: $work/gqlmuxd.log)"
wait "${pids[1]}"
