#!/usr/bin/env bash
# Does `-enforce-exclusivity=unchecked` pay, and where? Builds release gqlmuxd twice: as
# shipped (hot-path modules unchecked) and with every check kept (GQLMUX_EXCLUSIVITY_CHECKED=1),
# runs the fan-out report against each in turn (ROUNDS times, alternating, so both see the
# same machine), and prints the best rate of each. With perf installed it then samples the
# checked build and lists which functions make the dynamic exclusivity checks
# (swift_beginAccess callers): the modules to keep unchecked are theirs.
# Usage: scripts/exclusivity-ab.sh [SUBSCRIBERS [BYTES [MESSAGES [ROUNDS]]]] (default 100 256 60000 3)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/perf-wrapper.sh
n=${1:-100} bytes=${2:-256} messages=${3:-60000} rounds=${4:-3}
out=$(mktemp -d /tmp/gqlmux-exclusivity.XXXXXX)
bin=$(swift build -c release --show-bin-path)
swift build -c release --product gqlmux-bench >&2
swift build -c release --product gqlmuxd >&2
cp "$bin/gqlmuxd" "$out/unchecked"
GQLMUX_EXCLUSIVITY_CHECKED=1 swift build -c release --product gqlmuxd >&2
cp "$bin/gqlmuxd" "$out/checked"
# Leave the build as shipped.
swift build -c release --product gqlmuxd >&2
rate() { "$bin/gqlmux-bench" "$1" fanout "$n" "$bytes" "$messages" | awk '{split($6, d, "/"); printf "%.0f\n", d[1] / $9}'; }
best_unchecked=0 best_checked=0
for round in $(seq 1 "$rounds"); do
    u=$(rate "$out/unchecked"); c=$(rate "$out/checked")
    echo "round $round: unchecked $u/s, checked $c/s"
    best_unchecked=$(awk -v a="$best_unchecked" -v b="$u" 'BEGIN { print (b > a ? b : a) }')
    best_checked=$(awk -v a="$best_checked" -v b="$c" 'BEGIN { print (b > a ? b : a) }')
done
awk -v u="$best_unchecked" -v c="$best_checked" -v n="$n" -v b="$bytes" \
    'BEGIN { printf "fan-out %d x %d B, best of each: unchecked %.0f deliveries/s, checked %.0f/s: unchecked is %+.1f %%\n", n, b, u, c, 100 * (u / c - 1) }'
command -v perf >/dev/null || { echo "(no perf: skipping the callers of swift_beginAccess)"; exit 0; }
perf_wrapper "$out/checked" "$out"
"$bin/gqlmux-bench" "$out/gqlmuxd" fanout "$n" "$bytes" 20000 >/dev/null
perf_wait "$out"
echo "share of gqlmuxd's samples in the exclusivity runtime (checked build):"
perf report -i "$out/perf.data" --pid "$(cat "$out/pid")" --no-children --stdio --sort symbol -g none 2>/dev/null \
    | grep -E 'swift_(begin|end)Access' | sed 's/^ *//' | cut -c1-80
echo "their callers (the modules that pay):"
perf report -i "$out/perf.data" --pid "$(cat "$out/pid")" --no-children --stdio --sort symbol \
    --symbol-filter=swift_beginAccess -g caller,2,callee,function,percent 2>/dev/null \
    | grep -v '^#' | grep -E '[0-9]+\.[0-9]+%' | swift demangle --simplified | sed 's/^[ |-]*//' | cut -c1-160 | head -30
