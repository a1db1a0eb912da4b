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
    print("several upstreams (a gqlmuxd with 16 upstreams to the same test server, each its own connection, beside the one above)")
    var extra = "[limits]\nmax_operations_per_client = 20000\nclient_buffer_bytes = 67108864\ntotal_buffer_bytes = 4294967296\n"
    for index in 1..<16 { extra += "[upstreams.u\(index)]\nurl = \"\(upstream.url)\"\nreconnect_interval = 0\n" }
    let table = try await BenchDaemon(path: gqlmuxdPath, upstreamURL: upstream.url, upstreamConfig: "reconnect_interval = 0", extraConfig: extra)
    defer { table.stop() }
    let names = ["default"] + (1..<16).map { "u\($0)" }
    _ = await waitUntil { await upstream.currentStats.openConnections >= 17 }  // the 16, and the gqlmuxd above

    // Memory: 1,000 idle subscriptions on each of the 16 upstreams.
    let before = rssKiB(table.pid)
    var idle: [RawConnection] = []
    for (u, name) in names.enumerated() {
        var lines = ""
        for i in 0..<1000 {
            lines +=
                #"{"type":"subscribe","id":"\#(i)","upstream":"\#(name)","payload":{"query":"subscription($n: Int) { tick(n: $n) }","variables":{"n":\#(u * 1000 + i)}}}"#
                + "\n"
        }
        idle.append(try RawConnection.line(table.socketPath, sending: lines))
    }
    let all = await waitUntil { await upstream.currentStats.activeSubscriptions == 16_000 }
    try await Task.sleep(for: .milliseconds(500))
    let after = rssKiB(table.pid)
    let perSubscription = Double(after - before) * 1024 / 16_000
    print(
        String(
            format: "  16 upstreams × 1,000 idle subscriptions%@: %.0f B each, against %.0f B each with one upstream (10,000, above): %.2f×",
            all ? "" : " (INCOMPLETE)",
            perSubscription,
            idleBytes,
            perSubscription / idleBytes
        )
    )
    for connection in idle { Glibc.close(connection.fd) }
    _ = await waitUntil { await upstream.currentStats.activeSubscriptions == 0 }

    // Fan-out: 100 × 256 B from the default upstream of the 16 (the table unused), then 25
    // subscribers on each of 4 upstreams at once (each upstream subscription gets every tick).
    func run(_ spread: Int) async throws -> (rate: Double, done: Bool) {
        let reader = PollReader(
            try (0..<100).map { i in
                try RawConnection.line(
                    table.socketPath,
                    sending: #"{"type":"subscribe","id":"s\#(i)","upstream":"\#(names[i % spread])","payload":{"query":"subscription { tick }"}}"#
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
    for (spread, label) in [(1, "1 upstream of 16 → 100 subscribers"), (4, "4 upstreams at once → 25 subscribers each")] {
        var best: (rate: Double, done: Bool) = (0, false)
        for _ in 0..<3 {
            let result = try await run(spread)
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
