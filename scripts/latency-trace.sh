#!/usr/bin/env bash
# Where a lone result's time goes inside gqlmuxd, against the bare relay in its place: the bench's
# latency rows run with gqlmuxd started under a wrapper while `perf record` takes the syscall
# tracepoints of every process (epoll_wait and poll returning, read returning, write entered and
# returning). For gqlmuxd's event-loop thread and for the relay, per message: the wake-up until
# its read has returned (the loop's own work before and around the read), the read until the
# write is entered (everything between: for gqlmuxd the frame decoder, the state machine, the
# switchboard and the fan-out), and the write itself. Prints the percentiles of each, in µs
# (perf's timestamps have microsecond resolution), then the bench's own latency rows.
#   scripts/latency-trace.sh            (root: perf reads the tracepoints)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/perf-wrapper.sh
command -v perf >/dev/null || { echo "latency-trace.sh needs perf: apt-get install linux-perf" >&2; exit 1; }
scripts/release-build.sh --product gqlmuxd >&2
scripts/release-build.sh --product gqlmux-bench >&2
bin=$(swift build -c release --static-swift-stdlib --show-bin-path)
out=$(mktemp -d /tmp/gqlmux-latency-trace.XXXXXX)
events=syscalls:sys_exit_epoll_wait,syscalls:sys_exit_poll,syscalls:sys_exit_read,syscalls:sys_enter_write,syscalls:sys_exit_write
perf_wrapper "$bin/gqlmuxd" "$out" -e "$events"
"$bin/gqlmux-bench" "$out/gqlmuxd" latency | tee "$out/bench.txt"
perf_wait "$out"
perf script -i "$out/perf.data" -F comm,pid,tid,time,event 2>/dev/null | grep -v '^ *perf ' >"$out/events.txt"
python3 - "$out/events.txt" "$(cat "$out/pid")" <<'EOF'
import collections, sys
path, daemon = sys.argv[1], sys.argv[2]
threads = collections.defaultdict(list)
for line in open(path):
    words = line.split()
    for i, word in enumerate(words):
        if word.endswith(":") and word[:-1].replace(".", "").isdigit():
            pid, tid = words[i - 1].split("/") if "/" in words[i - 1] else (words[i - 2], words[i - 1])
            threads[(words[0], pid, tid)].append((float(word[:-1]), words[i + 1].rstrip(":").split(":")[-1]))
            break

def segments(events):
    woke = read = entered = None
    out = {"wake-up to read returned": [], "read to write entered": [], "write": []}
    for time, event in events:
        if event in ("sys_exit_epoll_wait", "sys_exit_poll"):
            woke, read = time, None
        elif event == "sys_exit_read" and woke is not None and read is None:
            read = time
        elif event == "sys_enter_write" and read is not None and woke is not None:
            out["wake-up to read returned"].append((read - woke) * 1e6)
            out["read to write entered"].append((time - read) * 1e6)
            entered, woke = time, None
        elif event == "sys_exit_write" and entered is not None:
            out["write"].append((time - entered) * 1e6)
            entered = None
    return out

def row(name, values):
    values.sort()
    n = len(values)
    if n == 0:
        return f"    {name:26} (none)"
    return f"    {name:26} p50 {values[n // 2]:5.0f}   p90 {values[int(n * 0.9)]:5.0f}   p99 {values[min(n - 1, int(n * 0.99))]:5.0f}   ({n} messages)"

# gqlmuxd's busiest thread is its event loop; the relay is the bench process that polls.
loop = max((k for k in threads if k[1] == daemon), key=lambda k: len(threads[k]), default=None)
relays = [k for k in threads if k[0] == "gqlmux-bench" and any(e == "sys_exit_poll" for _, e in threads[k])]
print("\ninside the process, per message (µs)")
# Both relays are processes of their own: the one in gqlmuxd's place relays while gqlmuxd relays
# too (the paths take turns, so thousands of gqlmuxd's events fall within its run), the
# socketpair one after gqlmuxd's rows (only gqlmuxd's keep-alives fall within it).
def during(key):
    first, last = threads[key][0][0], threads[key][-1][0]
    return loop is not None and sum(first <= t <= last for t, _ in threads[loop]) >= 1_000
named = [("gqlmuxd (its event loop)", loop)] + [
    ("bare relay in gqlmuxd's place (judged)" if during(k) else "socketpair relay between plain threads (not judged)", k) for k in relays
]
for title, key in named:
    if key is None:
        continue
    print(f"  {title}: thread {key[2]}")
    for name, values in segments(threads[key]).items():
        print(row(name, values))
EOF
echo "trace: $out (perf script -i $out/perf.data)"
