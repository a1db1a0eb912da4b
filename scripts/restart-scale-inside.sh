#!/bin/bash
# Runs inside systemd-nspawn for scripts/restart-scale.sh (as gqlmux-e2e.service): one
# `systemctl restart` carrying CLIENTS line-protocol clients with SUBS distinct subscriptions
# each (from /gqlmux-out/params), measured by gqlmux-bench's restart probe.
out=/gqlmux-out
bin=/opt/gqlmux-test/bin
read -r clients subs restarts <"$out/params"
groupadd --system gqlmux
useradd --system --gid gqlmux --no-create-home --shell /usr/sbin/nologin gqlmux
systemctl daemon-reload
systemctl start gqlmux-test-upstream.service
systemctl start gqlmuxd.socket
$bin/gqlmuxctl --socket /run/gqlmux/gqlmux.sock status >/dev/null 2>&1
until [ "$(systemctl is-active gqlmuxd.service)" = active ]; do sleep 0.1; done
# The daemon's descriptors and resident memory, and what the store holds.
fds='pid=$(systemctl show -P MainPID gqlmuxd.service); echo "gqlmuxd $(ls /proc/$pid/fd | wc -l) fds, RSS $(sed -n "s/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p" /proc/$pid/status) KiB, store $(systemctl show -P NFileDescriptorStore gqlmuxd.service)"'
steps=()
for _ in $(seq "$restarts"); do steps+=("systemctl restart gqlmuxd.service"); done
PROBE_SUBSCRIPTIONS=$subs timeout 600 "$bin/gqlmux-bench" - restart-probe /run/gqlmux/gqlmux.sock /run/gqlmux/graphql.sock \
    "$clients" 0 0 "$fds" "${steps[@]}" >"$out/restart-probe.txt" 2>&1
echo $? >"$out/restart-probe.rc"
journalctl -u gqlmuxd.service -o json >"$out/journal.json"
journalctl -u gqlmuxd.service --no-pager >"$out/journal.txt"
systemctl stop gqlmuxd.service gqlmuxd.socket
echo done >"$out/done"
systemctl poweroff --no-block
