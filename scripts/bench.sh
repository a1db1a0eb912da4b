#!/usr/bin/env bash
# Benchmark report (not a test): release build, then gqlmux-bench drives gqlmuxd with the
# in-process test upstream over real Unix sockets, and ends with one verdict line per target
# (met / NOT MET, with the numbers it was judged on). Takes a few minutes to build the first
# time. `scripts/bench.sh targets` prints the targets alone.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product gqlmuxd >&2
swift build -c release --product gqlmux-bench >&2
bin=$(swift build -c release --show-bin-path)
if [[ ${1:-} != targets ]]; then
    "$bin/gqlmux-bench" "$bin/gqlmuxd"
fi
echo "targets (each judged on its own runs)"
"$bin/gqlmux-bench" "$bin/gqlmuxd" targets
