#!/usr/bin/env bash
# The test command: prepares the interop virtualenv, builds every product (the systemd tests
# run the real gqlmuxd, gqlmuxctl and test upstream binaries), runs the Python client's tests
# and the interop tests (rolling restart, legacy servers) against them, then `swift test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/prerequisites.sh test
scripts/setup-interop.sh
swift build
echo "==> Python client (clients/python) against the real gqlmuxd"
GQLMUX_BIN_DIR="$(swift build --show-bin-path)" python3 -m unittest discover -s clients/python -t clients/python
echo "==> Interop (interop/): outages and legacy servers, real strawberry and ariadne against the real gqlmuxd"
GQLMUX_BIN_DIR="$(swift build --show-bin-path)" .venv-interop/bin/python -m unittest discover -s interop -t .
swift test "$@"
