#!/usr/bin/env bash
# Checks the Debian packages gqlmux needs beyond Swift, for the README's commands and .ci/run.
#   scripts/prerequisites.sh build   what `swift build` needs (libsystemd-dev, pkg-config)
#   scripts/prerequisites.sh test    plus what the tests use (nspawn, socat, setpriv, openssl, venv, tmux)
#   scripts/prerequisites.sh ci      plus what .ci/run's fresh machines are made with (debootstrap)
#                                    and its package test uses (dpkg-dev, lintian)
# As root it installs what is missing (apt-get); otherwise it prints the exact command and exits 1.
set -euo pipefail
need=(libsystemd-dev pkg-config)
if [[ ${1:-build} == test || ${1:-build} == ci ]]; then
    # systemd-container: the nspawn end-to-end test; socat, util-linux (setpriv, unshare): the
    # peer-credential and journald tests; openssl: TLS tests; python3-venv: interop servers
    # and the Python client; prometheus: its promtool checks the metrics, its server scrapes them;
    # chromium: the browser that tries the local GraphQL endpoint as a hostile web page would;
    # tinyproxy: the HTTP proxy the upstream connections are tunnelled through; curl: the SSE
    # clients of the stop-and-start test under systemd; tmux: the terminal `gqlmuxctl top` is
    # driven in (interop/test_top.py).
    need+=(systemd-container socat util-linux openssl python3-venv prometheus chromium tinyproxy curl tmux)
fi
[[ ${1:-build} == ci ]] && need+=(debootstrap dpkg-dev lintian)
missing=()
for package in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
(( ${#missing[@]} == 0 )) && exit 0
if (( EUID != 0 )); then
    echo "gqlmux needs these Debian packages: ${missing[*]}" >&2
    echo "install them with:  sudo apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
echo "==> installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Package lists this script fetched in the last hour are used as they are (the README's two
# commands each check their own packages, one after the other); the stamp is its own, as apt
# dates the lists by the server's clock.
stamp=/var/lib/apt/gqlmux-lists-fetched
if ! find "$stamp" -newermt '-60 minutes' 2>/dev/null | grep -q .; then
    apt-get update -qq >&2
    touch "$stamp"
fi
# prometheus and tinyproxy come with system services that would listen on every interface; the
# tests run their own instances on loopback ports. While installing, no service may start
# (policy-rc.d), and those two are left disabled, so installing them opens no port here.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
for service in prometheus tinyproxy; do
    if [[ " ${missing[*]} " == *" $service "* ]]; then
        systemctl disable "$service.service" >/dev/null 2>&1 || true
        systemctl stop "$service.service" >/dev/null 2>&1 || true
        echo "==> $service: installed for the tests, its system service left disabled and stopped" >&2
    fi
done
