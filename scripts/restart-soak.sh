#!/usr/bin/env bash
# The mixed soak: online restarts, upstream outages and reloads interleaved under clients of
# every kind, against strawberry and the real gqlmuxd, with a stand-in for systemd's file
# descriptor store (no root, no systemd). Prints its summary; fails if a subscription is lost,
# a client is closed, gqlmuxd's descriptors change or its RSS grows.
#   scripts/restart-soak.sh [SECONDS]        (default 150; GQLMUX_SOAK_PREPARED=1: the set-up
#                                            and build are done)
set -euo pipefail
cd "$(dirname "$0")/.."
# (GQLMUX_SOAK_PREPARED=1: scripts/soaks.sh did the set-up and the build.)
if [[ ${GQLMUX_SOAK_PREPARED:-} != 1 ]]; then
    scripts/prerequisites.sh test
    scripts/setup-interop.sh
    swift build --product gqlmuxd
    swift build --product gqlmuxctl
fi
GQLMUX_BIN_DIR="$(swift build --show-bin-path)" .venv-interop/bin/python -m interop.restart_soak "${1:-150}"
