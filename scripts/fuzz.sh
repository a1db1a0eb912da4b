#!/usr/bin/env bash
# Builds the libFuzzer targets (Fuzz/Fuzz*.swift over Sources/GQLMuxFuzz; our modules with
# coverage and AddressSanitizer, unoptimised), and runs each for FUZZ_SECONDS (default 60) from
# the committed seed corpus (Fuzz/corpus/...). Exits 1 on a crash (the input left in Fuzz/crashes/<target>/), and on a
# build, link or run that fails or does not finish.
# FUZZ_SCRATCH (default .build-fuzz): the build folder; the harnesses are linked into its
# release/ folder. A cold one compiles the dependencies in release first. FUZZ_SCRATCH=.build
# rebuilds a release build's own modules for libFuzzer (a later `swift build -c release`
# rebuilds them as they were).
# FUZZ_OUTPUT (default FUZZ_SCRATCH): the build, link and run logs, each target's report, and
# the corpus of inputs libFuzzer finds interesting (corpus/<target>, read again by the next run that has the same FUZZ_OUTPUT).
# FUZZ_HARNESSES (default Fuzz) and FUZZ_CRASHES (default Fuzz/crashes): where the harnesses are
# read and crashes kept; scripts/fuzz-selftest.sh points them at broken copies.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
harnesses=${FUZZ_HARNESSES:-Fuzz}
crashes=${FUZZ_CRASHES:-Fuzz/crashes}
scratch=${FUZZ_SCRATCH:-.build-fuzz}
bin="$scratch/release"
# A release build in which our modules are built for libFuzzer (GQLMUX_FUZZ_INSTRUMENTED, read by
# Package.swift: coverage, AddressSanitizer, no optimisation) and the
# dependencies are not: built as the package's release build builds them
# (scripts/release-build.sh), so FUZZ_SCRATCH=.build reuses that build's dependencies (.ci/run,
# after the package test is done with it). The
# harnesses are linked from the objects of GQLMuxFuzz and what it depends on, read from SwiftPM's
# build plan (scripts/fuzz-closure.py).
out=${FUZZ_OUTPUT:-$scratch}
mkdir -p "$scratch" "$out"
if ! GQLMUX_FUZZ_INSTRUMENTED=1 scripts/release-build.sh --scratch-path "$scratch" \
    --target GQLMuxFuzz >"$out/fuzz-build.log" 2>&1; then
    tail -40 "$out/fuzz-build.log"
    echo "== fuzz.sh: the fuzz build failed (log: $out/fuzz-build.log)"
    exit 1
fi
grep -E "error|warning: |complete" "$out/fuzz-build.log" || true
closure=$(scripts/fuzz-closure.py "$scratch/release.yaml" GQLMuxFuzz) || { echo "== fuzz.sh: no link list for the harnesses"; exit 1; }
mapfile -t objects <<<"$closure"
# Each of our modules the harnesses link must have been built for libFuzzer: coverage and
# AddressSanitizer in its objects (else libFuzzer would run blind on it, and still report DONE).
for module in $(printf '%s\n' "${objects[@]}" | sed 's|.*/release/||; s|\.build/.*||' | sort -u); do
    [[ -d Sources/$module ]] || continue
    mapfile -t own < <(printf '%s\n' "${objects[@]}" | grep "/$module\.build/")
    symbols=$(nm "${own[@]}" 2>/dev/null || true)
    if ! grep -q __sanitizer_cov <<<"$symbols" || ! grep -q __asan_report <<<"$symbols"; then
        echo "== fuzz.sh: our module $module was not built for libFuzzer (no coverage or AddressSanitizer in its objects)"
        exit 1
    fi
done
# C modules of the closure need their module maps to import the Swift modules that use them.
maps=()
for module in $(printf '%s\n' "${objects[@]}" | sed 's|.*/release/||; s|\.build/.*||' | sort -u); do
    map=$(find "$scratch"/checkouts/*/Sources/"$module" -name module.modulemap 2>/dev/null | head -1 || true)
    [[ -z $map && -f "$bin/$module.build/module.modulemap" ]] && map="$bin/$module.build/module.modulemap"
    [[ -n $map ]] && maps+=(-Xcc "-fmodule-map-file=$map")
done
# One target: link it, run it FUZZ_SECONDS from its seeds, judge the run. Its report is printed
# when it ends; two run at a time (each libFuzzer process is one thread).
fuzz_one() {
    local harness=$1 name seeds corpus rc=0
    name=$(basename "$harness" .swift)
    rm -f "$bin/$name"
    if ! swiftc -sanitize=fuzzer,address -parse-as-library -g -I "$bin/Modules" "${maps[@]}" "$harness" "${objects[@]}" \
        -o "$bin/$name" >"$out/$name.link.log" 2>&1; then
        { grep -v "warning" "$out/$name.link.log" || true; } | tail -20
        echo "== $name: LINK FAILED"
        return 1
    fi
    case $name in FuzzLocalLines) seeds=Fuzz/corpus/local ;; FuzzUpstreamFrames) seeds=Fuzz/corpus/frames ;; FuzzHTTPStreams) seeds=Fuzz/corpus/streams ;; FuzzEndpoint) seeds=Fuzz/corpus/endpoint ;; FuzzEndpointHeaders) seeds=Fuzz/corpus/headers ;; FuzzHandover) seeds=Fuzz/corpus/handover ;; *) seeds=Fuzz/corpus/upstream ;; esac
    corpus="$out/corpus/$name"
    mkdir -p "$corpus" "$crashes/$name"
    echo "== $name: ${seconds}s from $seeds"
    # libFuzzer reports a crash itself; Swift's backtracer would be left waiting on the dead process.
    SWIFT_BACKTRACE=enable=no "$bin/$name" -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$crashes/$name/" -print_final_stats=1 "$corpus" "$seeds" >"$out/$name.log" 2>&1 || rc=$?
    grep -E "INITED|DONE|stat::number_of_executed_units|stat::average_exec_per_sec|ERROR|SUMMARY|Fatal error|Precondition failed" "$out/$name.log" || true
    if compgen -G "$crashes/$name/*-*" >/dev/null; then
        echo "== $name: CRASH, input kept in $crashes/$name/"
        return 1
    elif (( rc != 0 )) || ! grep -q "^Done [0-9]* runs\|DONE" "$out/$name.log"; then
        tail -20 "$out/$name.log"
        echo "== $name: the run failed (exit $rc) without finishing"
        return 1
    fi
}
status=0
running=()
finish_oldest() {
    local entry=${running[0]}
    running=("${running[@]:1}")
    wait "${entry%%:*}" || status=1
    cat "$out/${entry#*:}.report"
}
for harness in "$harnesses"/Fuzz*.swift; do
    name=$(basename "$harness" .swift)
    fuzz_one "$harness" >"$out/$name.report" 2>&1 &
    running+=("$!:$name")
    (( ${#running[@]} < 2 )) || finish_oldest
done
while (( ${#running[@]} > 0 )); do finish_oldest; done
exit $status
