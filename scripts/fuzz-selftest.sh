#!/usr/bin/env bash
# The fuzz stage can fail: scripts/fuzz.sh is run (1 s a target, on its existing build) over
# broken copies of a harness in a scratch folder, and must fail for each with its reason:
#   a harness that does not compile           → "LINK FAILED", exit 1
#   a harness that crashes on its first input → "CRASH", exit 1
#   a harness that libFuzzer cannot run       → "the run failed", exit 1
#   a crashing harness beside an intact one   → "CRASH", exit 1 (the two-at-a-time path)
# and pass for an intact copy. Run after scripts/fuzz.sh (it reuses its build: FUZZ_SCRATCH,
# default .build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d /tmp/gqlmux-fuzz-selftest.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
expect() {  # expect CASE EXIT_WANTED TEXT_WANTED
    local case=$1 want=$2 text=$3 rc=0
    FUZZ_SECONDS=1 FUZZ_HARNESSES="$scratch/$case" FUZZ_CRASHES="$scratch/crashes-$case" scripts/fuzz.sh >"$scratch/$case.log" 2>&1 || rc=$?
    if (( rc != want )) || ! grep -q "$text" "$scratch/$case.log"; then
        cat "$scratch/$case.log"
        echo "fuzz-selftest: $case: fuzz.sh exited $rc (wanted $want) and said $(grep -c "$text" "$scratch/$case.log") times \"$text\""
        exit 1
    fi
    echo "fuzz-selftest: $case: exit $rc, \"$text\""
}
mkdir -p "$scratch"/{intact,uncompilable,crashing,unrunnable,pair}
cp Fuzz/FuzzLocalLines.swift "$scratch/intact/"
sed 's/return 0/return 0 +/' Fuzz/FuzzLocalLines.swift >"$scratch/uncompilable/FuzzLocalLines.swift"
sed 's/    return 0/    if size >= 0 { fatalError("fuzz-selftest: a crash on every input") }\n    return 0/' Fuzz/FuzzLocalLines.swift \
    >"$scratch/crashing/FuzzLocalLines.swift"
# A target whose initializer exits before fuzzing: it links, and libFuzzer never reports DONE.
sed 's/^@_cdecl("LLVMFuzzerTestOneInput")/@_cdecl("LLVMFuzzerInitialize")\npublic func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>>>) -> CInt { exit(3) }\n@_cdecl("LLVMFuzzerTestOneInput")/' \
    Fuzz/FuzzLocalLines.swift | sed 's/^import GQLMuxFuzz/import GQLMuxFuzz\nimport Glibc/' >"$scratch/unrunnable/FuzzLocalLines.swift"
# Two at a time: a crashing target beside an intact one still fails the stage.
cp "$scratch/crashing/FuzzLocalLines.swift" "$scratch/pair/"
cp Fuzz/FuzzHandover.swift "$scratch/pair/"
expect pair 1 "CRASH"
grep -q "FuzzHandover: 1s from" "$scratch/pair.log" || { cat "$scratch/pair.log"; echo "fuzz-selftest: pair: the intact target beside it did not run"; exit 1; }
expect uncompilable 1 "LINK FAILED"
expect crashing 1 "CRASH"
expect unrunnable 1 "the run failed"
# Last, so the target's binary left in the build folder is the intact one.
expect intact 0 "FuzzLocalLines: 1s from"
echo "fuzz-selftest: every broken harness fails the stage, the intact one passes"
