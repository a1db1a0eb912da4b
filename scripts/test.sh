#!/usr/bin/env bash
# The test command: prepares the interop virtualenvs, builds every product (the systemd tests
# run the real gqlmuxd, gqlmuxctl and test upstream binaries), runs the Python client's tests
# and the interop tests (rolling restart, legacy servers; in two halves at once) against them,
# with `swift test` beside the interop tests. Arguments go to `swift test` (e.g. `--filter ClientSessionTests`); the
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
# The interop suite in two halves at once, as it mostly waits: the modules that restart gqlmuxd
# or a server again and again (about half the suite's time) in one, every other module (a new
# one too) in the other. The second half's output is printed after both have ended.
restarting=" test_restarts test_handover_chaos test_restart_weather test_outages test_identity_limits test_appsync test_legacy "
first=() second=()
for module in interop/test*.py; do
    module=$(basename "$module" .py)
    if [[ $restarting == *" $module "* ]]; then first+=("interop.$module"); else second+=("interop.$module"); fi
done
bin_dir=$(swift build --show-bin-path)
second_log=$(mktemp)
trap 'rm -f "$build_log" "$swift_log" "$second_log"' EXIT
echo "==> Interop (interop/): outages and legacy servers, real strawberry and ariadne against the real gqlmuxd, in two halves"
echo "==> the first half: ${first[*]#interop.}"
GQLMUX_BIN_DIR="$bin_dir" .venv-interop/bin/python -m unittest "${second[@]}" >"$second_log" 2>&1 &
second_half=$!
first_rc=0 second_rc=0
GQLMUX_BIN_DIR="$bin_dir" .venv-interop/bin/python -m unittest "${first[@]}" || first_rc=$?
wait "$second_half" || second_rc=$?
interop=$(( first_rc != 0 ? first_rc : second_rc ))
echo "==> the second half: ${second[*]#interop.}"
cat "$second_log"
swift=0
wait "$swift_tests" || swift=$?
echo "==> swift test"
cat "$swift_log"
(( first_rc == 0 )) || echo "==> test.sh: the interop suite's first half failed (exit $first_rc; its output above the second half's)" >&2
(( second_rc == 0 )) || echo "==> test.sh: the interop suite's second half failed (exit $second_rc; its output above the Swift tests')" >&2
(( swift == 0 )) || echo "==> test.sh: swift test failed (exit $swift)" >&2
(( interop == 0 && swift == 0 ))
