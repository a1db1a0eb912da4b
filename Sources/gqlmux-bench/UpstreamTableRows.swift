import Foundation
import TestUpstream

#if canImport(Glibc)
import Glibc
#endif

/// Several upstreams cost nothing when unused, and fan out from several at once: a gqlmuxd with
/// 16 upstreams (all to the test upstream, each its own connection) beside the single-upstream
/// gqlmuxd of the same run.
/// - Parameters:
///   - single: the single-upstream gqlmuxd's fan-out 100 × 256 B rate of this run.
///   - idleBytes: its bytes per idle subscription, of this run.
func upstreamTableRows(upstream: TestUpstreamServer, single: Double?, idleBytes: Double) async throws {
    print(
        "several upstreams (gqlmuxd with 16 upstreams to the same test server, each its own connection, beside the single-upstream one; fresh daemons for memory)"
    )
    var extra = "[limits]\nmax_operations_per_client = 20000\nclient_buffer_bytes = 67108864\ntotal_buffer_bytes = 4294967296\n"
    for index in 1..<16 { extra += "[upstreams.u\(index)]\nurl = \"\(upstream.url)\"\nreconnect_interval = 0\n" }
    let table = try await BenchDaemon(path: gqlmuxdPath, upstreamURL: upstream.url, upstreamConfig: "reconnect_interval = 0", extraConfig: extra)
    defer { table.stop() }
    let names = ["default"] + (1..<16).map { "u\($0)" }
    _ = await waitUntil { await upstream.currentStats.openConnections >= 17 }  // the 16, and the gqlmuxd above

    // Memory: 16,000 idle subscriptions, in a fresh gqlmuxd each: all on the one upstream of a
    // single-upstream configuration (today's), all on `default` of the 16, and 1,000 on each of
    // the 16 (RSS before and after, per subscription).
    let today = try await idleCost(upstream: upstream, upstreams: 1, spread: 1)
    let unused = try await idleCost(upstream: upstream, upstreams: 16, spread: 1)
    let spread = try await idleCost(upstream: upstream, upstreams: 16, spread: 16)
    print(String(format: "  16,000 idle subscriptions, one upstream configured (today's):  %.0f B each", today))
    print(String(format: "  16,000 idle subscriptions on default, 16 configured:          %.0f B each (%.2f× today's)", unused, unused / today))
    print(String(format: "  16 upstreams × 1,000 idle subscriptions:                      %.0f B each (%.2f× today's)", spread, spread / today))
    if !idleBytes.isNaN { print(String(format: "  (the report's first section, 10,000 on one upstream:         %.0f B each)", idleBytes)) }

    // Fan-out: 100 × 256 B from the default upstream of the 16 (the table unused), then 25
    // subscribers on each of 4 upstreams at once (each upstream subscription gets every tick).
    /// `spread` upstream subscriptions, 100 ÷ `spread` subscribers each: on `spread` upstreams,
    /// or (`oneUpstream`) as `spread` distinct subscriptions of `default`, the same upstream work
    /// on one connection.
    func run(_ spread: Int, oneUpstream: Bool = false) async throws -> (rate: Double, done: Bool) {
        let reader = PollReader(
            try (0..<100).map { i in
                try RawConnection.line(
                    table.socketPath,
                    sending: oneUpstream
                        ? #"{"type":"subscribe","id":"s\#(i)","payload":{"query":"subscription($n: Int) { tick(n: $n) }","variables":{"n":\#(i % spread)}}}"#
                        : #"{"type":"subscribe","id":"s\#(i)","upstream":"\#(names[i % spread])","payload":{"query":"subscription { tick }"}}"#
                )
            }
        )
        defer { reader.close() }
        _ = await waitUntil { await upstream.currentStats.activeSubscriptions == spread && reader.results.allSatisfy { $0 >= 1 } }
        let base = reader.results.reduce(0, +)
        let messages = 60_000
        let start = ContinuousClock.now
        var sent = 0
        while sent < messages {
            await upstream.tick(count: min(500, messages - sent), padding: 256 - 30)
            sent += 500
        }
        let expected = 100 * messages
        let done = await waitUntil(.seconds(600)) { reader.results.reduce(0, +) - base >= expected }
        let rate = Double(reader.results.reduce(0, +) - base) / seconds(ContinuousClock.now - start)
        reader.close()
        _ = await waitUntil { await upstream.currentStats.activeSubscriptions == 0 }
        return (rate, done)
    }
    for (spread, one, label) in [
        (1, false, "1 upstream of 16 → 100 subscribers"), (4, true, "1 upstream, 4 distinct subscriptions → 25 subscribers each"),
        (4, false, "4 upstreams at once → 25 subscribers each"),
    ] {
        var best: (rate: Double, done: Bool) = (0, false)
        for _ in 0..<3 {
            let result = try await run(spread, oneUpstream: one)
            if result.done, result.rate > best.rate { best = result }
        }
        print(
            "  fan-out \(label), 256 B: "
                + String(format: "%.0f deliveries/s", best.rate)
                + (single.map { String(format: " = %.2f× the single-upstream gqlmuxd's 100 × 256 B", best.rate / $0) } ?? "")
                + (best.done ? "" : " (INCOMPLETE)")
        )
    }
    print("")
}

/// A fresh gqlmuxd with `upstreams` upstreams (each its own connection to the test server) and
/// 16,000 distinct idle subscriptions spread over the first `spread` of them: its RSS growth per
/// subscription, in bytes.
func idleCost(upstream: TestUpstreamServer, upstreams count: Int, spread: Int) async throws -> Double {
    var extra = "[limits]\nmax_operations_per_client = 20000\n"
    for index in 1..<max(1, count) { extra += "[upstreams.u\(index)]\nurl = \"\(upstream.url)\"\n" }
    let baseline = await upstream.currentStats.openConnections
    let daemon = try await BenchDaemon(path: gqlmuxdPath, upstreamURL: upstream.url, upstreamConfig: "reconnect_interval = 0", extraConfig: extra)
    defer { daemon.stop() }
    _ = await waitUntil { await upstream.currentStats.openConnections >= baseline + count }
    try await Task.sleep(for: .milliseconds(300))
    let names = ["default"] + (1..<max(1, count)).map { "u\($0)" }
    let before = rssKiB(daemon.pid)
    var connections: [RawConnection] = []
    for c in 0..<16 {
        var lines = ""
        for i in 0..<1000 {
            lines +=
                #"{"type":"subscribe","id":"\#(i)","upstream":"\#(names[c % spread])","payload":{"query":"subscription($n: Int) { tick(n: $n) }","variables":{"n":\#(c * 1000 + i)}}}"#
                + "\n"
        }
        connections.append(try RawConnection.line(daemon.socketPath, sending: lines))
    }
    let all = await waitUntil { await upstream.currentStats.activeSubscriptions == 16_000 }
    try await Task.sleep(for: .milliseconds(500))
    let after = rssKiB(daemon.pid)
    for connection in connections { Glibc.close(connection.fd) }
    _ = await waitUntil { await upstream.currentStats.activeSubscriptions == 0 }
    return all ? Double(after - before) * 1024 / 16_000 : .nan
}
