import Foundation
import GQLMuxDaemon
import TestUpstream
import Testing

/// Issue 8: the connection pool on the in-process upstream. Subscriptions go to the first
/// connection with room; another connection opens when every one is full; a full pool answers
/// LIMIT_EXCEEDED; dedup stays global; extra connections close when empty; each reconnects and
/// re-subscribes on its own.
@Suite struct ConnectionPoolTests {
    static let pool = "max_operations_per_connection = 2\nmax_connections = 2\nlazy_close_timeout = 0.2"

    @Test func operationsOverflowToANewConnectionAndAFullPoolRefuses() async throws {
        try await DaemonRig.with(upstreamConfig: Self.pool) { rig in
            let client = try await rig.connect()
            client.subscribe(id: "a", "subscription A { tick }")
            client.subscribe(id: "b", "subscription B { tick }")
            await rig.upstreamActive(2)
            #expect(await rig.server.currentStats.openConnections == 1)
            client.subscribe(id: "c", "subscription C { tick }")
            await rig.upstreamActive(3)
            #expect(await rig.server.currentStats.openConnections == 2, "the third operation opened a second connection")
            // An identical subscription joins the existing operation: it needs no slot.
            let other = try await rig.connect()
            other.subscribe(id: "a2", "subscription A { tick }")
            client.subscribe(id: "d", "subscription D { tick }")
            await rig.upstreamActive(4)
            client.subscribe(id: "e", "subscription E { tick }")
            await until("the fifth distinct operation is refused", on: client) { !client.lines(containing: #""id":"e""#).isEmpty }
            #expect(client.lines(containing: #""id":"e""#).first?.contains("LIMIT_EXCEEDED") == true)
            #expect(rig.log.all(.limitExceeded).last?["GQLMUX_LIMIT"] == "max_connections")

            client.send(#"{"type":"status","id":"s"}"#)
            await until("status", on: client) { !client.lines(containing: #""type":"status""#).isEmpty }
            let status = client.lines(containing: #""type":"status""#).first ?? ""
            #expect(status.contains(#""subscriptions":{"local":5,"upstream":4}"#), "\(status)")
            #expect(status.contains(#"{"id":0,"state":"connected","operations":2"#), "\(status)")
            #expect(status.contains(#"{"id":1,"state":"connected","operations":2"#), "\(status)")
            #expect(Set(rig.log.all(.connected).compactMap { $0["GQLMUX_CONNECTION"] }) == ["0", "1"])

            // Ticks reach every subscriber on both connections.
            let before = client.lines(containing: #""type":"next""#).count
            await rig.server.tick()
            await until("a tick for a, b, c, d and a2", on: client, other) {
                client.lines(containing: #""type":"next""#).count == before + 4 && !other.lines(containing: #""id":"a2","payload""#).isEmpty
            }
        }
    }

    @Test func anEmptyExtraConnectionClosesAndEachReconnectsOnItsOwn() async throws {
        try await DaemonRig.with(upstreamConfig: Self.pool) { rig in
            let client = try await rig.connect()
            for name in ["A", "B", "C"] { client.subscribe(id: name, "subscription \(name) { tick }") }
            await rig.upstreamActive(3)
            #expect(await rig.server.currentStats.openConnections == 2)

            // Both connections drop: each reconnects and re-subscribes its own operations.
            await rig.server.closeAll(code: 1012, reason: "restart")
            await until("both reconnected", on: rig.log) { rig.log.count(.reconnected) == 2 }
            await rig.upstreamActive(3)
            #expect(await rig.server.currentStats.openConnections == 2)

            // C lives alone on the second connection: when it completes, that connection closes
            // after lazy_close_timeout; the first stays.
            client.send(#"{"type":"complete","id":"C"}"#)
            await until("the empty extra connection closed", upstream: rig.server) { $0.openConnections == 1 }
            await rig.upstreamActive(2)
            // It opens again when needed.
            client.subscribe(id: "D", "subscription D { tick }")
            await rig.upstreamActive(3)
            #expect(await rig.server.currentStats.openConnections == 2)
        }
    }

    @Test func pauseAndResumeApplyToEveryConnection() async throws {
        try await DaemonRig.with(upstreamConfig: Self.pool) { rig in
            let client = try await rig.connect()
            for name in ["A", "B", "C"] { client.subscribe(id: name, "subscription \(name) { tick }") }
            await rig.upstreamActive(3)
            client.send(#"{"type":"pause","id":"p"}"#)
            await until("every connection closed", upstream: rig.server) { $0.openConnections == 0 }
            #expect(client.lines(containing: #""state":"paused""#).count == 3)
            client.send(#"{"type":"resume","id":"r"}"#)
            await rig.upstreamActive(3)
            #expect(await rig.server.currentStats.openConnections == 2)
        }
    }
}
