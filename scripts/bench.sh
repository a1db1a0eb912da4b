#!/usr/bin/env bash
# Benchmark report (not a test): release build, then gqlmux-bench drives gqlmuxd with the
# in-process test upstream over real Unix sockets. Takes a few minutes to build the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product gqlmuxd >&2
swift build -c release --product gqlmux-bench >&2
bin=$(swift build -c release --show-bin-path)
"$bin/gqlmux-bench" "$bin/gqlmuxd"
