# Sourced by scripts/profile.sh and scripts/exclusivity-ab.sh.
# perf_wrapper GQLMUXD DIR [PERF_RECORD_OPTIONS...]: writes DIR/gqlmuxd, a stand-in the
# benchmark starts as "gqlmuxd": it runs GQLMUXD, recorded system-wide by perf (so every thread it
# starts is seen; by default sampled with call graphs, -F 1999 -g) until it exits, with its pid
# in DIR/pid and the data in DIR/perf.data (report with --pid).
# perf_wait DIR: waits until perf has written its data.
perf_wrapper() {
    local options="${*:3}"
    cat > "$2/gqlmuxd" <<WRAP
#!/bin/sh
"$1" "\$@" &
child=\$!
echo \$child > "$2/pid"
perf record -a ${options:--F 1999 -g} -o "$2/perf.data" 2>"$2/perf.log" &
recorder=\$!
trap 'kill -TERM \$child' TERM INT
wait \$child || wait \$child
kill -INT \$recorder
wait \$recorder
WRAP
    chmod +x "$2/gqlmuxd"
}

perf_wait() {
    for _ in $(seq 1 100); do grep -q "Captured" "$1/perf.log" 2>/dev/null && break; sleep 0.1; done
}
