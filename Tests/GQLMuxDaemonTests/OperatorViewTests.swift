import Foundation
import GQLMuxVocabulary
import NIOCore
import RequestValidation
import TestUpstream
import Testing

@testable import GQLMuxDaemon

/// The operator's view: its pure parts on a manual clock, then `clients` and `operations`
/// through a real daemon and real sockets.
@Suite struct OperationStatsTests {
    @Test func outagesAreCountedAndTheirGapAddsUpTheOneUnderWayIncluded() {
        var stats = OperationStats()
        stats.stateChanged(to: .active, at: 1_000)
        stats.stateChanged(to: .reconnecting, at: 2_000)
        stats.stateChanged(to: .reconnecting, at: 2_500)  // still the same outage
        stats.stateChanged(to: .active, at: 5_000)
        #expect(stats.outages == 1)
        #expect(stats.gap(at: 9_000) == 3_000)
        stats.stateChanged(to: .paused, at: 10_000)
        #expect(stats.outages == 2)
        #expect(stats.gap(at: 11_000) == 4_000)
        stats.noteRun(3, at: 12_000)
        #expect(stats.results == 3)
        #expect(stats.lastResultAt == 12_000)
    }
}

@Suite struct OperationLabelTests {
    @Test func theFirstSelectionNamesAnAnonymousOperation() {
        #expect(OperationLabel.firstSelection(of: "subscription { tick }") == "tick")
        #expect(OperationLabel.firstSelection(of: "subscription($a: In = {x: 1}) { price(of: $a) { v } }") == "price")
        #expect(OperationLabel.firstSelection(of: "subscription { renamed: tick }") == "tick")
        #expect(OperationLabel.firstSelection(of: "# a comment {\n{ ...Parts }") == "...Parts")
        #expect(OperationLabel.firstSelection(of: "{ ... on Query { a } }") == "... on Query")
        #expect(OperationLabel.firstSelection(of: "not graphql") == nil)
    }

    @Test func aPayloadIsLabelledAsItsRequestWouldBe() {
        #expect(OperationLabel.of(ByteBuffer(string: #"{"query":"subscription OnTick { tick }"}"#)) == "OnTick")
        #expect(OperationLabel.of(ByteBuffer(string: #"{"query":"subscription { a } subscription B { b }","operationName":"B"}"#)) == "B")
        #expect(OperationLabel.of(ByteBuffer(string: #"{"query":"subscription { tick(n: 1) }","variables":{"n":2}}"#)) == "tick")
        #expect(OperationLabel.of(ByteBuffer()) == nil)
    }

    @Test func aNamedOperationIsShownByItsNameAndVariablesNever() throws {
        let named = try SubscribeRequest.parse(
            ByteBuffer(string: #"{"query":"subscription OnPrice($s: String!) { price(symbol: $s) }","variables":{"s":"SECRET"}}"#)
        )
        #expect(named.label == "OnPrice")
        let anonymous = try SubscribeRequest.parse(ByteBuffer(string: #"{"query":"subscription { price(symbol: \"SECRET\") }"}"#))
        #expect(anonymous.label == "price")
    }
}

@Suite struct PrintableTests {
    @Test func controlCharactersNeverReachAnOperatorsTerminal() {
        #expect(Daemon.printable("app\u{1B}[2J\u{07}x\u{9B}y") == "app?[2J?x?y")
        #expect(Daemon.printable("plain name ✓") == "plain name ✓")
    }
}

@Suite(.serialized) struct OperatorViewDaemonTests {
    private func payload(_ line: String) throws -> [[String: Any]] {
        let parsed = try JSONSerialization.jsonObject(with: Data(line.utf8))
        let object = try #require(parsed as? [String: Any])
        return try #require(object["payload"] as? [[String: Any]])
    }

    private func ownProcessName() -> String {
        (try? String(contentsOfFile: "/proc/self/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }

    @Test func clientsAndOperationsListWhoHoldsWhatWithTheirFigures() async throws {
        try await DaemonRig.with { rig in
            let a = try await rig.connect()
            a.send(#"{"type":"connection_init","payload":{"protocol":1,"client":"alpha"}}"#)
            a.subscribe(id: "t")
            let b = try await rig.connect()
            b.send(#"{"type":"connection_init","payload":{"protocol":1,"client":"beta"}}"#)
            b.subscribe(id: "t1")
            b.send(#"{"type":"subscribe","id":"t2","payload":{"query":"subscription Ticks { tick }"}}"#)
            await rig.upstreamActive(2)
            for _ in 0..<3 { _ = await rig.server.tick() }
            await until("the ticks", on: a, b) { a.lines(containing: #""type":"next""#).count == 3 && b.lines(containing: #""type":"next""#).count == 6 }

            a.send(#"{"type":"clients","id":"c"}"#)
            a.send(#"{"type":"operations","id":"o"}"#)
            await until("both answers", on: a) { !a.lines(containing: #""type":"clients""#).isEmpty && !a.lines(containing: #""type":"operations""#).isEmpty }
            let clientsLine = try #require(a.lines(containing: #""type":"clients""#).first)
            let clients = try payload(clientsLine)
            #expect(clients.count == 2)
            let alpha = try #require(clients.first { $0["name"] as? String == "alpha" })
            let beta = try #require(clients.first { $0["name"] as? String == "beta" })
            #expect((alpha["id"] as? Int ?? 0) < (beta["id"] as? Int ?? 0))
            for row in [alpha, beta] {
                #expect(row["kind"] as? String == "line")
                #expect(row["listener"] as? String == "line")
                #expect(row["uid"] as? Int == Int(getuid()))
                #expect(row["pid"] as? Int == Int(getpid()))
                #expect(row["process"] as? String == ownProcessName())
                #expect((row["upstreams"] as? [[String: Any]])?.first?["upstream"] as? String == "default")
                #expect((row["upstreams"] as? [[String: Any]])?.first?["identity"] as? String == "host")
                #expect(row["restarts"] as? Int == 0)
                #expect(row["slowConsumerCuts"] as? Int == 0)
                #expect((row["connectedAt"] as? Double ?? 0) > Date().timeIntervalSince1970 - 60)
            }
            #expect(alpha["subscriptions"] as? Int == 1)
            #expect(beta["subscriptions"] as? Int == 2)
            #expect(alpha["results"] as? Int == 3)
            #expect(beta["results"] as? Int == 6)
            // What was written: every next line counts, and the states before them.
            let alphaNextBytes = a.lines(containing: #""type":"next""#).reduce(0) { $0 + $1.utf8.count + 1 }
            #expect((alpha["bytes"] as? Int ?? 0) >= alphaNextBytes)
            #expect((alpha["rate"] as? Double ?? 0) > 0)
            #expect((beta["rate"] as? Double ?? 0) > (alpha["rate"] as? Double ?? 0))

            let operationsLine = try #require(a.lines(containing: #""type":"operations""#).first)
            let operations = try payload(operationsLine)
            #expect(operations.count == 2)
            let shared = try #require(operations.first { $0["operation"] as? String == "tick" })
            let named = try #require(operations.first { $0["operation"] as? String == "Ticks" })
            #expect(shared["subscribers"] as? Int == 2)
            #expect(named["subscribers"] as? Int == 1)
            for row in [shared, named] {
                #expect(row["kind"] as? String == "subscription")
                #expect(row["state"] as? String == "active")
                #expect(row["upstream"] as? String == "default")
                #expect(row["results"] as? Int == 3)
                #expect(row["outages"] as? Int == 0)
                #expect((row["lastResultAge"] as? Double).map { $0 >= 0 && $0 < 30 } == true)
            }
        }
    }

    @Test func aClientThatStopsReadingShowsWhatItHasNotReadTheKernelsShareIncluded() async throws {
        try await DaemonRig.with { rig in
            let stalled = try await rig.connect(autoRead: false)
            stalled.subscribe(id: "t")
            let asker = try await rig.connect()
            asker.subscribe(id: "t")
            await rig.upstreamActive(1)
            await until("the subscription is active", on: asker) { !asker.lines(containing: #""state":"active""#).isEmpty }
            // 20 results of about 1 KiB: far under the socket's buffer, so NIO holds none of it.
            await rig.server.tick(count: 20, padding: 1_000)
            await until("the reader has them all", on: asker) { asker.lines(containing: #""type":"next""#).count == 20 }
            asker.send(#"{"type":"clients","id":"c"}"#)
            await until("the clients", on: asker) { !asker.lines(containing: #""type":"clients""#).isEmpty }
            let line = try #require(asker.lines(containing: #""type":"clients""#).first)
            let rows = try payload(line)
            // The stalled client connected first: the lower number.
            let byNumber = rows.sorted { ($0["id"] as? Int ?? 0) < ($1["id"] as? Int ?? 0) }
            #expect(byNumber.count == 2)
            let quiet = try #require(byNumber.first)
            let reader = try #require(byNumber.last)
            #expect(reader["results"] as? Int == 20)
            #expect(quiet["results"] as? Int == 20, "written to it: it reads none of them")
            #expect((quiet["queuedBytes"] as? Int ?? 0) >= 20_000, "\(quiet)")
            #expect((quiet["queuedPeakBytes"] as? Int ?? 0) >= (quiet["queuedBytes"] as? Int ?? 0))
            #expect((reader["queuedBytes"] as? Int ?? -1) < 4_096, "\(reader)")
        }
    }

    @Test func anOutageIsCountedWithItsGapAndARestartCarriesTheClientsFigures() async throws {
        try await DaemonRig.with { rig in
            let a = try await rig.connect()
            a.subscribe(id: "t")
            await rig.upstreamActive(1)
            await until("active", on: a) { a.lines(containing: #""state":"active""#).count == 1 }
            await rig.server.closeAll(code: 1012, reason: "service restart")
            await until("reconnecting, then active", on: a) { a.lines(containing: #""state":"active""#).count == 2 }
            a.send(#"{"type":"operations","id":"o"}"#)
            await until("the operations", on: a) { !a.lines(containing: #""type":"operations""#).isEmpty }
            let operationsLine = try #require(a.lines(containing: #""type":"operations""#).first)
            let row = try #require(try payload(operationsLine).first)
            #expect(row["outages"] as? Int == 1)
            #expect((row["gapSeconds"] as? Double ?? 0) > 0)

            a.send(#"{"type":"clients","id":"before"}"#)
            await until("the clients", on: a) { !a.lines(containing: #""id":"before""#).isEmpty }
            let beforeLine = try #require(a.lines(containing: #""id":"before""#).first)
            let before = try #require(try payload(beforeLine).first)
            try await rig.restartOnline()
            await rig.upstreamActive(1)
            await until("active again after the restart", on: a) { a.lines(containing: "gapMs").count == 2 }
            a.send(#"{"type":"clients","id":"after"}"#)
            await until("the clients again", on: a) { !a.lines(containing: #""id":"after""#).isEmpty }
            let afterLine = try #require(a.lines(containing: #""id":"after""#).first)
            let after = try #require(try payload(afterLine).first)
            #expect(after["restarts"] as? Int == 1)
            #expect(after["connectedAt"] as? Double == before["connectedAt"] as? Double)
        }
    }
}

@Suite struct OperatorViewStoreTests {
    @Test func oneUserNamingItsProcessesAtWillCannotFillTheCutsOfOthers() {
        let view = OperatorView()
        for n in 0..<5_000 { view.cut(uid: 1_000, process: "p\(n)") }
        #expect(view.cuts(uid: 1_000, process: "p0") == 1)
        #expect(view.cuts(uid: 1_000, process: "p4999") == 5_000 - OperatorView.cutKeysPerUID)
        view.cut(uid: 2_000, process: "victim")
        #expect(view.cuts(uid: 2_000, process: "victim") == 1)
    }

    @Test func aTableServesQuestionsUntilTheCoreChangesOrItIsOld() {
        let view = OperatorView()
        var made = 0
        let make = { () -> [OperatorView.OperationEntry] in
            made += 1
            return []
        }
        _ = view.operations(now: 1_000, changes: 1, make: make)
        _ = view.operations(now: 1_000 + OperatorView.tableLife - 1, changes: 1, make: make)
        #expect(made == 1)
        _ = view.operations(now: 2_000, changes: 2, make: make)
        #expect(made == 2)
        _ = view.operations(now: 2_000 + OperatorView.tableLife, changes: 2, make: make)
        #expect(made == 3)
    }

    @Test func aPongIsARoundTripOnlyForThePingItAnswersAndNotAMessage() {
        let view = OperatorView()
        #expect(view.transportEvent(.pong(received: true), lane: .primary, connection: 0, now: 5) == nil, "no ping out: no round trip")
        #expect(view.health[.primary]?.lastMessageAt == nil)
        _ = view.transportEvent(.ping(received: false), lane: .primary, connection: 0, now: 1_000)
        #expect(view.transportEvent(.pong(received: true), lane: .primary, connection: 0, now: 3_500) == .nanoseconds(2_500))
        // Keep-alives of two connections of one lane: each one's gap is its own.
        _ = view.transportEvent(.keepAlive, lane: .primary, connection: 0, now: 10_000)
        _ = view.transportEvent(.keepAlive, lane: .primary, connection: 1, now: 11_000)
        _ = view.transportEvent(.keepAlive, lane: .primary, connection: 0, now: 20_000)
        #expect(view.health[.primary]?.keepAliveGap == .nanoseconds(10_000))
        #expect(view.health[.primary]?.lastMessageAt == 20_000)
    }
}

@Suite struct ClientNameTests {
    @Test func aNameIsCutAt64ScalarsHoweverManyMarksACharacterCarries() {
        let marks = String(repeating: "\u{301}", count: 10_000)
        let line = ByteBuffer(string: #"{"type":"connection_init","payload":{"client":"a\#(marks)"}}"#)
        guard case .connectionInit(let name, _) = ClientRequest(line: line, limits: SubscribeRequest.Limits()) else {
            Issue.record("not a connection_init")
            return
        }
        #expect(name?.unicodeScalars.count == 64)
    }
}
