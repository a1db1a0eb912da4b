#!/usr/bin/env bash
# Builds the libFuzzer targets (Fuzz/Fuzz*.swift over Sources/GQLMuxFuzz) with coverage and
# AddressSanitizer, and runs each for FUZZ_SECONDS (default 60) from the committed seed corpus
# (Fuzz/corpus/...). Exits 1 on a crash (the input left in Fuzz/crashes/<target>/), and on a
# build, link or run that fails or does not finish.
# Inputs libFuzzer finds interesting go to a scratch corpus under .build-fuzz.
# FUZZ_HARNESSES (default Fuzz) and FUZZ_CRASHES (default Fuzz/crashes): where the harnesses are
# read and crashes kept; scripts/fuzz-selftest.sh points them at broken copies.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
harnesses=${FUZZ_HARNESSES:-Fuzz}
crashes=${FUZZ_CRASHES:-Fuzz/crashes}
scratch=.build-fuzz
bin="$scratch/debug"
# SwiftPM's own --sanitize fuzzer does not add coverage to library objects: pass it to swiftc.
mkdir -p "$scratch"
if ! swift build --scratch-path "$scratch" --sanitize address -Xswiftc -sanitize=fuzzer -Xcc -fsanitize=fuzzer-no-link \
    --target GQLMuxFuzz >"$scratch/build.log" 2>&1; then
    tail -40 "$scratch/build.log"
    echo "== fuzz.sh: the fuzz build failed (log: $scratch/build.log)"
    exit 1
fi
grep -E "error|warning: |complete" "$scratch/build.log" || true
mapfile -t objects < <(find "$bin/" -path '*.build/*.o' | sort)
# C modules of the closure need their module maps to import the Swift modules that use them.
maps=()
for module in $(printf '%s\n' "${objects[@]}" | sed 's|.*/debug/||; s|\.build/.*||' | sort -u); do
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
        -o "$bin/$name" >"$scratch/$name.link.log" 2>&1; then
        { grep -v "warning" "$scratch/$name.link.log" || true; } | tail -20
        echo "== $name: LINK FAILED"
        return 1
    fi
    case $name in FuzzLocalLines) seeds=Fuzz/corpus/local ;; FuzzUpstreamFrames) seeds=Fuzz/corpus/frames ;; FuzzHTTPStreams) seeds=Fuzz/corpus/streams ;; FuzzEndpoint) seeds=Fuzz/corpus/endpoint ;; FuzzEndpointHeaders) seeds=Fuzz/corpus/headers ;; FuzzHandover) seeds=Fuzz/corpus/handover ;; *) seeds=Fuzz/corpus/upstream ;; esac
    corpus="$scratch/corpus/$name"
    mkdir -p "$corpus" "$crashes/$name"
    echo "== $name: ${seconds}s from $seeds"
    # libFuzzer reports a crash itself; Swift's backtracer would be left waiting on the dead process.
    SWIFT_BACKTRACE=enable=no "$bin/$name" -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$crashes/$name/" -print_final_stats=1 "$corpus" "$seeds" >"$scratch/$name.log" 2>&1 || rc=$?
    grep -E "INITED|DONE|stat::number_of_executed_units|stat::average_exec_per_sec|ERROR|SUMMARY|Fatal error|Precondition failed" "$scratch/$name.log" || true
    if compgen -G "$crashes/$name/*-*" >/dev/null; then
        echo "== $name: CRASH, input kept in $crashes/$name/"
        return 1
    elif (( rc != 0 )) || ! grep -q "^Done [0-9]* runs\|DONE" "$scratch/$name.log"; then
        tail -20 "$scratch/$name.log"
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
    cat "$scratch/${entry#*:}.report"
}
for harness in "$harnesses"/Fuzz*.swift; do
    name=$(basename "$harness" .swift)
    fuzz_one "$harness" >"$scratch/$name.report" 2>&1 &
    running+=("$!:$name")
    (( ${#running[@]} < 2 )) || finish_oldest
done
while (( ${#running[@]} > 0 )); do finish_oldest; done
exit $status
