import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import Testing

@testable import HTTPStreaming

/// The stream lifecycle on a manual clock.
@Suite struct StreamMachineTests {
    struct Harness {
        var machine: StreamMachine
        var now = Instant(nanoseconds: 1_000_000_000)
        /// Every action so far, in order.
        var log: [StreamMachine.Action] = []
        /// The ids this harness gives its streams (the multiplexer core's role).
        var lastID = 0

        init(heartbeat: Duration = .seconds(15)) {
            var options = StreamMachine.Options()
            options.heartbeatTimeout = heartbeat
            options.backoff = Backoff(initial: .seconds(1), maximum: .seconds(30), multiplier: 2, jitter: 0)
            machine = StreamMachine(options: options, random: { 0.5 })
        }

        mutating func record(_ actions: [StreamMachine.Action]) -> [StreamMachine.Action] {
            log += actions
            return actions
        }

        @discardableResult mutating func open(_ query: String = "subscription { tick }") -> OperationID {
            lastID += 1
            let id = OperationID(lastID)
            _ = record(machine.open(id: id, payload: ByteBuffer(string: query), now: now))
            return id
        }

        /// The generation of the last request made for `id`.
        func generation(_ id: OperationID) -> Int? {
            log.reversed().lazy.compactMap { action -> Int? in
                if case .request(id, let generation, _) = action { return generation }
                return nil
            }.first
        }

        func requests(_ id: OperationID) -> Int {
            log.filter { if case .request(id, _, _) = $0 { return true } else { return false } }.count
        }

        func updates(_ id: OperationID) -> [OperationUpdate] {
            log.compactMap { if case .update(id, let update) = $0 { return update } else { return nil } }
        }

        @discardableResult mutating func head(_ id: OperationID, _ head: StreamMachine.Head = .stream) -> [StreamMachine.Action] {
            record(machine.received(head, id: id, generation: generation(id)!, now: now))
        }

        @discardableResult mutating func message(_ id: OperationID, _ message: StreamMessage) -> [StreamMachine.Action] {
            machine.bytesArrived(id: id, generation: generation(id)!, now: now)
            return record(machine.message(message, id: id, generation: generation(id)!, now: now))
        }

        @discardableResult mutating func lose(_ id: OperationID) -> [StreamMachine.Action] {
            record(machine.streamLost(id: id, generation: generation(id)!, cause: .network("EOF"), now: now))
        }

        /// Advances the clock in steps of 100 ms, ticking at each due deadline.
        mutating func advance(ms: Int) {
            let end = now + .milliseconds(ms)
            while let deadline = machine.nextDeadline, deadline <= end {
                now = max(now, deadline)
                _ = record(machine.tick(now: now))
            }
            now = end
        }
    }

    func payload(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test func aStreamGoesActiveDeliversAndComesBackAfterALoss() {
        var h = Harness()
        let id = h.open()
        #expect(h.requests(id) == 1)
        h.head(id)
        h.message(id, .heartbeat)
        h.message(id, .result(payload(#"{"data":1}"#)))
        h.lose(id)
        #expect(h.machine.connectionState.name == .reconnecting)
        h.advance(ms: 999)
        #expect(h.requests(id) == 1)
        h.advance(ms: 2)
        #expect(h.requests(id) == 2)
        h.head(id)
        h.message(id, .result(payload(#"{"data":2}"#)))
        #expect(
            h.updates(id) == [
                .state(.pending), .state(.active), .next(payload(#"{"data":1}"#)), .state(.reconnecting), .state(.active),
                .next(payload(#"{"data":2}"#)),
            ]
        )
        #expect(h.machine.connectionState == .connected)
        let told = h.log.compactMap { action -> TransportEvent? in
            guard case .event(let event) = action, event == .connected || event == .reconnected else { return nil }
            return event
        }
        #expect(told == [.connected, .reconnected])
    }

    @Test func anOutageIsToldOnceWhateverTheNumberOfStreamsAndARefusedRequestIsNoDisconnect() {
        var h = Harness()
        let ids = (0..<3).map { _ in h.open() }
        for id in ids { h.head(id) }
        #expect(h.machine.connectionState == .connected)
        for id in ids { h.lose(id) }
        func told(_ h: Harness) -> [TransportEvent] {
            h.log.compactMap { action -> TransportEvent? in
                guard case .event(let event) = action else { return nil }
                switch event {
                case .disconnected, .connected, .reconnected: return event
                default: return nil
                }
            }
        }
        #expect(told(h) == [.connected, .disconnected(closeCode: nil, reason: "EOF")])
        h.advance(ms: 1_001)  // every stream requested again; the server still refuses them
        for id in ids { h.head(id, .answer(status: 503, reason: "Service Unavailable", body: ByteBuffer())) }
        #expect(told(h).count == 2)
        h.advance(ms: 2_001)
        for id in ids { h.head(id) }
        #expect(told(h) == [.connected, .disconnected(closeCode: nil, reason: "EOF"), .reconnected])
    }

    @Test func aSilentStreamIsDeadAfterTheHeartbeatTimeout() {
        var h = Harness(heartbeat: .seconds(5))
        let id = h.open()
        h.head(id)
        h.advance(ms: 4_000)
        h.message(id, .heartbeat)  // bytes keep it alive
        h.advance(ms: 4_999)
        #expect(h.updates(id).last == .state(.active))
        h.advance(ms: 2)
        #expect(h.updates(id).last == .state(.reconnecting))
        guard case .reconnecting(_, _, .deadPeer)? = Optional(h.machine.connectionState) else {
            Issue.record("not reconnecting for a dead peer: \(h.machine.connectionState)")
            return
        }
    }

    @Test func failedRequestsBackOffExponentially() {
        var h = Harness()
        let id = h.open()
        var requestTimes: [Instant] = [h.now]
        for _ in 0..<5 {
            h.head(id, .answer(status: 503, reason: "Service Unavailable", body: ByteBuffer()))
            let before = h.requests(id)
            while h.requests(id) == before { h.advance(ms: 100) }
            requestTimes.append(h.now)
        }
        let gaps = zip(requestTimes.dropFirst(), requestTimes).map { Int(($0 - $1).seconds.rounded()) }
        #expect(gaps == [1, 2, 4, 8, 16])
        #expect(h.updates(id) == [.state(.pending)])  // never active: stays pending
    }

    @Test(arguments: [401, 403])
    func aRefusedCredentialFailsEveryStreamWithoutAHotLoop(status: Int) {
        var h = Harness()
        let a = h.open()
        let b = h.open("subscription { other }")
        h.head(a)
        h.head(b, .answer(status: status, reason: "Forbidden", body: ByteBuffer()))
        for id in [a, b] {
            guard case .finished(.error(.transport(.upstreamClosed(let message, nil, _))))? = h.updates(id).last else {
                Issue.record("\(id) not ended: \(h.updates(id))")
                continue
            }
            #expect(message.contains("HTTP \(status)"))
        }
        #expect(h.machine.connectionState.name == .failed)
        let requests = h.log.count { if case .request = $0 { true } else { false } }
        h.advance(ms: 600_000)
        #expect(h.log.count { if case .request = $0 { true } else { false } } == requests)
        let c = h.open()  // a new subscribe tries again
        #expect(h.requests(c) == 1)
        _ = h.machine.resume(now: h.now)
    }

    @Test func aClientErrorEndsThatStreamOnly() {
        var h = Harness()
        let good = h.open()
        let bad = h.open("subscription { bad }")
        h.head(good)
        h.head(bad, .answer(status: 406, reason: "Not Acceptable", body: ByteBuffer(string: "nope")))
        guard case .finished(.error(.transport(.upstreamClosed(let message, _, _))))? = h.updates(bad).last else {
            Issue.record("not ended: \(h.updates(bad))")
            return
        }
        #expect(message.contains("406"))
        let withErrors = h.open("subscription { invalid }")
        h.head(withErrors, .answer(status: 400, reason: "Bad Request", body: ByteBuffer(string: #"{"errors":[{"message":"no field"}]}"#)))
        #expect(h.updates(withErrors).last == .finished(.error(.upstream(ByteBuffer(string: #"[{"message":"no field"}]"#)))))
        #expect(h.updates(good) == [.state(.pending), .state(.active)])
        #expect(h.machine.streamCount == 1)
    }

    @Test func fatalErrorsAndCompletionEndTheStream() {
        var h = Harness()
        let a = h.open()
        let b = h.open()
        h.head(a)
        h.head(b)
        h.message(a, .fatal(ByteBuffer(string: "[]")))
        h.message(b, .completed)
        #expect(h.updates(a).last == .finished(.error(.upstream(ByteBuffer(string: "[]")))))
        #expect(h.updates(b).last == .finished(.completed))
        #expect(h.machine.streamCount == 0)
        #expect(h.machine.nextDeadline == nil)
    }

    @Test func staleEventsOfAnEarlierRequestAreIgnored() {
        var h = Harness()
        let id = h.open()
        let first = h.generation(id)!
        h.head(id)
        h.lose(id)
        h.advance(ms: 1_001)
        #expect(h.machine.message(.result(payload("{}")), id: id, generation: first, now: h.now).isEmpty)
        #expect(h.machine.streamLost(id: id, generation: first, cause: .network("old"), now: h.now).isEmpty)
    }

    @Test func pauseDropsEveryStreamAndResumeRequestsThemAgain() {
        var h = Harness()
        let id = h.open()
        h.head(id)
        let paused = h.record(h.machine.pause())
        #expect(paused.contains(.abort(id: id, generation: 1)))
        #expect(h.machine.connectionState == .paused)
        let held = h.open()
        #expect(h.requests(held) == 0)
        h.advance(ms: 60_000)
        #expect(h.requests(id) == 1)
        _ = h.record(h.machine.resume(now: h.now))
        #expect(h.requests(id) == 2 && h.requests(held) == 1)
        #expect(h.updates(id) == [.state(.pending), .state(.active), .state(.paused), .state(.reconnecting)])
    }

    @Test func reloadRequestsEveryStreamAgainAndShutdownEndsThem() {
        var h = Harness()
        let id = h.open()
        h.head(id)
        _ = h.record(h.machine.reconnectNow(now: h.now))
        #expect(h.requests(id) == 2)
        h.head(id)
        _ = h.record(h.machine.shutdown())
        #expect(h.updates(id).last == .finished(.error(.transport(.shutDown))))
        let late = OperationID(99)
        let actions = h.machine.open(id: late, payload: payload("{}"), now: h.now)
        #expect(actions == [.update(id: late, .finished(.error(.transport(.shutDown))))])
    }

    @Test func cancelDropsTheStreamWithoutAnUpdate() {
        var h = Harness()
        let id = h.open()
        h.head(id)
        let actions = h.machine.cancel(id: id)
        #expect(actions.contains(.abort(id: id, generation: 1)))
        #expect(!actions.contains { if case .update = $0 { true } else { false } })
        #expect(h.machine.streamCount == 0)
    }

    @Test func noResponseHeadWithinTheConnectTimeoutIsALoss() {
        var h = Harness()
        let id = h.open()
        h.advance(ms: 10_001)
        guard case .reconnecting(_, _, .connectTimeout)? = Optional(h.machine.connectionState) else {
            Issue.record("\(h.machine.connectionState)")
            return
        }
        #expect(h.log.contains(.abort(id: id, generation: 1)))
    }
}
