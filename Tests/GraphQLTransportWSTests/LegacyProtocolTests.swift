import GQLMuxVocabulary
import NIOCore
import Testing

@testable import GraphQLTransportWS

/// The legacy graphql-ws protocol (subscriptions-transport-ws) on the same state machine, on a
/// manual clock: its words on the wire, `ka` as the liveness signal, `connection_error` as a
/// refusal. Reconnect, re-subscribe, never-replay and close-code rules are the shared ones.
@Suite struct LegacyProtocolTests {
    @Test func itsWordsOnTheWire() {
        var h = Harness()
        h.start()
        let id = h.subscribe()
        let sent = h.connectAndAck(initPayload: ByteBuffer(string: #"{"token":"t"}"#), protocol: .legacyWS).sentTexts
        #expect(sent == [#"{"type":"connection_init","payload":{"token":"t"}}"#, #"{"type":"start","id":"1","payload":{"query":"subscription { tick }"}}"#])
        h.receive(#"{"type":"ka"}"#)
        let data = h.receive(#"{"type":"data","id":"1","payload":{"data":{"tick":1}}}"#)
        #expect(data.updates(id) == [.next(ByteBuffer(string: #"{"data":{"tick":1}}"#))])
        #expect(h.record(h.machine.complete(id: id, now: h.now)).sentTexts == [#"{"type":"stop","id":"1"}"#])
    }

    @Test func aSingleErrorObjectReachesClientsAsAnArrayOfErrors() {
        var h = Harness()
        h.start()
        let id = h.subscribe()
        h.connectAndAck(protocol: .legacyWS)
        let error = h.receive(#"{"type":"error","id":"1","payload":{"message":"queries are not allowed"}}"#)
        #expect(error.finish(id) == .error(.upstream(ByteBuffer(string: #"[{"message":"queries are not allowed"}]"#))))
        let other = h.subscribe()
        h.receive(#"{"type":"complete","id":"2"}"#)
        #expect(h.log.finish(other) == .completed)
    }

    @Test func noClientPingAndNoDeadlineBeforeTheFirstKeepAlive() {
        var h = Harness {
            $0.pingInterval = .seconds(20); $0.pongTimeout = .seconds(10)
        }
        h.start()
        h.subscribe()
        h.connectAndAck(protocol: .legacyWS)
        #expect(h.machine.nextDeadline == nil || h.machine.nextDeadline! >= h.now + .seconds(10))  // healthyAt only
        h.advance(ms: 600_000)
        #expect(!h.log.sentTexts.contains { $0.contains("ping") })
        #expect(h.machine.connectionState == .connected, "a server that never sends ka is not declared dead")
    }

    @Test func aPingFrameEachIntervalMeasuresTheRoundTripAndDecidesNothing() {
        var h = Harness {
            $0.pingInterval = .seconds(20); $0.pongTimeout = .seconds(10)
        }
        h.start()
        h.subscribe()
        h.connectAndAck(protocol: .legacyWS)
        let gen = h.lastGeneration!
        let first = h.advance(ms: 20_000)
        #expect(first.contains(.pingFrame(generation: gen)))
        #expect(first.events.contains(.ping(received: false)))
        #expect(first.sentTexts.isEmpty, "graphql-ws has no ping message")
        // Its pong frame is told as the pong, for the round trip.
        #expect(h.record(h.machine.pongFrame(generation: gen, now: h.now)).events == [.pong(received: true)])
        // A server that never answers ping frames is not declared dead for it (only `ka` silence is).
        h.advance(ms: 600_000)
        #expect(h.machine.connectionState == .connected)
        // A pong frame of a connection left behind is nothing.
        #expect(h.machine.pongFrame(generation: gen + 1, now: h.now).isEmpty)
    }

    @Test func pongFramesDoNotHideAServerThatStoppedSendingKeepAlives() {
        var h = Harness {
            $0.pingInterval = .seconds(20); $0.pongTimeout = .seconds(10)
        }
        h.start()
        h.subscribe()
        h.connectAndAck(protocol: .legacyWS)
        let gen = h.lastGeneration!
        h.receive(#"{"type":"ka"}"#)
        // Its WebSocket library answers every ping frame; the server sends nothing else.
        h.advance(ms: 20_000)
        _ = h.record(h.machine.pongFrame(generation: gen, now: h.now))
        #expect(h.machine.connectionState == .connected)
        let dead = h.advance(ms: 10_000)
        #expect(dead.aborts == 1, "30 s without a ka is a dead peer, pong frames or not")
    }

    @Test func silenceAfterKeepAlivesIsADeadPeer() {
        var h = Harness {
            $0.pingInterval = .seconds(20); $0.pongTimeout = .seconds(10)
        }
        h.start()
        let id = h.subscribe()
        h.connectAndAck(protocol: .legacyWS)
        h.receive(#"{"type":"ka"}"#)
        h.advance(ms: 25_000)
        h.receive(#"{"type":"ka"}"#)  // every frame moves the deadline
        h.advance(ms: 29_000)
        #expect(h.machine.connectionState == .connected)
        let dead = h.advance(ms: 1_000)
        #expect(dead.aborts == 1)
        guard case .reconnecting(_, _, let cause) = h.machine.connectionState else {
            Issue.record("expected reconnecting, got \(h.machine.connectionState)")
            return
        }
        #expect(cause == .deadPeer(silence: .seconds(30), afterKeepAlive: true))
        #expect(cause.description.hasPrefix("peer silent for 30.0s after its last keep-alive"))
        #expect(h.machine.state(of: id) == .reconnecting)
        // The retry re-sends the subscription with `start`; the new connection needs a new ka.
        h.advance(ms: 10_000)
        let again = h.connectAndAck(protocol: .legacyWS).sentTexts
        #expect(again.last == #"{"type":"start","id":"1","payload":{"query":"subscription { tick }"}}"#)
    }

    @Test func connectionErrorIsARefusalThatStopsReconnecting() {
        var h = Harness()
        h.start()
        let id = h.subscribe()
        h.record(h.machine.connectionOpened(generation: h.lastGeneration!, initPayload: nil, protocol: .legacyWS, now: h.now))
        let refused = h.receive(#"{"type":"connection_error","payload":{"message":"Invalid token"}}"#)
        #expect(refused.closes == [1000])
        #expect(h.machine.connectionState == .failed(closeCode: nil, reason: "connection_error: Invalid token"))
        guard case .error(.transport(.upstreamClosed(let message, nil, _))) = refused.finish(id) else {
            Issue.record("expected upstreamClosed without a close code")
            return
        }
        #expect(message.contains("Invalid token"))
        // The server's close that follows changes nothing, and no retry comes (no hot loop).
        h.serverClose(1011, "")
        #expect(h.advance(ms: 3_600_000).connects == 0)
        #expect(h.record(h.machine.resume(now: h.now)).connects == 1)
    }

    @Test func queriesInFlightAreNeverReplayed() {
        var h = Harness()
        h.start()
        let query = h.subscribe(.query, "{ hello }")
        let mutation = h.subscribe(.mutation, "mutation { increment }")
        h.connectAndAck(protocol: .legacyWS)
        h.serverClose(nil, "connection reset")
        #expect(h.log.finish(query)?.isConnectionLost == true)
        #expect(h.log.finish(mutation)?.isConnectionLost == true)
        h.advance(ms: 60_000)
        let again = h.connectAndAck(protocol: .legacyWS).sentTexts
        #expect(!again.contains { $0.contains("increment") || $0.contains("hello") })
    }

    @Test func shutdownStopsEveryOperationAndSaysGoodbye() {
        var h = Harness()
        h.start()
        h.subscribe()
        h.subscribe(.subscription, "subscription { other }")
        h.connectAndAck(protocol: .legacyWS)
        let bye = h.record(h.machine.shutdown(now: h.now))
        #expect(bye.sentTexts == [#"{"type":"stop","id":"1"}"#, #"{"type":"stop","id":"2"}"#, #"{"type":"connection_terminate"}"#])
        #expect(bye.closes == [1000])
    }

    @Test func modernMessagesAreViolationsOnALegacyConnection() {
        var h = Harness()
        h.start()
        h.subscribe()
        h.connectAndAck(protocol: .legacyWS)
        let violation = h.receive(#"{"type":"next","id":"1","payload":{"data":{}}}"#)
        #expect(violation.closes == [4400])
    }

    @Test func theModernProtocolIsUnchanged() {
        var h = Harness { $0.pingInterval = .seconds(1) }
        h.start()
        h.subscribe()
        let sent = h.connectAndAck().sentTexts
        #expect(sent.last?.hasPrefix(#"{"type":"subscribe""#) == true)
        #expect(h.advance(ms: 1_000).sentTexts == [#"{"type":"ping"}"#])
        #expect(WireProtocol.transportWS.encode(.connectionTerminate) == nil)
        #expect(WireProtocol.legacyWS.encode(.ping(payload: nil)) == nil)
    }
}

extension OperationFinish {
    var isConnectionLost: Bool {
        if case .error(.transport(.connectionLost)) = self { return true }
        return false
    }
}

/// A query or mutation has exactly one result, whatever the server does after it.
@Suite struct SingleResultTests {
    /// ariadne's legacy handler sends a query's `data` and never `complete`: the first `data`
    /// answers it, and the operation is stopped upstream.
    @Test(arguments: [OperationKind.query, .mutation])
    func theFirstLegacyDataEndsAQueryOrMutation(kind: OperationKind) {
        var h = Harness()
        h.start()
        h.connectAndAck(protocol: .legacyWS)
        let id = h.subscribe(kind, "{ hello }")
        let data = h.receive(#"{"type":"data","id":"\#(id)","payload":{"data":{"hello":"world"}}}"#)
        #expect(data.updates(id) == [.next(ByteBuffer(string: #"{"data":{"hello":"world"}}"#)), .finished(.completed)])
        #expect(data.sentTexts == [#"{"type":"stop","id":"\#(id)"}"#])
        #expect(h.machine.operationCount == 0)
        #expect(h.receive(#"{"type":"complete","id":"\#(id)"}"#).updates(id).isEmpty)  // a late complete is ignored
    }

    @Test func aLegacySubscriptionStaysOpenAfterItsFirstData() {
        var h = Harness()
        h.start()
        h.connectAndAck(protocol: .legacyWS)
        let id = h.subscribe()
        h.receive(#"{"type":"data","id":"\#(id)","payload":{"data":{"tick":1}}}"#)
        #expect(h.machine.state(of: id) == .active)
    }

    /// On both protocols a query that gets no result within `operationTimeout` ends with
    /// `CONNECTION_LOST` naming the timeout, and is stopped upstream.
    @Test(arguments: WireProtocol.allCases)
    func aQueryWithoutAResultEndsAtTheOperationTimeout(wire: WireProtocol) {
        var h = Harness {
            $0.operationTimeout = .seconds(3); $0.pingInterval = .zero
        }
        h.start()
        h.connectAndAck(protocol: wire)
        let sub = h.subscribe()
        let id = h.subscribe(.query, "{ slow }")
        #expect(h.advance(ms: 2_999).updates(id).isEmpty)
        let expired = h.advance(ms: 1)
        guard case .error(.transport(.connectionLost(let reason))) = expired.finish(id) else {
            Issue.record("not ended: \(expired)")
            return
        }
        #expect(reason.contains("operation_timeout"))
        #expect(expired.sentTexts.count == 1 && expired.sentTexts[0].contains(#""id":"\#(id)""#))  // complete / stop
        #expect(h.machine.state(of: sub) == .active)  // subscriptions have no such timeout
    }

    /// The clock runs while the query waits for a connection too: it never hangs on an outage.
    @Test func aQueuedQueryEndsAtTheOperationTimeoutDuringAnOutage() {
        var h = Harness {
            $0.operationTimeout = .seconds(5); $0.connectTimeout = .seconds(60)
        }
        h.start()
        let id = h.subscribe(.query, "{ hello }")  // connecting: queued
        #expect(h.machine.nextDeadline == h.now + .seconds(5))
        let expired = h.advance(ms: 5_000)
        #expect(expired.finish(id) != nil && expired.sentTexts.isEmpty)
        #expect(h.machine.singleDeadlines.isEmpty)
    }

    @Test func anAnsweredQueryLeavesNoDeadline() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let id = h.subscribe(.query, "{ hello }")
        h.receive(#"{"type":"next","id":"\#(id)","payload":{"data":{"hello":"w"}}}"#)
        h.receive(#"{"type":"complete","id":"\#(id)"}"#)
        #expect(h.machine.singleDeadlines.isEmpty)
    }
}

/// The deadline table of queries and mutations: the earliest without a scan, answers in any order.
@Suite struct SingleDeadlinesTests {
    @Test func theEarliestIsTheOldestStillWaitingWhateverOrderTheyEnd() {
        var table = SingleDeadlines<String>()
        let start = Instant(nanoseconds: 0)
        for n in 0..<3_000 { table.add("q\(n)", deadline: start + .milliseconds(Int64(n))) }
        for n in stride(from: 0, to: 3_000, by: 2) { table.remove("q\(n)") }  // every even one answered
        #expect(table.earliest == start + .milliseconds(1))
        table.remove("q1")
        table.remove("q1")  // twice: no effect
        #expect(table.earliest == start + .milliseconds(3))
        let due = table.due(now: start + .milliseconds(10))
        #expect(due == ["q3", "q5", "q7", "q9"])
        #expect(table.earliest == start + .milliseconds(11))
        for n in stride(from: 11, to: 3_000, by: 2) { table.remove("q\(n)") }
        #expect(table.isEmpty && table.earliest == nil)
        table.add("late", deadline: start + .seconds(5))
        #expect(table.earliest == start + .seconds(5))
    }
}

/// `auto`'s offer after a server refuses the modern protocol with 1002 before its ack.
@Suite struct ProtocolOfferTests {
    @Test func aRefusalBeforeTheAckDropsThatProtocolUntilTheConfigurationChanges() {
        var offer = ProtocolOffer([.transportWS, .legacyWS])
        #expect(offer.closedBeforeAck(wire: .transportWS, code: .other(1011)) == nil)
        #expect(offer.closedBeforeAck(wire: .transportWS, code: nil) == nil)
        #expect(offer.current == [.transportWS, .legacyWS])
        #expect(offer.closedBeforeAck(wire: .transportWS, code: .protocolError) == .legacyWS)
        #expect(offer.current == [.legacyWS])
        // The last protocol left is never dropped: a 1002 on it is an ordinary failure.
        #expect(offer.closedBeforeAck(wire: .legacyWS, code: .protocolError) == nil)
        #expect(offer.current == [.legacyWS])
        offer.configure([.transportWS, .legacyWS])
        #expect(offer.current == [.legacyWS])
        offer.configure([.transportWS])
        #expect(offer.current == [.transportWS])
        #expect(offer.closedBeforeAck(wire: .transportWS, code: .protocolError) == nil)
    }
}
