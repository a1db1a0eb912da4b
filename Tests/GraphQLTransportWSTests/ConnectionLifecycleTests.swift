import GQLMuxVocabulary
import NIOCore
import Testing

@testable import GraphQLTransportWS

@Suite struct ConnectionLifecycleTests {
    @Test func eagerTransportConnectsAtStart() {
        var h = Harness()
        #expect(h.start().connects == 1)
        #expect(h.machine.connectionState == .connecting(attempt: 1))
    }

    @Test func lazyTransportConnectsOnFirstSubscribe() {
        var h = Harness { $0.lazy = true }
        #expect(h.start().connects == 0)
        h.subscribe()
        #expect(h.log.connects == 1)
    }

    @Test func connectionInitOmitsPayloadWhenNoneIsConfigured() {
        var h = Harness()
        h.start()
        let sent = h.record(h.machine.connectionOpened(generation: 1, initPayload: nil, now: h.now)).sentTexts
        #expect(sent == [#"{"type":"connection_init"}"#])
    }

    @Test func connectionInitCarriesTheConnectingPayload() {
        var h = Harness()
        h.start()
        let payload = ByteBuffer(string: #"{"token":"s3cret"}"#)
        let sent = h.record(h.machine.connectionOpened(generation: 1, initPayload: payload, now: h.now)).sentTexts
        #expect(sent == [#"{"type":"connection_init","payload":{"token":"s3cret"}}"#])
    }

    @Test func subscribeBeforeAckIsHeldUntilTheAck() {
        var h = Harness()
        h.start()
        let id = h.subscribe()
        #expect(h.log.sentTexts.isEmpty)
        #expect(h.machine.state(of: id) == .pending)
        let sent = h.connectAndAck().sentTexts
        #expect(sent.last == #"{"type":"subscribe","id":"1","payload":{"query":"subscription { tick }"}}"#)
        #expect(h.machine.state(of: id) == .active)
        #expect(h.log.events.contains(.connected))
    }

    @Test func ackTimeoutClosesWith4408AndRetriesWithGrowingBackoff() {
        var h = Harness()
        h.start()
        h.record(h.machine.connectionOpened(generation: 1, initPayload: nil, now: h.now))
        #expect(h.advance(ms: 9_999).isEmpty)
        let timedOut = h.advance(ms: 1)
        #expect(timedOut.closes == [4408])
        #expect(timedOut.reconnectDelays == [1])
        #expect(h.advance(ms: 1_000).connects == 1)
        h.record(h.machine.connectionOpened(generation: 2, initPayload: nil, now: h.now))
        let second = h.advance(ms: 10_000)
        #expect(second.reconnectDelays == [2])
    }

    @Test func reloadedOptionsTimeTheNextTimersAndLeaveASetDeadline() {
        var h = Harness()
        h.start()
        h.record(h.machine.connectionOpened(generation: 1, initPayload: nil, now: h.now))
        // A reload while the ack is awaited: the deadline already set (10 s) stands.
        var reloaded = h.machine.options
        reloaded.ackTimeout = .seconds(2)
        reloaded.backoff.initial = .seconds(5)
        h.machine.apply(reloaded)
        #expect(h.advance(ms: 2_000).isEmpty, "the running ack deadline keeps its time")
        let timedOut = h.advance(ms: 8_000)
        #expect(timedOut.closes == [4408])
        #expect(timedOut.reconnectDelays == [5], "the retry uses the reloaded backoff")
        #expect(h.advance(ms: 5_000).connects == 1)
        h.record(h.machine.connectionOpened(generation: 2, initPayload: nil, now: h.now))
        #expect(h.advance(ms: 1_999).isEmpty)
        #expect(h.advance(ms: 1).closes == [4408], "the next ack deadline uses the reloaded ack_timeout")
    }

    @Test func connectTimeoutAbortsTheAttemptAndRetries() {
        var h = Harness { $0.connectTimeout = .seconds(3) }
        h.start()
        let actions = h.advance(ms: 3_000)
        #expect(actions.aborts == 1)
        #expect(h.machine.connectionState == .reconnecting(attempt: 1, delay: .seconds(1), cause: .connectTimeout(.seconds(3))))
    }

    @Test(arguments: [UInt16(1000), 1001, 1011, 4500])
    func closeBeforeAckCountsAsAFailedAttemptWhateverTheCode(code: UInt16) {
        var h = Harness()
        h.start()
        var delays: [Double] = []
        for _ in 0..<4 {
            h.record(h.machine.connectionOpened(generation: h.lastGeneration!, initPayload: nil, now: h.now))
            delays += h.serverClose(code).reconnectDelays
            h.advance(ms: 60_000)
        }
        #expect(delays == [1, 2, 4, 8])
    }

    @Test func attemptCounterResetsOnlyOnceAConnectionStaysHealthy() {
        var h = Harness()
        h.start()
        for _ in 0..<3 {
            h.record(h.machine.connectionFailed(generation: h.lastGeneration!, cause: "connection refused", now: h.now))
            h.advance(ms: 60_000)
        }
        h.connectAndAck()
        // Acked and failed at once: that was attempt 4, the backoff keeps growing.
        #expect(h.serverClose(1006).reconnectDelays == [8])
        h.advance(ms: 8_000)
        h.connectAndAck()
        h.advance(ms: 9_900)
        #expect(h.serverClose(1006).reconnectDelays == [16])
        h.advance(ms: 16_000)
        h.connectAndAck()
        h.advance(ms: 10_000)  // healthy_after (reconnect_reset_after) passed: the outage is over
        #expect(h.serverClose(1006).reconnectDelays == [1])
    }

    @Test func anUpstreamThatAcksAndFailsAtOnceSeesTheBackoffGrowToItsCap() {
        var h = Harness()
        h.start()
        var delays: [Double] = []
        for _ in 0..<8 {
            h.connectAndAck()
            delays += h.serverClose(1011, "flap").reconnectDelays
            h.advance(ms: 60_000)
        }
        #expect(delays == [1, 2, 4, 8, 16, 30, 30, 30])
        #expect(h.log.connects == 9)  // the first, then one per flap
    }

    @Test func refusedConnectionsRetryForeverByDefault() {
        var h = Harness()
        h.start()
        for _ in 0..<50 {
            h.record(h.machine.connectionFailed(generation: h.lastGeneration!, cause: "connection refused", now: h.now))
            h.advance(ms: 40_000)
        }
        #expect(h.log.connects == 51)
        #expect(h.machine.connectionState == .connecting(attempt: 50))
    }

    @Test func givesUpAfterMaxAttemptsAndFinishesOperations() {
        var h = Harness { $0.backoff.maxAttempts = 2 }
        h.start()
        let id = h.subscribe()
        for _ in 0..<3 {
            h.record(h.machine.connectionFailed(generation: h.lastGeneration!, cause: "connection refused", now: h.now))
            h.advance(ms: 60_000)
        }
        #expect(h.log.connects == 3)
        #expect(h.log.finish(id)?.failure == "connectionLost")
        guard case .failed = h.machine.connectionState else {
            Issue.record("expected failed, got \(h.machine.connectionState)")
            return
        }
    }

    @Test func negativeReconnectIntervalDisablesReconnection() {
        var h = Harness { $0.backoff.initial = nil }
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        h.serverClose(1006)
        h.advance(ms: 600_000)
        #expect(h.log.connects == 1)
        #expect(h.log.finish(id)?.failure == "connectionLost")
    }

    @Test(arguments: [UInt16(4401), 4403, 4406])
    func fatalCloseCodesFailEveryOperationAndStopReconnecting(code: UInt16) {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        h.serverClose(code, "Forbidden")
        h.advance(ms: 3_600_000)
        #expect(h.log.connects == 1)
        #expect(h.machine.connectionState == .failed(closeCode: CloseCode(code), reason: "Forbidden"))
        guard case .error(.transport(.upstreamClosed(_, let closeCode, let reason))) = h.log.finish(id) else {
            Issue.record("expected UPSTREAM_CLOSED")
            return
        }
        #expect(closeCode == CloseCode(code) && reason == "Forbidden")
        // A new subscribe tries again.
        h.subscribe()
        #expect(h.log.connects == 2)
    }

    @Test func fatalCodeBeforeAckAlsoFails() {
        var h = Harness()
        h.start()
        h.record(h.machine.connectionOpened(generation: 1, initPayload: nil, now: h.now))
        h.serverClose(4403, "Forbidden")
        #expect(h.machine.connectionState == .failed(closeCode: 4403, reason: "Forbidden"))
        #expect(h.advance(ms: 600_000).connects == 0)
    }

    @Test(arguments: [UInt16?.none, 1000, 1001, 1011, 1012, 4400, 4408, 4429, 4500])
    func retryableClosesReconnectAndResubscribe(code: UInt16?) {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        h.advance(ms: 2_000)  // outside the 4400 blame window
        let dropped = h.serverClose(code, "bye")
        #expect(dropped.operationStates(id) == [.reconnecting])
        #expect(dropped.events.contains { if case .disconnected = $0 { true } else { false } })
        h.advance(ms: 1_000)
        let after = h.connectAndAck()
        #expect(after.sentTexts.contains(#"{"type":"subscribe","id":"1","payload":{"query":"subscription { tick }"}}"#))
        #expect(after.operationStates(id) == [.active])
        #expect(after.events.contains(.reconnected))
        #expect(h.machine.reconnects == 1)
    }

    @Test func staleEventsFromAnOldConnectionAreIgnored() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        h.serverClose(1006)
        h.advance(ms: 1_000)
        #expect(h.record(h.machine.received(generation: 1, ByteBuffer(string: #"{"type":"connection_ack"}"#), now: h.now)).isEmpty)
        #expect(h.record(h.machine.connectionClosed(generation: 1, code: 4403, reason: "", now: h.now)).isEmpty)
        #expect(h.machine.connectionState == .connecting(attempt: 1))
    }
}

extension OperationFinish {
    /// The kind of transport failure that ended it, by name.
    var failure: String? {
        switch self {
        case .error(.transport(.connectionLost)): "connectionLost"
        case .error(.transport(.upstreamClosed)): "upstreamClosed"
        case .error(.transport(.shutDown)): "shutDown"
        default: nil
        }
    }
}
