#!/usr/bin/env bash
# Measures the GraphQL parser (not a test): the nesting depth at which it overflows a thread
# stack, in debug and release builds, and the parse time of the largest allowed documents.
# The max_document_depth default and range come from these figures (see SubscribeRequest.Limits).
set -euo pipefail
cd "$(dirname "$0")/.."
for config in debug release; do
    swift build -c $config --product gqlmux-parse-probe >/dev/null
    probe="$(swift build -c $config --show-bin-path)/gqlmux-parse-probe"
    for stack in 512 8192; do
        low=1 high=400000
        while (( high - low > 1 )); do
            mid=$(( (low + high) / 2 ))
            if "$probe" depth $mid $stack >/dev/null 2>&1; then low=$mid; else high=$mid; fi
        done
        echo "$config: parser survives depth $low on a $stack KiB stack ($(( stack * 1024 / high )) bytes of stack per level)"
    done
    "$probe" time 15000 | sed "s/^/$config: 15000 tokens: /"
done
