#!/usr/bin/env bash
# Where gqlmuxd's hot path spends its time: one fan-out run of gqlmux-bench with gqlmuxd
# sampled by `perf record` (cpu-clock, call graphs). valgrind 3.19 (Debian 12) cannot run our
# binaries: it cannot read their DWARF 5, and with that stripped it crashes inside the
# async main's dispatch_main (sigsuspend). Usage: scripts/profile.sh [SUBSCRIBERS [BYTES [MESSAGES]]]
# (default 100 256 20000), or scripts/profile.sh endpoint KIND (graphql-transport-ws, graphql-ws,
# sse, multipart: 100 clients of the GraphQL endpoint of that kind). Prints the top symbols by
# self time (as a share of gqlmuxd's own samples), demangled.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/perf-wrapper.sh
command -v perf >/dev/null || { echo "profile.sh needs perf: apt-get install linux-perf" >&2; exit 1; }
swift build -c release --product gqlmuxd >&2
swift build -c release --product gqlmux-bench >&2
bin=$(swift build -c release --show-bin-path)
out=$(mktemp -d /tmp/gqlmux-profile.XXXXXX)
perf_wrapper "$bin/gqlmuxd" "$out"
if [[ ${1:-} == endpoint ]]; then
    "$bin/gqlmux-bench" "$out/gqlmuxd" endpoint "${2:?which client kind}"
else
    "$bin/gqlmux-bench" "$out/gqlmuxd" fanout "${1:-100}" "${2:-256}" "${3:-20000}"
fi
perf_wait "$out"
perf report -i "$out/perf.data" --pid "$(cat "$out/pid")" --percentage relative --no-children --stdio --sort symbol -g none --percent-limit 0.7 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | swift demangle --simplified | cut -c1-200 | head -50
echo "profile: $out/perf.data (perf report -i $out/perf.data)"
