import Foundation
import GQLMuxDaemon
import NIOCore
import NIOPosix
import TestUpstream
import Testing

/// Issue 7's numbered failures, over real Unix sockets and a real WebSocket upstream: what one
/// local client, config file or upstream sends costs that sender an error and nobody else anything.
@Suite(.serialized, .timeLimit(.minutes(5))) struct HostileInputTests {
    /// A subscriber that must see nothing but its ticks (and no reconnect) while others misbehave.
    func watcher(_ rig: DaemonRig) async throws -> LineClient {
        let w = try await rig.connect()
        w.subscribe(id: "w")
        await rig.upstreamActive(1)
        await until("watcher active", on: w) { !w.lines(containing: #""state":"active""#).isEmpty }
        return w
    }

    /// The watcher receives a fresh tick: the daemon is alive and the stream flows.
    func expectStillStreams(_ rig: DaemonRig, _ w: LineClient) async {
        let before = w.lines(containing: #""type":"next""#).count
        _ = await rig.server.tick()
        await until("watcher got the tick", on: w) { w.lines(containing: #""type":"next""#).count == before + 1 }
    }

    /// 1. A document nesting 50,000 selections is refused before parsing (it crashed the daemon).
    @Test func aDocumentNesting50000SelectionsIsRefusedAndNobodyNotices() async throws {
        try await DaemonRig.with() { rig in
            let w = try await watcher(rig)
            let bad = try await rig.connect()
            let deep = "query " + String(repeating: "{ a ", count: 50_000) + String(repeating: "} ", count: 50_000)
            bad.subscribe(id: "deep", deep)
            await until("refused", on: bad) { !bad.lines(containing: #""id":"deep""#).isEmpty }
            #expect(bad.lines(containing: "LIMIT_EXCEEDED").count == 1)
            let wide = "{ " + (0..<20_000).map { "f\($0)" }.joined(separator: " ") + " }"
            bad.subscribe(id: "wide", wide)
            await until("wide refused", on: bad) { !bad.lines(containing: #""id":"wide""#).isEmpty }
            #expect(bad.lines(containing: "max_document_tokens").count == 1)
            await expectStillStreams(rig, w)
            #expect(await rig.server.currentStats.subscribes == 1)  // nothing reached the upstream
            #expect(w.lines.allSatisfy { !$0.contains("reconnecting") })
        }
    }

    /// 2. Invalid UTF-8 or an unpaired surrogate in a line: an error for its sender, never forwarded
    /// (forwarded, it made the server close 1007 and every subscriber reconnect in a loop).
    @Test(arguments: [
        [UInt8](#"{"type":"subscribe","id":"x","payload":{"query":"subscription { tick }","variables":{"s":""#.utf8) + [0xFF, 0xFE] + Array(#""}}}"#.utf8),
        Array(#"{"type":"subscribe","id":"x","payload":{"query":"subscription { tick }","variables":{"s":"\ud800"}}}"#.utf8),
        Array(#"{"type":"subscribe","id":"x","payload":{"query":"subscription { tick }","variables":{"s":"\udc00\ud800"}}}"#.utf8),
        [UInt8](#"{"type":"subscribe","id":"x","payload":{"query":"subscription { tick }","variables":{"s":""#.utf8) + [0xED, 0xA0, 0x80]
            + Array(#""}}}"#.utf8),
        [UInt8](#"{"type":"subscribe","id":"x","payload":{"query":"subscription { tick }","variables":{"s":""#.utf8) + [0xC0, 0xAF] + Array(#""}}}"#.utf8),
    ])
    func aLineThatIsNotUnicodeTextCostsOnlyItsSender(line: [UInt8]) async throws {
        try await DaemonRig.with() { rig in
            let w = try await watcher(rig)
            let bad = try await rig.connect()
            var buffer = ByteBuffer(bytes: line)
            buffer.writeString("\n")
            try await bad.channel.writeAndFlush(buffer)
            await until("sender refused and closed", on: bad) { bad.isClosed }
            #expect(bad.lines.first?.contains("BAD_REQUEST") == true)
            await expectStillStreams(rig, w)
            let stats = await rig.server.currentStats
            #expect(stats.connections == 1)
            #expect(stats.subscribes == 1)
            #expect(w.lines.allSatisfy { !$0.contains("reconnecting") })
        }
    }

    /// 3. A text frame with invalid UTF-8 from the upstream fails the connection with 1007; nothing
    /// invalid reaches a local client, and the subscription resumes on a new connection.
    @Test func invalidUTF8FromTheUpstreamIsNeverForwarded() async throws {
        try await DaemonRig.with() { rig in
            let w = try await watcher(rig)
            await rig.server.sendTextBytes(Array(#"{"type":"next","id":"1","payload":{"data":{"s":""#.utf8) + [0xFF, 0xFE] + Array(#""}}}"#.utf8))
            await until("closed 1007", upstream: rig.server) { $0.clientCloseCodes.contains(1007) }
            await until("resubscribed", upstream: rig.server) { $0.connections == 2 }
            await rig.upstreamActive(1)
            await expectStillStreams(rig, w)
            #expect(w.lines(containing: #""type":"next""#).count == 1)
            #expect(w.lines(containing: "reconnecting").count == 1)
        }
    }

    /// Poison: a request that makes the server drop the whole connection is quarantined after one
    /// close; the other subscribers see one reconnect, never a loop.
    @Test func aPoisonOperationCostsTheOthersOneReconnectAndIsQuarantined() async throws {
        try await DaemonRig.with(upstreamConfig: "ping_interval = 0.1") { rig in
            let w = try await watcher(rig)
            let bad = try await rig.connect()
            bad.subscribe(id: "p", "subscription { tick(tag: \"POISON_1007\") }")
            await until("poison finished", on: bad) { !bad.lines(containing: "UPSTREAM_CLOSED").isEmpty }
            #expect(bad.lines(containing: "quarantined").count == 1)
            #expect(!bad.isClosed)  // an error for the operation, the client stays
            await rig.upstreamActive(1)
            await expectStillStreams(rig, w)
            // Counted, not slept: 10 more pings (one per 0.1 s) go only over a connection that
            // stays up; a reconnect loop would have opened many connections meanwhile.
            let pings = await rig.server.currentStats.pingsReceived
            await until("10 more pings on the same connection", upstream: rig.server) { $0.pingsReceived >= pings + 10 }
            #expect(await rig.server.currentStats.connections == 2)
            #expect(w.lines(containing: "reconnecting").count == 1)
            #expect(rig.log.count(.quarantined) == 1)
        }
    }

    /// 5. An upstream that acks and closes at once sees the backoff grow (it reset on every ack,
    /// 20 connections/s with a 0.05 s base).
    @Test func aFlappingUpstreamIsRetriedWithAGrowingBackoff() async throws {
        var options = TestUpstreamServer.Options()
        options.closeAfterAck = 1011
        let server = TestUpstreamServer(options: options)
        try await server.start()
        let dir = try makeTemporaryDirectory("gqlmuxd-flap")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = """
            [upstream]
            url = "\(server.url)"
            reconnect_interval = 0.05
            reconnect_max_interval = 30
            reconnect_jitter = 0
            [socket]
            path = "\(dir)/s.sock"
            """
        let configuration = try DaemonConfiguration.parse(config)
        let log = EventLog()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let started = ContinuousClock.now
        let running = try await RunningDaemon { hooks in
            try Daemon(configuration: configuration, configPath: nil, eventLoop: group.next(), events: log.events, hooks: hooks)
        }
        // Counted, not slept: the 6th connection comes after waits of 0.05, 0.1, 0.2, 0.4 and
        // 0.8 s (1.55 s); with the backoff reset on every ack it came after 5 × 0.05 s.
        await until("6 connections", within: 20, upstream: server) { $0.connections >= 6 }
        let elapsed = ContinuousClock.now - started
        await running.stop()
        await server.shutdown()
        try await group.shutdownGracefully()
        #expect(elapsed >= .milliseconds(1_400), "6 connections after \(elapsed)")
        let delays = log.all(.reconnecting).compactMap { $0["GQLMUX_DELAY_SEC"].flatMap(Double.init) }
        #expect(delays.count >= 3 && zip(delays, delays.dropFirst()).allSatisfy { $0 < $1 })
    }

    /// 6. Clients that never read are cut when all clients together pass total_buffer_bytes, the
    /// furthest behind first; a reading client keeps every message.
    @Test func theMemoryBudgetCutsTheClientsFurthestBehindAndSparesTheReader() async throws {
        try await DaemonRig.with(extraConfig: "[limits]\nclient_buffer_bytes = 524288\ntotal_buffer_bytes = 1048576") { rig in
            let w = try await watcher(rig)
            var stalled: [LineClient] = []
            for i in 0..<4 {
                let c = try await rig.connect(autoRead: false)
                c.subscribe(id: "s\(i)")
                stalled.append(c)
            }
            await until("all joined", on: rig.log) { rig.log.count(.subscribed) == 5 }
            for round in 1...40 {
                await rig.server.tick(count: 10, padding: 4_000)
                let sent = round * 10
                await until("reader keeps up", on: w) { w.lines(containing: #""type":"next""#).count == sent }
            }
            await until("budget enforced", on: rig.log) { rig.log.count(.memoryBudget) >= 1 }
            #expect(w.lines(containing: #""type":"next""#).count == 400)
            #expect(!w.isClosed)
            #expect(w.lines(containing: "SLOW_CONSUMER").isEmpty)
            // Each cut names how far behind the client was; the budget held after the cuts.
            let behind = rig.log.all(.memoryBudget).compactMap { $0["GQLMUX_BUFFERED_BYTES"].flatMap(Int.init) }
            #expect(!behind.isEmpty && behind.allSatisfy { $0 > 0 })
            await rig.upstreamActive(1)
        }
    }
}
