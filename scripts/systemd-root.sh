#!/usr/bin/env bash
# Makes sure the cached clean Debian 12 with systemd exists (scripts/fresh-machine.sh's pristine
# debootstrap root plus systemd, dbus and man-db) and prints its path. It is never changed once
# made: the package test boots a throw-away copy of it. Needs root. One creator at a time (a
# lock beside it): .ci/run makes it in the background while it builds, and test-deb.sh waits
# here until it is whole.
set -euo pipefail
cd "$(dirname "$0")/.."
(( EUID == 0 )) || { echo "systemd-root.sh needs root (debootstrap, systemd-nspawn)" >&2; exit 1; }
pristine=$(scripts/fresh-machine.sh root)
system=${pristine%-bookworm}-systemd-bookworm
exec {lock}>"$system.lock"
flock "$lock"
if [[ ! -f $system/.gqlmux-pristine ]]; then
    echo "==> a clean Debian 12 with systemd: $system (once; cached)" >&2
    rm -rf "$system.partial"
    cp -a "$pristine" "$system.partial"
    systemd-nspawn --quiet --register=no --keep-unit -D "$system.partial" --resolv-conf=copy-host \
        --bind-ro=/etc/ssl/certs/ca-certificates.crt \
        /bin/sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus man-db' \
        >"$system.log" 2>&1 || { tail -20 "$system.log" >&2; exit 1; }
    mv "$system.partial" "$system"
fi
echo "$system"
