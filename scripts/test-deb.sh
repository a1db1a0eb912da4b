#!/usr/bin/env bash
# The Debian package's test: builds it (scripts/build-deb.sh), runs lintian (no error and no
# warning allowed), then boots a clean Debian 12 with systemd in systemd-nspawn (a throw-away
# copy, private network) where it runs `apt-get install ./gqlmux_*.deb`, points the installed
# configuration at a test upstream, starts gqlmuxd.socket, streams a subscription through the
# installed socket, and purges the package, checking that nothing of it is left.
# The clean Debian 12 is scripts/fresh-machine.sh's cached debootstrap root plus systemd,
# cached beside it (never with gqlmux installed).
#   scripts/test-deb.sh [DEB]      (default: build one into .build/deb)      needs root
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
(( EUID == 0 )) || { echo "test-deb.sh needs root (systemd-nspawn)" >&2; exit 1; }
scripts/prerequisites.sh test
for package in lintian dpkg-dev; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >&2
done

deb=${1:-}
if [[ -z $deb ]]; then
    scripts/build-deb.sh .build/deb
    deb=$(ls -t .build/deb/gqlmux_*_amd64.deb | head -1)
fi
deb=$(readlink -f "$deb")
# The same package under a newer version, installed over it while clients are connected.
old_version=$(dpkg-deb -f "$deb" Version)
repack=$(mktemp -d /tmp/gqlmux-deb-upgrade.XXXXXX)
dpkg-deb -R "$deb" "$repack/root"
sed -i "s/^Version: .*/Version: $old_version+upgrade1/" "$repack/root/DEBIAN/control"
dpkg-deb --build "$repack/root" "$repack/gqlmux_${old_version}+upgrade1_amd64.deb" >/dev/null
upgrade=$repack/gqlmux_${old_version}+upgrade1_amd64.deb
echo "==> dpkg-deb -c $(basename "$deb")"
dpkg-deb -c "$deb" | awk '{ printf "    %s %10s %s\n", $1, $3, $6 }'

echo "==> lintian $(basename "$deb")"
# lintian warns when run as root; that line is not about the package.
lintian_out=$(lintian --fail-on error,warning "$deb" 2>&1) && lintian_rc=0 || lintian_rc=$?
lintian_out=$(grep -v 'running with root privileges' <<<"$lintian_out" || true)
echo "${lintian_out:-    (no tags)}"
passed=0
failed=0
check() {  # check DESCRIPTION COMMAND...
    if "${@:2}"; then echo "    ok   $1"; passed=$((passed + 1)); else echo "    FAIL $1"; failed=$((failed + 1)); fi
}
check "lintian reports no error and no warning" test "$lintian_rc" = 0

# The test upstream the installed daemon talks to (not part of the package).
# Built as the package's gqlmuxd is (release, static standard library), so they reuse its build.
scripts/release-build.sh --product gqlmux-test-upstream
scripts/release-build.sh --product gqlmux-bench
bin=$(swift build -c release --show-bin-path)

system=$(scripts/systemd-root.sh)

work=$(mktemp -d /tmp/gqlmux-deb-test.XXXXXX)
trap 'rm -rf "$work" "$repack"' EXIT
mkdir -p "$work/units/multi-user.target.wants" "$work/out" "$work/in"
cp "$deb" "$work/in/"
mkdir -p "$work/in/upgrade"
cp "$upgrade" "$work/in/upgrade/"
cat >"$work/units/gqlmux-test-upstream.service" <<UNIT
[Unit]
Description=gqlmux test upstream for the package test
[Service]
ExecStart=/opt/gqlmux-test/bin/gqlmux-test-upstream 18081 100
UNIT
cat >"$work/units/gqlmux-deb-test.service" <<UNIT
[Unit]
Description=gqlmux package test
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/bin/bash /gqlmux-in/inside.sh
UNIT
ln -s ../gqlmux-deb-test.service "$work/units/multi-user.target.wants/gqlmux-deb-test.service"
cat >"$work/in/inside.sh" <<'INSIDE'
#!/bin/bash
# Inside the container, as root under systemd: install, use, purge. Results go to /gqlmux-out.
out=/gqlmux-out
exec >"$out/log.txt" 2>&1
set -x
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends /gqlmux-in/gqlmux_*.deb; echo $? >"$out/install.rc"
dpkg -s gqlmux | sed -n 's/^Status: //p' >"$out/status-installed.txt"
getent passwd gqlmux >"$out/user.txt"
stat -c '%a %U:%G' /etc/gqlmux/gqlmuxd.toml >"$out/config-mode.txt"
stat -c '%a %U:%G' /etc/gqlmux/token.json >"$out/token-mode.txt"
systemctl is-enabled gqlmuxd.socket >"$out/socket-enabled.txt" 2>&1
man -w gqlmuxd gqlmuxctl >"$out/man.txt" 2>&1
# The admin's edit: point the installed configuration at the test upstream.
sed -i 's#^url = .*#url = "ws://127.0.0.1:18081/graphql"#' /etc/gqlmux/gqlmuxd.toml
systemctl start gqlmux-test-upstream.service
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18081) 2>/dev/null && break; sleep 0.1; done
systemctl restart gqlmuxd.socket
timeout 30 gqlmuxctl subscribe 'subscription { tick }' --count 3 >"$out/subscription.txt" 2>"$out/subscription.err"
echo $? >"$out/subscription.rc"
systemctl is-active gqlmuxd.service >"$out/service-active.txt"
gqlmuxctl status >"$out/status.txt" 2>&1
# Secrets as docs/secrets.md says, each way rotated under a subscriber that must not be closed:
# (1) a file in /etc/gqlmux only the service's user reads (gqlmux:root 0600; the members of group
#     gqlmux, who may use the socket, may not): install the new one, then
#     `systemctl reload gqlmuxd`; (2) the LoadCredential= copy in /run/credentials: replace
#     /etc/gqlmux/token.json, then `systemctl restart gqlmuxd` (systemd 252 copies credentials only
#     when the service starts; the restart is online). The test upstream prints each connection_init.
inits() { journalctl -u gqlmux-test-upstream.service -o cat --no-pager | grep '^connection_init' || true; }
wait_init() {  # wait_init TEXT: a connection_init carrying TEXT reaches the upstream within 15 s
    for _ in $(seq 150); do inits | tail -1 | grep -q "$1" && return 0; sleep 0.1; done
    return 1
}
rotate_token() {  # as docs/secrets.md says: install to a temporary name, then rename over the old
    install -o gqlmux -g root -m 0600 /tmp/token.json /etc/gqlmux/.token.json.new
    mv -f /etc/gqlmux/.token.json.new /etc/gqlmux/token.json
}
ticks_of() { grep -c '"tick"' "$out/rotation-ticks.txt" || true; }
more_ticks() {  # more_ticks: the subscriber receives 5 more results within 15 s
    local before; before=$(ticks_of)
    for _ in $(seq 150); do (( $(ticks_of) >= before + 5 )) && return 0; sleep 0.1; done
    return 1
}
# (The first connecting_payload_file line is [upstream]'s; a later one is an example of another section.)
sed -i '0,/^\(# \)\?connecting_payload_file = .*/s##connecting_payload_file = "/etc/gqlmux/token.json"#' /etc/gqlmux/gqlmuxd.toml
printf '{"token":"rotation-one"}\n' >/tmp/token.json
rotate_token
systemctl reload gqlmuxd.service
gqlmuxctl subscribe 'subscription { tick }' >"$out/rotation-ticks.txt" 2>"$out/rotation-ticks.err" &
subscriber=$!
{
    set +x
    wait_init rotation-one && more_ticks && echo "one: the upstream saw rotation-one"
    printf '{"token":"rotation-two"}\n' >/tmp/token.json
    rotate_token
    gqlmuxctl reload
    wait_init rotation-two && more_ticks && echo "two: after install, mv and gqlmuxctl reload, the upstream saw rotation-two"
    sed -i 's#^connecting_payload_file = .*#connecting_payload_file = "/run/credentials/gqlmuxd.service/token.json"#' /etc/gqlmux/gqlmuxd.toml
    printf '{"token":"rotation-three"}\n' >/tmp/token.json
    rotate_token
    systemctl reload gqlmuxd.service
    wait_init ': {}$' && more_ticks && echo "three: a reload reads the LoadCredential copy systemd made when the service started ({}), not rotation-three"
    systemctl restart gqlmuxd.service
    wait_init rotation-three && more_ticks && echo "four: after systemctl restart, the upstream saw rotation-three"
    kill -0 "$subscriber" && ! grep -q error "$out/rotation-ticks.err" \
        && echo "five: the subscriber was never closed and told no error ($(ticks_of) results)"
    set -x
} >"$out/rotation.txt" 2>&1
kill "$subscriber" 2>/dev/null
inits >"$out/rotation-inits.txt"
# gqlmuxd's user owns its configuration and token, yet inside the service (its mount namespace,
# its uid and groups) neither can be written: all of /etc is read-only there.
main=$(systemctl show -P MainPID gqlmuxd.service)
for file in /etc/gqlmux/gqlmuxd.toml /etc/gqlmux/token.json; do
    if nsenter -t "$main" -m -S "$(id -u gqlmux)" -G "$(id -g gqlmux)" sh -c "echo >>$file" 2>>"$out/service-write.err"; then
        echo "$file" >>"$out/service-wrote.txt"
    fi
done
nsenter -t "$main" -m -S "$(id -u gqlmux)" -G "$(id -g gqlmux)" cat /etc/gqlmux/token.json >"$out/service-read.txt" 2>&1
touch "$out/service-wrote.txt"
# The online restart across `systemctl restart` and an install of the newer package over this
# one (its postinst restarts gqlmuxd): 100 line-protocol clients, 100 endpoint WebSockets and
# 20 endpoint SSE or multipart streams stay connected, and every subscription receives again.
fds='echo "gqlmuxd $(ls /proc/$(systemctl show -P MainPID gqlmuxd.service)/fd | wc -l) fds, store $(systemctl show -P NFileDescriptorStore gqlmuxd.service)"'
timeout 180 /opt/gqlmux-test/bin/gqlmux-bench - restart-probe /run/gqlmux/gqlmux.sock /run/gqlmux/graphql.sock 100 100 20 "$fds" \
    "systemctl restart gqlmuxd.service" "apt-get install -y --no-install-recommends /gqlmux-in/upgrade/gqlmux_*.deb >/dev/null" \
    >"$out/upgrade-probe.txt" 2>&1
echo $? >"$out/upgrade-probe.rc"
dpkg-query -W -f='${Version}' gqlmux >"$out/version-after-upgrade.txt"
journalctl -u gqlmuxd.service -x --no-pager >"$out/journal.txt" 2>&1
apt-get purge -y gqlmux; echo $? >"$out/purge.rc"
dpkg -s gqlmux >/dev/null 2>&1; echo $? >"$out/dpkg-s-after.rc"
for path in /usr/sbin/gqlmuxd /usr/bin/gqlmuxctl /lib/systemd/system/gqlmuxd.service /lib/systemd/system/gqlmuxd.socket \
    /etc/gqlmux /usr/lib/systemd/catalog/gqlmuxd.catalog /usr/share/man/man8/gqlmuxd.8.gz; do
    [ -e "$path" ] && echo "$path" >>"$out/left-behind.txt"
done
touch "$out/left-behind.txt"
systemctl is-active gqlmuxd.socket >"$out/socket-after.txt" 2>&1
echo done >"$out/done"
systemctl poweroff --no-block
INSIDE

echo "==> systemd-nspawn: apt-get install, start gqlmuxd.socket, subscribe, purge"
# --ephemeral: a throw-away copy of the clean system, so each run starts without gqlmux.
timeout 240 systemd-nspawn --quiet --register=no --keep-unit -D "$system" --ephemeral --private-network \
    --bind-ro=/opt/swift --bind-ro="$bin":/opt/gqlmux-test/bin \
    --bind="$work/units":/run/systemd/system --bind-ro="$work/in":/gqlmux-in --bind="$work/out":/gqlmux-out \
    -b systemd.mask=systemd-firstboot.service >"$work/nspawn.log" 2>&1 || echo "nspawn exit $?" >>"$work/nspawn.log"

o=$work/out
read_file() { cat "$o/$1" 2>/dev/null || true; }
if [[ $(read_file done) != done ]]; then
    echo "the container did not finish; nspawn log:" >&2
    tail -40 "$work/nspawn.log" >&2
    tail -40 "$o/log.txt" >&2 2>/dev/null || true
    exit 1
fi
check "apt-get install ./$(basename "$deb")" test "$(read_file install.rc)" = 0
check "dpkg says installed" test "$(read_file status-installed.txt)" = "install ok installed"
check "sysusers made the user gqlmux" grep -q '^gqlmux:' "$o/user.txt"
check "/etc/gqlmux/gqlmuxd.toml is 600 gqlmux:root (the service reads it, socket users may not)" test "$(read_file config-mode.txt)" = "600 gqlmux:root"
check "gqlmuxd.socket is enabled" test "$(read_file socket-enabled.txt)" = enabled
check "man pages gqlmuxd(8) and gqlmuxctl(1)" grep -q 'man8/gqlmuxd.8.gz' "$o/man.txt"
check "a subscription streams through /run/gqlmux/gqlmux.sock" test "$(read_file subscription.rc)" = 0 -a "$(grep -c '"tick"' "$o/subscription.txt")" = 3
check "gqlmuxd.service was started by its socket" test "$(read_file service-active.txt)" = active
check "journalctl -x explains events with the catalog" grep -q "Subject: gqlmuxd started" "$o/journal.txt"
check "token rotation: a file in /etc/gqlmux, install, mv and gqlmuxctl or systemctl reload; the LoadCredential copy, systemctl restart; the subscriber kept" \
    test "$(grep -c '^\(one\|two\|three\|four\|five\):' "$o/rotation.txt")" = 5
check "inside the service its user reads token.json and can write neither it nor gqlmuxd.toml" \
    test ! -s "$o/service-wrote.txt" -a "$(grep -c rotation-three "$o/service-read.txt")" = 1
check "tmpfiles made /etc/gqlmux/token.json 600 gqlmux:root (the service reads it, socket users may not)" test "$(read_file token-mode.txt)" = "600 gqlmux:root"
check "no client closed across systemctl restart and an upgrade to $old_version+upgrade1 (100 line, 100 WebSocket, 20 SSE/multipart)" \
    test "$(read_file upgrade-probe.rc)" = 0
check "the newer package is installed" test "$(read_file version-after-upgrade.txt)" = "$old_version+upgrade1"
check "apt-get purge gqlmux" test "$(read_file purge.rc)" = 0
check "dpkg no longer knows gqlmux" test "$(read_file dpkg-s-after.rc)" != 0
check "nothing of the package is left" test ! -s "$o/left-behind.txt"
echo "    subscription: $(tr '\n' ' ' <"$o/subscription.txt")"
sed 's/^/    rotation: /' "$o/rotation.txt"
sed 's/^/    upstream saw: /' "$o/rotation-inits.txt"
sed -n '1,5p' "$o/upgrade-probe.txt" | sed 's/^/    /'
if ((failed > 0)); then
    echo "--- inside log" >&2
    tail -60 "$o/log.txt" >&2
    echo "--- left behind: $(read_file left-behind.txt)" >&2
fi
echo "deb: $passed passed, $failed failed"
((failed == 0))
