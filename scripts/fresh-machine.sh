#!/usr/bin/env bash
# Proves the README's two commands work on a FRESH Debian 12 machine: a debootstrap root file
# system with only Swift's documented prerequisites, /opt/swift and the Swift package mirror
# bind-mounted read-only, the project cloned into it from this repository's HEAD, and
# `scripts/demo.sh` (DEMO_COUNT mode) then `scripts/test.sh` run inside systemd-nspawn as a
# newcomer would run them (root, nothing else installed).
#
#   scripts/fresh-machine.sh [demo|test|all|ci]  (default: all; needs root)
#   ci: all, then the outage soak (60 outages: at least 5 of each kind) and the mixed restart
#       soak, both at once (scripts/soaks.sh), on the same machine and build (CI's way: one
#       debug build serves the README's commands and both soaks)
#   scripts/fresh-machine.sh root                 only make sure the cached root exists; print its path
#
# The pristine root file system is cached in $GQLMUX_FRESH_CACHE (default
# /var/cache/gqlmux/fresh-bookworm) and never changed: every run works in a throw-away copy
# (nspawn --ephemeral), so packages installed by the project's scripts are never kept. The
# files they download are ($GQLMUX_FRESH_DOWNLOADS, default the cache's path + "-downloads").
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
(( EUID == 0 )) || { echo "fresh-machine.sh needs root (debootstrap, systemd-nspawn)" >&2; exit 1; }

cache=${GQLMUX_FRESH_CACHE:-/var/cache/gqlmux/fresh-bookworm}
# swift.org's list of prerequisites for Debian 12 (binutils-gold is in binutils there), and nothing more
# (ca-certificates and python3: what a Debian 12 install has anyway).
swift_prerequisites=binutils,libicu-dev,libcurl4-openssl-dev,libedit-dev,libsqlite3-dev,libncurses-dev,libpython3-dev,libxml2-dev,pkg-config,uuid-dev,tzdata,git,gcc,libstdc++-12-dev,ca-certificates,python3

host_tools=(debootstrap systemd-container)
for package in "${host_tools[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >&2 \
            || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >&2; }
    fi
done

# One creator at a time: .ci/run makes the roots in the background while it builds, and a stage
# that needs them waits here until they are whole.
mkdir -p "$(dirname "$cache")"
exec {root_lock}>"$cache.lock"
flock "$root_lock"
if [[ ! -f $cache/.gqlmux-pristine ]]; then
    echo "==> debootstrap bookworm into $cache (once; cached)" >&2
    rm -rf "$cache.partial"
    mkdir -p "$(dirname "$cache")"
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    debootstrap --variant=minbase --include="$swift_prerequisites" bookworm "$cache.partial" \
        "${mirror:-http://deb.debian.org/debian}" >"$cache.log" 2>&1 \
        || { tail -20 "$cache.log" >&2; exit 1; }
    # The same apt sources as this machine (security updates included), so apt-get works inside.
    cp /etc/apt/sources.list.d/debian.sources "$cache.partial/etc/apt/sources.list.d/" 2>/dev/null || true
    rm -f "$cache.partial/etc/apt/sources.list"
    # This workplace's machine set-up that a new machine has too: the package mirror's git
    # rewrite and pip's configuration (not the project's packages).
    cp /etc/gitconfig "$cache.partial/etc/gitconfig"
    [[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$cache.partial/etc/pip.conf"
    mkdir -p "$cache.partial/opt/swift" "$cache.partial/opt/swift-packages" "$cache.partial/opt/wheels"
    touch "$cache.partial/.gqlmux-pristine"
    mv "$cache.partial" "$cache"
fi

flock --unlock "$root_lock"
if [[ $what == root ]]; then
    echo "$cache"
    exit 0
fi

# The project as committed (a newcomer's clone), not this work tree's uncommitted files.
work=$(mktemp -d /tmp/gqlmux-fresh.XXXXXX)
trap 'rm -rf "$work"' EXIT
git clone -q --no-hardlinks "$PWD" "$work/gqlmux"

swift_bin=$(dirname "$(command -v swift)")
swift_root=$(dirname "$(dirname "$swift_bin")")
commands=()
# The demo runs once: its output is kept, and the suite's demo test checks that run instead of
# starting another (GQLMUX_DEMO_OUTPUT).
demo_once=('DEMO_COUNT=3 scripts/demo.sh 2>&1 | tee /root/demo-output.txt' 'GQLMUX_DEMO_OUTPUT=/root/demo-output.txt scripts/test.sh')
case $what in
    demo) commands=('DEMO_COUNT=3 scripts/demo.sh') ;;
    test) commands=('scripts/test.sh') ;;
    all) commands=("${demo_once[@]}") ;;
    # (.ci/run starts the fuzzers when this prints the soaks' step line, "fresh Debian 12: scripts/soaks.sh".)
    ci) commands=("${demo_once[@]}" "scripts/soaks.sh ${GQLMUX_SOAK_OUTAGES:-60} ${GQLMUX_RESTART_SOAK_SECONDS:-60}") ;;
    *) echo "usage: scripts/fresh-machine.sh [demo|test|all|ci]" >&2; exit 64 ;;
esac
script="set -euo pipefail; export PATH=$swift_bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
script+="; cd /root/gqlmux"
# Each command under its own time limit, about 3× its time on a cold machine of this kind (the
# demo includes the first build); one that runs out says so by name. In the foreground: the
# container has a terminal, and a command in a process group of its own (timeout's default) is
# stopped by it the moment it sets the terminal up (apt-get does); on a timeout the container's
# shell exits, which ends everything in it.
script+='; step() { local limit=$1 rc=0; shift; echo "==> [$((SECONDS / 60))m$((SECONDS % 60))s] fresh Debian 12: $* (limit ${limit}s)"'
script+='; timeout --foreground --kill-after=30 "$limit" bash -c "set -euo pipefail; $*" || rc=$?'
script+='; if ((rc == 124 || rc == 137)); then echo "==> fresh Debian 12: \"$*\" ran out of its ${limit}s"; fi; return $rc; }'
for command in "${commands[@]}"; do
    case $command in
        *demo.sh*) limit=1200 ;;
        *test.sh*) limit=2400 ;;
        *) limit=600 ;;
    esac
    script+="; step $limit $(printf %q "$command")"
done

extra=()
[[ -d /opt/wheels ]] && extra+=(--bind-ro=/opt/wheels)
# What the README's commands download on the fresh machine (Debian packages, Python wheels) is
# kept beside the cached root and lent to the next run: the same files, not fetched again. apt
# still installs every package and pip every wheel; only the download is saved.
downloads=${GQLMUX_FRESH_DOWNLOADS:-$cache-downloads}
if mkdir -p "$downloads/apt-archives/partial" "$downloads/pip" 2>/dev/null; then
    extra+=(--bind="$downloads/apt-archives:/var/cache/apt/archives" --bind="$downloads/pip:/root/.cache/pip")
fi
# This workplace reaches PyPI through a TLS proxy whose CA the machines trust: the same trust
# store, read-only (it changes between sessions, so it is not part of the cached root).
[[ -f /etc/ssl/certs/ca-certificates.crt ]] && extra+=(--bind-ro=/etc/ssl/certs/ca-certificates.crt)
env_args=()
for variable in PIP_CERT PIP_FIND_LINKS PIP_DEFAULT_TIMEOUT PIP_DISABLE_PIP_VERSION_CHECK GQLMUX_WARNINGS_AS_ERRORS GQLMUX_REQUIRE_ALL; do
    [[ -n ${!variable:-} ]] && env_args+=(--setenv="$variable=${!variable}")
done
echo "==> systemd-nspawn --ephemeral on a copy of $cache" >&2
# --ephemeral: a snapshot that is thrown away; the cache stays pristine. The host's network
# (Debian's packages and PyPI); /sys/fs/cgroup writable for the tests' own nested nspawn.
systemd-nspawn --quiet --register=no --keep-unit --ephemeral -D "$cache" \
    --capability=all --resolv-conf=copy-host \
    --bind-ro="$swift_root:$swift_root" --bind-ro=/opt/swift-packages \
    --bind="$work/gqlmux:/root/gqlmux" "${extra[@]}" "${env_args[@]}" \
    --setenv=CI="${CI:-}" --setenv=HOME=/root \
    /bin/bash -c "$script"
echo "==> fresh machine: both README commands passed" >&2
