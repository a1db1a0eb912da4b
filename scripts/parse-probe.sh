#!/usr/bin/env bash
# Measures the GraphQL parser (not a test): the nesting depth at which it overflows a thread
# stack, in debug and release builds, and the time to check + parse the largest documents the
# default limits allow. SubscribeRequest.Limits' defaults and ranges come from these figures.
set -euo pipefail
cd "$(dirname "$0")/.."
for config in ${CONFIGS:-debug release}; do
    swift build -c "$config" --product gqlmux-parse-probe >&2
    probe="$(swift build -c "$config" --show-bin-path)/gqlmux-parse-probe"
    for stack in 512 1024; do
        low=1 high=100000
        while (( high - low > 1 )); do
            mid=$(( (low + high) / 2 ))
            if ( "$probe" depth $mid $stack >/dev/null 2>&1 ); then low=$mid; else high=$mid; fi
        done 2>/dev/null
        echo "$config: the parser survives depth $low on a $stack KiB stack ($(( stack * 1024 / high )) bytes per level)"
    done
    "$probe" time 15000 | sed "s/^/$config, 15000 tokens: /"
done
