import Foundation
import NIOCore
import NIOPosix
import TestUpstream

/// `gqlmux-bench PATH_TO_GQLMUXD stalled [CLIENTS]`: the memory report: many clients that stop reading, against `total_buffer_bytes`.
/// CLIENTS local clients (default 200) subscribe to one fast stream of 4 KB payloads and never
/// read, plus one client that reads everything. gqlmuxd runs with the default limits
/// (client_buffer_bytes 8 MiB, total_buffer_bytes 256 MiB); its RSS is sampled while they fall
/// behind, after they have been cut, and a few seconds later.
func runStalledClients(gqlmuxdPath: String, clients count: Int) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let upstream = TestUpstreamServer()
    try await upstream.start()
    let daemon = try await BenchDaemon(path: gqlmuxdPath, upstreamURL: upstream.url)
    defer { daemon.stop() }
    let socketPath = daemon.socketPath
    let pid = daemon.pid
    print("stalled clients: \(count) clients never read one stream of 4 KB payloads; 1 client reads it (default limits)")
    print("  gqlmuxd RSS at start:                   \(rssKiB(pid) / 1024) MiB")
    let reader = try await BenchClient.connect(socketPath, group: group)
    reader.send(#"{"type":"subscribe","id":"r","payload":{"query":"subscription { tick }"}}"# + "\n")
    var stalled: [BenchClient] = []
    for i in 0..<count {
        let c = try await BenchClient.connect(socketPath, group: group, autoRead: false)
        c.send(#"{"type":"subscribe","id":"s\#(i)","payload":{"query":"subscription { tick }"}}"# + "\n")
        stalled.append(c)
    }
    _ = await waitUntil { await upstream.currentStats.activeSubscriptions == 1 }
    try await Task.sleep(for: .milliseconds(500))
    var peak = rssKiB(pid)
    var sent = 0
    // 8 MiB behind for each of the clients would be count × 8 MiB; send until all are cut.
    let target = (count + 10) * 8 * 1024 / 4
    while sent < target {
        await upstream.tick(count: 200, padding: 4_000)
        sent += 200
        peak = max(peak, rssKiB(pid))
        if sent % 2_000 == 0 { try await Task.sleep(for: .milliseconds(5)) }
    }
    _ = await waitUntil(.seconds(60)) { reader.lines.value >= sent }
    peak = max(peak, rssKiB(pid))
    let afterSend = rssKiB(pid)
    for c in stalled { c.channel.close(promise: nil) }
    try await Task.sleep(for: .seconds(4))
    print("  messages sent:                          \(sent) (\(sent * 4 / 1024) MiB per client)")
    print("  reader received:                        \(reader.lines.value - 1) lines (state + \(sent) expected)")
    print("  gqlmuxd RSS peak while behind:          \(peak / 1024) MiB")
    print("  gqlmuxd RSS when the stream ended:      \(afterSend / 1024) MiB")
    print("  gqlmuxd RSS 4 s after the clients left: \(rssKiB(pid) / 1024) MiB")
    reader.channel.close(promise: nil)
    await upstream.shutdown()
    try? await group.shutdownGracefully()
}
