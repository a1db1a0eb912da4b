#!/bin/bash
# Runs inside the systemd-nspawn container of SystemdTests (as gqlmux-e2e.service): drives
# the shipped units with systemctl and records what systemd and journald report.
out=/gqlmux-out
bin=/opt/gqlmux-test/bin
ctl="$bin/gqlmuxctl --socket /run/gqlmux/gqlmux.sock"
record() { "$@" >"$out/$name" 2>&1; echo $? >"$out/$name.rc"; }
status_text() { systemctl show -P StatusText gqlmuxd.service >"$out/$1"; }
# Polls (every 0.1 s, at most $1 seconds) until the rest of the line, a shell condition, holds.
# The test checks what was recorded; a slow machine only makes this wait longer.
wait_until() {
    local tries=$(( $1 * 10 )); shift
    for _ in $(seq "$tries"); do eval "$1" && return 0; sleep 0.1; done
    return 1
}
statustext_is() { case "$(systemctl show -P StatusText gqlmuxd.service)" in $1) return 0;; esac; return 1; }
ticks() { wc -l <"$out/subscription.out"; }

# As scripts/install.sh does: the socket's group and the static service user.
groupadd --system gqlmux
useradd --system --gid gqlmux --no-create-home --shell /usr/sbin/nologin gqlmux
systemctl daemon-reload

systemctl start gqlmux-test-upstream.service
name=socket-start.txt record systemctl start gqlmuxd.socket
systemctl is-active gqlmuxd.service >"$out/active-before.txt"
# The GraphQL endpoint's socket comes with it (Wants=, its own job: `systemctl start` returns
# when gqlmuxd.socket's job is done, and the other may still be activating), and both reach
# gqlmuxd by name.
wait_until 5 '[ "$(systemctl is-active gqlmuxd-graphql.socket)" = active ]'
systemctl is-active gqlmuxd-graphql.socket >"$out/graphql-socket-active.txt"
sleep 0.5
name=status-first.json record $ctl status --json
# READY=1 is sent before the first answer, but systemd may read its notify socket a moment
# after the client got that answer: wait (bounded) for it to say active.
wait_until 5 '[ "$(systemctl is-active gqlmuxd.service)" = active ]'
systemctl is-active gqlmuxd.service >"$out/active-after.txt"

$ctl subscribe 'subscription { tick }' >"$out/subscription.out" 2>"$out/subscription.err" &
sub=$!
wait_until 15 'statustext_is "connected*1 subscriptions*" && [ "$(ticks)" -ge 1 ]'
status_text statustext-connected.txt

systemctl kill --signal=SIGKILL gqlmux-test-upstream.service
wait_until 15 'statustext_is "reconnecting in *Connection refused*"'
status_text statustext-upstream-down.txt
systemctl start gqlmux-test-upstream.service
wait_until 15 'statustext_is "connected*"'
status_text statustext-recovered.txt

before=$(ticks)
echo "$before" >"$out/ticks-before-reload.txt"
name=reload.txt record systemctl reload gqlmuxd.service
wait_until 15 '[ "$(ticks)" -gt "$before" ]'
status_text statustext-after-reload.txt
ticks >"$out/ticks-after-reload.txt"
kill $sub
sleep 0.3
systemctl status gqlmuxd.service --no-pager -l >"$out/systemctl-status.txt" 2>&1

# The online restart: 100 line-protocol clients, 100 endpoint WebSockets and 20 endpoint SSE or
# multipart streams across 5 `systemctl restart`s in a row, then `gqlmuxctl restart`; none may be closed, every subscription must receive again
# after each, and no descriptor may leak (the daemon's own, and the store's while running).
fds='echo "gqlmuxd $(ls /proc/$(systemctl show -P MainPID gqlmuxd.service)/fd | wc -l) fds, store $(systemctl show -P NFileDescriptorStore gqlmuxd.service)"'
# And 100 clients of the gql library (both subprotocols) beside them, when its virtualenv is here.
fleet=$out/gql-fleet
mkdir -p "$fleet"
if [ -x /opt/gqlmux-test/venv/bin/python ]; then
    /opt/gqlmux-test/venv/bin/python /opt/gqlmux-test/interop/gql_fleet.py /run/gqlmux/graphql.sock 100 "$fleet" >"$fleet/log" 2>&1 &
    wait_until 60 '[ -f "$fleet/ready" ]'
fi
steps=()
# Five in a row (the package test adds a restart and an upgrade of its own).
for _ in $(seq 5); do steps+=("systemctl restart gqlmuxd.service"); done
# gqlmuxctl restart: the daemon hands over and exits 75; systemd starts it again (RestartSec=).
steps+=("$ctl restart && sleep 0.2 && until [ \"\$(systemctl is-active gqlmuxd.service)\" = active ]; do sleep 0.1; done")
# Chaos: gqlmuxd SIGKILLed once its clients are stored (before its listeners and the barrier),
# after the barrier, and just before it exits; systemd starts the next one from the store. Then a
# second `systemctl restart` 50 ms after the first.
active='until [ "$(systemctl is-active gqlmuxd.service)" = active ]; do sleep 0.1; done'
for step in storing stored exiting; do
    steps+=("echo 'kill $step' >/run/gqlmux/fault && systemctl restart gqlmuxd.service; $active")
done
steps+=("systemctl restart gqlmuxd.service & sleep 0.05; systemctl restart gqlmuxd.service; wait; $active")
timeout 240 "$bin/gqlmux-bench" - restart-probe /run/gqlmux/gqlmux.sock /run/gqlmux/graphql.sock 100 100 20 "$fds" "${steps[@]}" \
    >"$out/restart-probe.txt" 2>&1
echo $? >"$out/restart-probe.rc"
if [ -f "$fleet/ready" ]; then
    touch "$fleet/mark"
    wait_until 40 '[ -f "$fleet/report.json" ]'
fi

systemctl show -P NRestarts gqlmuxd.service >"$out/nrestarts-before-watchdog.txt"
old=$(systemctl show -P MainPID gqlmuxd.service)
[ "${old:-0}" -gt 1 ] && kill -STOP "$old"
for _ in $(seq 150); do
    new=$(systemctl show -P MainPID gqlmuxd.service)
    [ "$new" != "$old" ] && [ "$new" != 0 ] && [ "$(systemctl is-active gqlmuxd.service)" = active ] && break
    sleep 0.1
done
echo "$old ${new:-}" >"$out/watchdog-pids.txt"
systemctl show -P NRestarts gqlmuxd.service >"$out/nrestarts.txt"

# Always back. A plain `systemctl stop; systemctl start` with clients of every kind connected
# over the Unix sockets and the TCP port (whose closed connections then sit in TIME-WAIT): each
# is told SHUTTING_DOWN in its own protocol (when the gql virtualenv is here), and a new client
# on the TCP port is served at once.
ss=$out/stop-start
mkdir -p "$ss"
tcp=http://127.0.0.1:18090/graphql
body='{"query":"subscription { tick }"}'
sse() { curl -sN -X POST -H 'Content-Type: application/json' -H 'Accept: text/event-stream' -d "$body" "$@"; }
if [ -x /opt/gqlmux-test/venv/bin/python ]; then
    (cd /opt/gqlmux-test && venv/bin/python -m interop.stop_start_clients /run/gqlmux/gqlmux.sock /run/gqlmux/graphql.sock 18090 "$ss") \
        >"$ss/log" 2>&1 &
    wait_until 40 '[ -f "$ss/ready" ]'
fi
sse "$tcp" >"$ss/sse-tcp.out" 2>&1 &
sse --unix-socket /run/gqlmux/graphql.sock http://localhost/graphql >"$ss/sse-unix.out" 2>&1 &
$ctl subscribe 'subscription { tick }' >"$ss/line.out" 2>"$ss/line.err" &
wait_until 15 'grep -q "event: next" "$ss/sse-tcp.out" && grep -q "event: next" "$ss/sse-unix.out" && [ -s "$ss/line.out" ]'
systemctl stop gqlmuxd.service
begin=$(date +%s%N)
systemctl start gqlmuxd.service
served=no
for _ in $(seq 100); do
    if sse -m 2 "$tcp" 2>/dev/null | grep -q -m1 "event: next"; then served=yes; break; fi
    sleep 0.05
done
echo "$served $(( ($(date +%s%N) - begin) / 1000000 ))" >"$out/stop-start-served.txt"
[ -f "$ss/ready" ] && wait_until 60 '[ -f "$ss/report.json" ]'
systemctl is-active gqlmuxd.socket gqlmuxd-graphql.socket >"$out/stop-start-sockets.txt"

# A start that keeps failing (another program holds the TCP port) for longer than a start
# limit would allow: the socket units stay listening with their files, and gqlmuxd comes back
# by itself once the port is free.
systemctl stop gqlmuxd.service
systemctl show -P NRestarts gqlmuxd.service >"$out/failing-nrestarts-before.txt"
socat TCP-LISTEN:18090,bind=127.0.0.1,reuseaddr,fork /dev/null &
holder=$!
wait_until 5 'socat -u /dev/null TCP:127.0.0.1:18090 2>/dev/null'
systemctl start --no-block gqlmuxd.service
sleep 9
systemctl show -P NRestarts gqlmuxd.service >"$out/failing-nrestarts.txt"
systemctl is-active gqlmuxd.socket gqlmuxd-graphql.socket >"$out/failing-sockets.txt"
{ [ -S /run/gqlmux/gqlmux.sock ] && [ -S /run/gqlmux/graphql.sock ] && echo present || echo missing; } >"$out/failing-socket-files.txt"
kill "$holder"
wait "$holder" 2>/dev/null
begin=$(date +%s%N)
wait_until 15 '[ "$(systemctl is-active gqlmuxd.service)" = active ] && sse -m 2 "$tcp" 2>/dev/null | grep -q -m1 "event: next"'
echo "$(systemctl is-active gqlmuxd.service) $(( ($(date +%s%N) - begin) / 1000000 ))" >"$out/failing-recovered.txt"

systemctl stop gqlmuxd.service gqlmuxd.socket
systemctl show -P Result gqlmuxd.service >"$out/stop-result.txt"
systemctl show -P ExecMainStatus gqlmuxd.service >"$out/stop-status.txt"
journalctl -u gqlmuxd.service -o json >"$out/journal.json"
journalctl -u gqlmuxd.service -o verbose >"$out/journal-verbose.txt"
journalctl -u gqlmuxd.service --no-pager >"$out/journal.txt"
echo done >"$out/done"
systemctl poweroff --no-block
