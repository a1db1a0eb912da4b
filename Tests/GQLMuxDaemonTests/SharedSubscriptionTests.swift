import Foundation
import GQLMuxDaemon
import NIOCore
import TestUpstream
import Testing

/// Many clients sharing upstream operations through the daemon end to end (the pure multiplexer is
/// tested in MultiplexingTests).
@Suite(.serialized) struct SharedSubscriptionTests {
    @Test func fiftyClientsShareOneUpstreamSubscription() async throws {
        try await DaemonRig.with() { rig in
            var clients: [LineClient] = []
            for i in 0..<50 {
                let client = try await rig.connect()
                // Same operation, spelled differently: whitespace and comments do not matter.
                let query = i % 2 == 0 ? "subscription { tick }" : "# a comment\nsubscription {\n  tick\n}"
                client.subscribe(id: "s\(i)", query)
                clients.append(client)
            }
            await eventually("all 50 active") { clients.allSatisfy { !$0.lines(containing: #""state":"active""#).isEmpty } }
            await rig.upstreamActive(1)
            #expect(await rig.server.currentStats.subscriptionSubscribes == 1)
            await rig.server.tick()
            await eventually("every client got the tick") {
                clients.enumerated().allSatisfy { i, c in c.lines.contains(#"{"type":"next","id":"s\#(i)","payload":{"data":{"tick":1}}}"#) }
            }
        }
    }

    @Test func lastSubscriberLeavingOrCrashingCompletesUpstream() async throws {
        try await DaemonRig.with() { rig in
            let a = try await rig.connect()
            let b = try await rig.connect()
            a.subscribe(id: "1")
            b.subscribe(id: "x")
            await until("both active", on: a, b) { !a.lines(containing: "active").isEmpty && !b.lines(containing: "active").isEmpty }
            a.crash()
            // The daemon has handled the crash once it logs the disconnect; nothing went upstream.
            await until("crash handled", on: rig.log) { rig.log.count(.clientDisconnected) == 1 }
            #expect(await rig.server.currentStats.completesReceived == 0)
            #expect(await rig.server.currentStats.activeSubscriptions == 1)
            b.send(#"{"type":"complete","id":"x"}"#)
            await until("upstream completed", upstream: rig.server) { $0.completesReceived == 1 }
            #expect(await rig.server.currentStats.activeSubscriptions == 0)
            // A crash of the last subscriber completes upstream too.
            let c = try await rig.connect()
            c.subscribe(id: "c")
            await until("c active", upstream: rig.server) { $0.activeSubscriptions == 1 }
            c.crash()
            await until("completed after crash", upstream: rig.server) { $0.completesReceived == 2 }
        }
    }

    @Test func lateJoinerGetsCurrentStateAndOnlyNewEvents() async throws {
        try await DaemonRig.with() { rig in
            let early = try await rig.connect()
            early.subscribe(id: "e")
            await rig.upstreamActive(1)
            await rig.server.tick()
            await until("first tick", on: early) { !early.lines(containing: #""tick":1"#).isEmpty }
            let late = try await rig.connect()
            late.subscribe(id: "l")
            await until("late joiner told active at once", on: late) { late.lines == [#"{"type":"state","id":"l","state":"active"}"#] }
            await rig.server.tick()
            await until("late joiner gets tick 2 only", on: late) { late.lines.count == 2 }
            #expect(late.lines[1] == #"{"type":"next","id":"l","payload":{"data":{"tick":2}}}"#)
            #expect(await rig.server.currentStats.subscriptionSubscribes == 1)
        }
    }

    @Test func queriesAndMutationsAreNeverDeduplicated() async throws {
        try await DaemonRig.with() { rig in
            let a = try await rig.connect()
            let b = try await rig.connect()
            for client in [a, b] {
                client.subscribe(id: "q", "{ hello }")
                client.subscribe(id: "m", "mutation { increment }")
            }
            await until("both answered", on: a, b) { a.lines(containing: "complete").count == 2 && b.lines(containing: "complete").count == 2 }
            let stats = await rig.server.currentStats
            #expect(stats.queries == 2 && stats.mutations == 2)
            #expect(a.lines.contains(#"{"type":"next","id":"q","payload":{"data":{"hello":"world"}}}"#))
            #expect(a.lines(containing: "state").isEmpty)  // no lifecycle states for single results
        }
    }

    @Test func upstreamCompleteAndErrorAreFannedOut() async throws {
        try await DaemonRig.with() { rig in
            let a = try await rig.connect()
            let b = try await rig.connect()
            a.subscribe(id: "a")
            b.subscribe(id: "b")
            await until("active", upstream: rig.server, also: b) { $0.activeSubscriptions == 1 && b.lines.count == 1 }
            await rig.server.completeAll()
            await until("both completed", on: a, b) {
                a.lines.contains(#"{"type":"complete","id":"a"}"#) && b.lines.contains(#"{"type":"complete","id":"b"}"#)
            }
            // Fatal close: every subscriber gets UPSTREAM_CLOSED with the code and reason.
            a.subscribe(id: "a2")
            b.subscribe(id: "b2")
            await until("resubscribed", upstream: rig.server, also: b) { $0.activeSubscriptions == 1 && b.lines(containing: "b2").count == 1 }
            await rig.server.closeAll(code: 4403, reason: "Forbidden")
            await until("errors fanned out", on: a, b) {
                !a.lines(containing: #""id":"a2","payload":[{"message""#).isEmpty && !b.lines(containing: #""id":"b2","payload":[{"message""#).isEmpty
            }
            let line = b.lines(containing: "UPSTREAM_CLOSED").first ?? ""
            #expect(line.contains(#""closeCode":4403"#) && line.contains(#""closeReason":"Forbidden""#))
        }
    }

    @Test func eachSubscriberSeesReconnectingThenActiveAcrossAnUpstreamDrop() async throws {
        try await DaemonRig.with() { rig in
            let a = try await rig.connect()
            a.subscribe(id: "a")
            await rig.upstreamActive(1)
            await rig.server.closeAll(code: 1011, reason: "restart")
            await until("reconnecting then active, with the gap", on: a) {
                let states = a.lines(containing: "state")
                return states.count == 3
                    && states[0] == #"{"type":"state","id":"a","state":"active"}"#
                    && states[1] == #"{"type":"state","id":"a","state":"reconnecting"}"#
                    && states[2].hasPrefix(#"{"type":"state","id":"a","state":"active","gapMs":"#)
            }
        }
    }

    @Test func slowConsumerIsDisconnectedWithoutStallingOthers() async throws {
        try await DaemonRig.with(extraConfig: "[limits]\nclient_buffer_bytes = 262144") { rig in
            let slow = try await rig.connect(autoRead: false)
            let fast = try await rig.connect()
            slow.subscribe(id: "slow")
            fast.subscribe(id: "fast")
            await rig.upstreamActive(1)
            await until("both told active", on: fast) { !fast.lines.isEmpty }
            // 4 MB in batches of ~55 KB. Each batch is sent only once the fast reader has the previous
            // one, so it is never more than one batch (well under client_buffer_bytes) behind, however
            // loaded the machine; the client that never reads falls behind by all of it.
            let batches = 80, perBatch = 100
            for batch in 1...batches {
                await rig.server.tick(count: perBatch, padding: 500)
                await until("fast client got batch \(batch)", within: 30, on: fast) {
                    fast.lines(containing: #""type":"next""#).count == batch * perBatch
                }
            }
            await until("slow client disconnected", on: rig.log) { rig.log.count(.slowConsumer) == 1 }
            #expect(await rig.server.currentStats.activeSubscriptions == 1)
            _ = try? await slow.channel.setOption(.autoRead, value: true).get()
            slow.channel.read()
            await until("slow client closed", on: slow) { slow.isClosed }
            #expect(fast.isClosed == false)
        }
    }
}
