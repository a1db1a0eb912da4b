#!/usr/bin/env bash
# The outage soak: 200 upstream outages (1012 closes, drops without a close frame, a SIGKILL and
# restart of the server every 30th, or every (OUTAGES ÷ 5)th in a shorter soak: every 12th of
# 60) under 100 distinct subscriptions against strawberry, with the real gqlmuxd. Prints its
# figures; fails if a stream is lost, an outage is not resumed by all 100, the p99 time to
# all-resumed after the closes and drops exceeds 2 s, a server restart is resumed after more
# than 10 s, or gqlmuxd's RSS grows by 5 MiB or more.
#   scripts/soak.sh [OUTAGES]          (GQLMUX_SOAK_PREPARED=1: the set-up and build are done)
set -euo pipefail
cd "$(dirname "$0")/.."
# (GQLMUX_SOAK_PREPARED=1: scripts/soaks.sh did the set-up and the build.)
if [[ ${GQLMUX_SOAK_PREPARED:-} != 1 ]]; then
    scripts/prerequisites.sh test
    scripts/setup-interop.sh
    swift build --product gqlmuxd
fi
GQLMUX_BIN_DIR="$(swift build --show-bin-path)" python3 -m interop.soak "${1:-200}"
