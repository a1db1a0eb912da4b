#!/usr/bin/env bash
# The test command: prepares the interop virtualenv, then runs every test with `swift test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-interop.sh
swift test "$@"
