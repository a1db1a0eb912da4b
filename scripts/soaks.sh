#!/usr/bin/env bash
# Both soaks at once (each mostly waits on outages and restarts, and neither shares a port, a
# socket or a process with the other): the outage soak (scripts/soak.sh OUTAGES) and the mixed
# restart soak (scripts/restart-soak.sh SECONDS). It sets up and builds once, then runs both
# with GQLMUX_SOAK_PREPARED=1 (so neither does it again). The restart soak's output comes first,
# the outage soak's after both have ended; fails if either fails, saying which.
#   scripts/soaks.sh [OUTAGES] [SECONDS]        (defaults: each script's own, 200 and 150)
set -euo pipefail
cd "$(dirname "$0")/.."
# Set up and build once, before they start (two SwiftPM processes on one build folder would
# wait on each other).
scripts/prerequisites.sh test
scripts/setup-interop.sh
swift build --product gqlmuxd
swift build --product gqlmuxctl
export GQLMUX_SOAK_PREPARED=1
outage_log=$(mktemp)
trap 'rm -f "$outage_log"' EXIT
scripts/soak.sh ${1:+"$1"} >"$outage_log" 2>&1 &
outage=$!
restart=0
scripts/restart-soak.sh ${2:+"$2"} || restart=$?
soak=0
wait "$outage" || soak=$?
echo "==> the outage soak (beside the restart soak)"
cat "$outage_log"
(( restart == 0 )) || echo "==> soaks.sh: the mixed restart soak failed (exit $restart)" >&2
(( soak == 0 )) || echo "==> soaks.sh: the outage soak failed (exit $soak)" >&2
(( restart == 0 && soak == 0 ))
