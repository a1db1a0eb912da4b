#!/usr/bin/env bash
# Where gqlmuxd's hot path spends its time: one fan-out run of gqlmux-bench with gqlmuxd
# sampled by `perf record` (cpu-clock, call graphs). valgrind 3.19 (Debian 12) cannot run our
# binaries: it cannot read their DWARF 5, and with that stripped it crashes inside the
# async main's dispatch_main (sigsuspend). Usage: scripts/profile.sh [SUBSCRIBERS [BYTES [MESSAGES]]]
# (default 100 256 20000). Prints the top symbols by self time, demangled.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "profile.sh needs perf: apt-get install linux-perf" >&2; exit 1; }
swift build -c release --product gqlmuxd >&2
swift build -c release --product gqlmux-bench >&2
bin=$(swift build -c release --show-bin-path)
out=$(mktemp -d /tmp/gqlmux-profile.XXXXXX)
# The wrapper the bench starts as "gqlmuxd": the real one, sampled system-wide (so every
# thread it starts is seen) until it exits; the report keeps only its samples.
cat > "$out/gqlmuxd" <<WRAP
#!/bin/sh
"$bin/gqlmuxd" "\$@" &
child=\$!
echo \$child > "$out/pid"
perf record -a -F 1999 -g -o "$out/perf.data" 2>"$out/perf.log" &
recorder=\$!
trap 'kill -TERM \$child' TERM INT
wait \$child || wait \$child
kill -INT \$recorder
wait \$recorder
WRAP
chmod +x "$out/gqlmuxd"
"$bin/gqlmux-bench" "$out/gqlmuxd" fanout "${1:-100}" "${2:-256}" "${3:-20000}"
for _ in $(seq 1 100); do grep -q "Captured" "$out/perf.log" 2>/dev/null && break; sleep 0.1; done
perf report -i "$out/perf.data" --pid "$(cat "$out/pid")" --no-children --stdio --sort symbol -g none --percent-limit 0.7 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | swift demangle --simplified | cut -c1-200 | head -50
echo "profile: $out/perf.data (perf report -i $out/perf.data)"
