#!/usr/bin/env bash
# The test command: prepares the interop virtualenvs, builds every product (the systemd tests
# run the real gqlmuxd, gqlmuxctl and test upstream binaries), runs the Python client's tests
# and the interop tests (rolling restart, legacy servers) against them, with `swift test` beside
# the interop tests. Arguments go to `swift test` (e.g. `--filter ClientSessionTests`); the
# Python client's and the interop suites always run whole.
# The build (every product and the Swift tests) runs beside the test set-up (Debian packages,
# the interop virtualenvs), which waits on the network more than on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/prerequisites.sh build
build_log=$(mktemp)
trap 'rm -f "$build_log"' EXIT
swift build --build-tests >"$build_log" 2>&1 &
build=$!
setup=0
{ scripts/prerequisites.sh test && scripts/setup-interop.sh; } || setup=$?
if ! wait "$build"; then
    cat "$build_log"
    echo "==> test.sh: the build failed (its output above)" >&2
    exit 1
fi
grep -E "warning: |error: |Build complete" "$build_log" || true
(( setup == 0 )) || { echo "==> test.sh: the test set-up failed (exit $setup)" >&2; exit "$setup"; }
echo "==> Python client (clients/python) against the real gqlmuxd"
GQLMUX_BIN_DIR="$(swift build --show-bin-path)" python3 -m unittest discover -s clients/python -t clients/python
# The interop suite mostly waits on sockets, outages and restarts; the Swift tests (built
# above) run beside it at a lower priority, their output kept and printed after it.
swift_log=$(mktemp)
trap 'rm -f "$build_log" "$swift_log"' EXIT
echo "==> swift test, beside the interop suite (its output follows the suite's)"
nice -n 10 swift test --skip-build "$@" >"$swift_log" 2>&1 &
swift_tests=$!
echo "==> Interop (interop/): outages and legacy servers, real strawberry and ariadne against the real gqlmuxd"
interop=0
GQLMUX_BIN_DIR="$(swift build --show-bin-path)" .venv-interop/bin/python -m unittest discover -s interop -t . || interop=$?
swift=0
wait "$swift_tests" || swift=$?
echo "==> swift test"
cat "$swift_log"
(( interop == 0 )) || echo "==> test.sh: the interop suite failed (exit $interop; its output above the Swift tests')" >&2
(( swift == 0 )) || echo "==> test.sh: swift test failed (exit $swift)" >&2
(( interop == 0 && swift == 0 ))
