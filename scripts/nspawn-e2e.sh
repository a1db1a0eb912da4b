#!/usr/bin/env bash
# End-to-end under real systemd: boots this machine's / in systemd-nspawn (--volatile=yes,
# private network), installs the shipped units from systemd/ plus a test drop-in, and runs
# scripts/nspawn-e2e-inside.sh there. Results land in OUT_DIR.
#   nspawn-e2e.sh OUT_DIR [BIN_DIR]
# GQLMUX_E2E_INSIDE names another script of scripts/ to run inside instead (restart-scale.sh's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
bin=${2:-$root/.build/debug}
work=$(mktemp -d /tmp/gqlmux-nspawn.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/units/gqlmuxd.service.d" "$work/units/multi-user.target.wants" "$work/etc" "$out"

cp "$root/systemd/gqlmuxd.service" "$root/systemd/gqlmuxd.socket" "$root/systemd/gqlmuxd-graphql.socket" "$work/units/"
# Only what differs from an installed system: the binary's path and short timeouts.
cat >"$work/units/gqlmuxd.service.d/test.conf" <<UNIT
[Service]
ExecStart=
ExecStart=/opt/gqlmux-test/bin/gqlmuxd --config /etc/gqlmux/gqlmuxd.toml
WatchdogSec=3
TimeoutAbortSec=2
# The chaos steps: a fault written here strikes the next handover once.
Environment=GQLMUX_TEST_FAULT_FILE=/run/gqlmux/fault
UNIT
cat >"$work/units/gqlmux-test-upstream.service" <<UNIT
[Unit]
Description=gqlmux test upstream (graphql-transport-ws, needs token "e2e-token")
[Service]
ExecStart=/opt/gqlmux-test/bin/gqlmux-test-upstream 18080 ${GQLMUX_E2E_TICK_MS:-200} e2e-token
UNIT
cat >"$work/units/gqlmux-e2e.service" <<UNIT
[Unit]
Description=gqlmux end-to-end checks
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/opt/gqlmux-test/scripts/${GQLMUX_E2E_INSIDE:-nspawn-e2e-inside.sh}
UNIT
ln -s ../gqlmux-e2e.service "$work/units/multi-user.target.wants/gqlmux-e2e.service"
cat >"$work/etc/gqlmuxd.toml" <<TOML
[upstream]
url = "ws://127.0.0.1:18080/graphql"
# Delivered by LoadCredential=token.json:/etc/gqlmux/token.json
connecting_payload_file = "/run/credentials/gqlmuxd.service/token.json"
reconnect_interval = 0.2
reconnect_max_interval = 0.5
ping_interval = 1
[graphql_endpoint]
listen = "127.0.0.1:18090"
[log]
level = "${GQLMUX_E2E_LOG_LEVEL:-debug}"
TOML
echo '{"token":"e2e-token"}' >"$work/etc/token.json"
chmod 0600 "$work/etc/token.json"

# The gql library's clients (interop/gql_fleet.py) run inside too, from the interop virtualenv
# (scripts/setup-interop.sh; GQLMUX_E2E_VENV names another) when its Python is the system's
# (under /usr, which the container shares).
venv_dir=${GQLMUX_E2E_VENV:-$root/.venv-interop}
venv=()
if [[ $(readlink -f "$venv_dir/bin/python" 2>/dev/null) == /usr/* ]]; then
    venv=(--bind-ro="$venv_dir":/opt/gqlmux-test/venv --bind-ro="$root/interop":/opt/gqlmux-test/interop)
fi
timeout 400 systemd-nspawn --quiet --register=no --keep-unit -D / --volatile=yes --private-network \
    --bind-ro=/opt/swift \
    --bind-ro="$bin":/opt/gqlmux-test/bin \
    --bind-ro="$root/scripts":/opt/gqlmux-test/scripts \
    "${venv[@]}" \
    --bind="$work/units":/run/systemd/system \
    --bind-ro="$work/etc":/etc/gqlmux \
    --bind="$out":/gqlmux-out \
    -b systemd.mask=systemd-firstboot.service >"$out/nspawn.log" 2>&1 || echo "nspawn exit $?" >>"$out/nspawn.log"
