#!/usr/bin/env bash
# The test command: prepares the interop virtualenv, builds every product (the systemd tests
# run the real gqlmuxd, gqlmuxctl and test upstream binaries), then runs `swift test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/prerequisites.sh test
scripts/setup-interop.sh
swift build
swift test "$@"
