import Foundation
import GQLMuxClient
import GQLMuxDaemon
import TestUpstream
import Testing

/// Late joiners and gaps through the real daemon, its socket and the in-process upstream.
@Suite struct ReplayAndGapDaemonTests {
    private static func subscribe(_ client: LineClient, id: String, replayLast: Bool?) {
        let extensions = replayLast.map { #","extensions":{"gqlmux":{"replayLast":\#($0)}}"# } ?? ""
        client.send(#"{"type":"subscribe","id":"\#(id)","payload":{"query":"subscription { tick }"\#(extensions)}}"#)
    }

    @Test func aLateJoinerThatAsksGetsTheLatestResultAtOnceAndTheOthersWait() async throws {
        try await DaemonRig.with { rig in
            let first = try await rig.connect()
            Self.subscribe(first, id: "a", replayLast: true)
            await rig.upstreamActive(1)
            await until("a active", on: first) { first.lines(containing: #""state":"active""#).count == 1 }
            #expect(await !rig.server.currentStats.lastSubscribePayload.contains("gqlmux"), "extensions.gqlmux never goes upstream")
            _ = await rig.server.tick()
            await until("a's first result", on: first) { first.lines(containing: #""type":"next""#).count == 1 }

            let asking = try await rig.connect()
            let started = ContinuousClock.now
            Self.subscribe(asking, id: "b", replayLast: true)
            await until("b's replay", on: asking) { asking.lines(containing: #""type":"next""#).count == 1 }
            let waited = ContinuousClock.now - started
            print("late joiner with replayLast: first result \(waited) after its subscribe")
            #expect(asking.lines(containing: #""type":"next""#).first?.hasSuffix(#","replayed":true}"#) == true)
            #expect(asking.lines.first?.contains(#""state":"active""#) == true, "its state comes before the replay")

            let plain = try await rig.connect()
            Self.subscribe(plain, id: "c", replayLast: nil)
            await until("c active", on: plain) { plain.lines(containing: #""state":"active""#).count == 1 }
            #expect(await rig.server.currentStats.activeSubscriptions == 1, "all three share one upstream subscription")
            // The marker: a fresh result. A replay would come before it, so the first result c
            // hears must be that fresh one.
            _ = await rig.server.tick()
            let fresh = await rig.server.onLoop { rig.server.tickCountOnLoop }
            await until("c's first result", on: plain) { plain.lines(containing: #""type":"next""#).count >= 1 }
            let firstOfC = plain.lines(containing: #""type":"next""#)[0]
            #expect(
                firstOfC.contains(#""tick":\#(fresh)"#) && !firstOfC.contains("replayed"),
                "a subscriber that did not ask waits for the next real result: \(firstOfC)"
            )
        }
    }

    @Test func theActiveAfterAnOutageTellsTheGapAndNoStaleResultIsReplayed() async throws {
        try await DaemonRig.with { rig in
            let first = try await rig.connect()
            Self.subscribe(first, id: "a", replayLast: true)
            await rig.upstreamActive(1)
            _ = await rig.server.tick()
            await until("a's first result", on: first) { first.lines(containing: #""type":"next""#).count == 1 }
            #expect(first.lines(containing: "gapMs").isEmpty, "the first active ends no gap")

            let closing = ContinuousClock.now
            await rig.server.closeAll(code: 1012, reason: "service restart")
            await until("a active again", on: first) { first.lines(containing: #""state":"active""#).count == 2 }
            let outage = ContinuousClock.now - closing
            let resumed = try #require(first.lines(containing: #""state":"active""#).last)
            let gap = try #require(resumed.split(separator: "\"gapMs\":").last.flatMap { Int($0.prefix { $0.isNumber }) })
            // The gap told is the outage the test saw from outside: no longer than from the
            // close to the active (the daemon's own clock, so a millisecond of rounding).
            let outageMs = Int(outage.components.seconds * 1_000 + outage.components.attoseconds / 1_000_000_000_000_000)
            #expect(gap >= 0 && gap <= outageMs + 1, "gapMs \(gap) for an outage of \(outageMs) ms seen by the test")
            #expect(first.lines(containing: #""state":"reconnecting""#).count == 1)

            let late = try await rig.connect()
            Self.subscribe(late, id: "b", replayLast: true)
            await until("b active", on: late) { late.lines(containing: #""state":"active""#).count == 1 }
            // The marker: a fresh result, which a replay would come before.
            _ = await rig.server.tick()
            let fresh = await rig.server.onLoop { rig.server.tickCountOnLoop }
            await until("b's result", on: late) { late.lines(containing: #""type":"next""#).count >= 1 }
            let firstOfB = late.lines(containing: #""type":"next""#)[0]
            #expect(firstOfB.contains(#""tick":\#(fresh)"#) && !firstOfB.contains("replayed"), "the result from before the outage is forgotten: \(firstOfB)")
        }
    }
}

/// The Swift client library exposes both: a replayed result says so, and a subscription
/// knows how long its stream was down.
@Suite struct ReplayAndGapClientTests {
    @Test func theSwiftClientMarksReplaysAndKeepsTheLastGap() async throws {
        try await DaemonRig.with { rig in
            let client = GQLMuxClient(configuration: .init(socketPath: rig.socketPath, clientName: "replay-test"))
            let first = client.subscribe(query: "subscription { tick }", replayLast: true)
            var firstResults = first.makeAsyncIterator()
            await rig.upstreamActive(1)
            _ = await rig.server.tick()
            let original = try #require(try await firstResults.next())
            #expect(!original.replayed)
            #expect(first.lastGap == nil)

            let late = client.subscribe(query: "subscription { tick }", replayLast: true)
            var lateResults = late.makeAsyncIterator()
            let replay = try #require(try await lateResults.next())
            #expect(replay.replayed)
            #expect(replay.json == original.json)

            let snapshotting = client.subscribe(query: "subscription { tick }", resnapshot: "{ hello }")
            var snapshotResults = snapshotting.makeAsyncIterator()
            // A client library subscription signals nobody: its state is polled.
            await eventually("three subscribers") { await rig.server.currentStats.activeSubscriptions == 1 && snapshotting.state == .active }

            await rig.server.closeAll(code: 1012, reason: "service restart")
            await eventually("a gap told") { first.lastGap != nil && first.state == .active }
            #expect(try #require(first.lastGap) >= .zero)
            let afterGap = try #require(try await snapshotResults.next())
            #expect(afterGap.snapshot)
            #expect(afterGap.json == #"{"data":{"hello":"world"}}"#)
            snapshotting.cancel()
            first.cancel()
            late.cancel()
            await client.close()
        }
    }
}

/// `resnapshot` through the daemon: after an outage, the named query runs once and its result
/// reaches the subscribers that named it before any result of the resumed stream.
@Suite struct SnapshotDaemonTests {
    @Test func afterAnOutageTheSnapshotComesFirstOncePerStream() async throws {
        try await DaemonRig.with { rig in
            let naming = try await rig.connect()
            let also = try await rig.connect()
            let plain = try await rig.connect()
            let snapshot = #","extensions":{"gqlmux":{"resnapshot":"{ hello }"}}"#
            naming.send(#"{"type":"subscribe","id":"a","payload":{"query":"subscription { tick }"\#(snapshot)}}"#)
            also.send(#"{"type":"subscribe","id":"b","payload":{"query":"subscription { tick }"\#(snapshot)}}"#)
            plain.send(#"{"type":"subscribe","id":"c","payload":{"query":"subscription { tick }"}}"#)
            await rig.upstreamActive(1)
            for client in [naming, also, plain] {
                await until("active", on: client) { client.lines(containing: #""state":"active""#).count == 1 }
            }
            let queriesBefore = await rig.server.currentStats.queries
            #expect(queriesBefore == 0, "no snapshot before the first gap")

            await rig.server.closeAll(code: 1012, reason: "service restart")
            await until("resumed", on: naming) { naming.lines(containing: "gapMs").count == 1 }
            _ = await rig.server.tick()
            for client in [naming, also] {
                await until("snapshot and tick", on: client) { client.lines(containing: #""type":"next""#).count == 2 }
                let nexts = client.lines(containing: #""type":"next""#)
                #expect(nexts[0].contains(#""payload":{"data":{"hello":"world"}},"snapshot":true"#), "\(nexts)")
                #expect(nexts[1].contains("tick") && !nexts[1].contains("snapshot"), "\(nexts)")
                let lines = client.lines
                let resumed = try #require(lines.firstIndex { $0.contains("gapMs") })
                #expect(resumed < lines.firstIndex(of: nexts[0])!, "the gap is told before the snapshot")
            }
            await until("plain's tick", on: plain) { plain.lines(containing: #""type":"next""#).count == 1 }
            #expect(plain.lines(containing: "snapshot").isEmpty, "a subscriber that named none gets none")
            #expect(await rig.server.currentStats.queries == 1, "one query for the two subscribers that named it")
            #expect(await !rig.server.currentStats.lastSubscribePayload.contains("gqlmux"))
        }
    }

    @Test func aSnapshotThatIsNotOneQueryIsRefused() async throws {
        try await DaemonRig.with { rig in
            let client = try await rig.connect()
            client.send(
                #"{"type":"subscribe","id":"a","payload":{"query":"subscription { tick }","extensions":{"gqlmux":{"resnapshot":"mutation { increment }"}}}}"#
            )
            await until("refused", on: client) { client.lines(containing: "BAD_REQUEST").count == 1 }
            #expect(client.lines(containing: "exactly one query operation").count == 1)
            #expect(await rig.server.currentStats.subscribes == 0)
        }
    }
}
