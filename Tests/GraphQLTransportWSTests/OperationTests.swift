import GQLMuxVocabulary
import NIOCore
import Testing

@testable import GraphQLTransportWS

@Suite struct OperationTests {
    @Test func queriesAndMutationsEndWithConnectionLostAndAreNeverReplayed() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let sub = h.subscribe()
        let mutation = h.subscribe(.mutation, "mutation { increment }")
        let query = h.subscribe(.query, "{ hello }")
        h.advance(ms: 1_500)  // past the blame window: the drop is nobody's fault
        h.serverClose(1006)
        #expect(h.log.finish(mutation)?.failure == "connectionLost")
        #expect(h.log.finish(query)?.failure == "connectionLost")
        h.advance(ms: 1_000)
        let resent = h.connectAndAck().sentTexts.filter { $0.contains(#""type":"subscribe""#) }
        #expect(resent.count == 1)
        #expect(resent[0].contains(#""id":"\#(sub)""#))
    }

    @Test func queryQueuedBeforeAnyConnectionSurvivesFailedAttempts() {
        var h = Harness()
        h.start()
        let mutation = h.subscribe(.mutation, "mutation { increment }")
        h.record(h.machine.connectionFailed(generation: 1, cause: "refused", now: h.now))
        h.advance(ms: 1_000)
        let sent = h.connectAndAck().sentTexts
        #expect(sent.contains { $0.contains("increment") })
        #expect(h.machine.state(of: mutation) == .active)
    }

    @Test func nextIsDeliveredAsTheUndecodedPayloadSlice() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        let actions = h.receive(#"{"type":"next","id":"1","payload":{"data":{"tick":1}}}"#)
        guard case .next(let payload) = actions.updates(id).first else {
            Issue.record("no next")
            return
        }
        #expect(String(buffer: payload) == #"{"data":{"tick":1}}"#)
    }

    @Test func errorIsTerminalAndCompleteFinishes() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let a = h.subscribe()
        let b = h.subscribe()
        h.receive(#"{"type":"error","id":"1","payload":[{"message":"boom"}]}"#)
        h.receive(#"{"type":"complete","id":"2"}"#)
        #expect(h.log.finish(a) == .error(.upstream(ByteBuffer(string: #"[{"message":"boom"}]"#))))
        #expect(h.log.finish(b) == .completed)
        #expect(h.machine.operationCount == 0)
        // Messages for finished or unknown ids are ignored.
        #expect(h.receive(#"{"type":"next","id":"1","payload":{"data":null}}"#).isEmpty)
        #expect(h.receive(#"{"type":"next","id":"99","payload":{"data":null}}"#).isEmpty)
    }

    @Test func cancellingSendsCompleteUpstream() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        let actions = h.record(h.machine.complete(id: id, now: h.now))
        #expect(actions.sentTexts == [#"{"type":"complete","id":"1"}"#])
        #expect(actions.finish(id) == .cancelled)
    }

    @Test func operationIDsAreSequentialOrUUID() {
        var sequential = Harness()
        sequential.start()
        #expect([sequential.subscribe(), sequential.subscribe()] == ["1", "2"])
        var uuid = Harness { $0.operationIDs = .uuid }
        uuid.start()
        #expect([uuid.subscribe(), uuid.subscribe()] == ["uuid-1", "uuid-2"])
    }

    @Test func malformedServerMessageClosesWith4400AndReconnects() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        for bad in ["not json", #"{"type":"next","id":"1"}"#, #"{"type":"bogus"}"#, #"{"id":"1"}"#, "[1,2]"] {
            let actions = h.receive(bad)
            #expect(actions.closes == [4400], "for \(bad)")
            #expect(actions.operationStates(id) == [.reconnecting])
            h.advance(ms: 60_000)  // past the capped backoff: a flapping server grows it
            h.connectAndAck()
        }
    }

    @Test func messageOtherThanAckBeforeAckIsAViolation() {
        var h = Harness()
        h.start()
        h.record(h.machine.connectionOpened(generation: 1, initPayload: nil, now: h.now))
        #expect(h.receive(#"{"type":"next","id":"1","payload":{}}"#).closes == [4400])
    }

    @Test func a4400RightAfterANewSubscribeIsBlamedOnIt() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let good = h.subscribe()
        h.advance(ms: 5_000)
        let bad = h.subscribe(.subscription, "subscription { tick(")
        h.advance(ms: 200)
        h.serverClose(4400, "Syntax Error")
        guard case .error(.transport(.upstreamClosed(_, 4400, _))) = h.log.finish(bad) else {
            Issue.record("bad subscribe was not blamed")
            return
        }
        #expect(h.machine.state(of: good) == .reconnecting)
        h.advance(ms: 1_000)
        let resent = h.connectAndAck().sentTexts.filter { $0.contains("subscribe") }
        #expect(resent.count == 1)
    }

    @Test func a4400LongAfterTheLastSubscribeBlamesNobody() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        h.advance(ms: 1_500)
        h.serverClose(4400, "whatever")
        #expect(h.log.finish(id) == nil)
        #expect(h.machine.state(of: id) == .reconnecting)
    }

    @Test func pauseKeepsSubscriptionsAndResumeResubscribes() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let sub = h.subscribe()
        let query = h.subscribe(.query, "{ hold }")
        let paused = h.record(h.machine.pause(now: h.now))
        #expect(paused.closes == [1000])
        #expect(paused.operationStates(sub) == [.paused])
        #expect(paused.finish(query)?.failure == "connectionLost")
        #expect(h.advance(ms: 3_600_000).connects == 0)
        let late = h.subscribe()
        #expect(h.machine.state(of: late) == .paused)
        let resumed = h.record(h.machine.resume(now: h.now))
        #expect(resumed.connects == 1)
        let sent = h.connectAndAck().sentTexts.filter { $0.contains("subscribe") }
        #expect(sent.count == 2)
        #expect(h.machine.state(of: sub) == .active && h.machine.state(of: late) == .active)
    }

    @Test func reconnectNowKeepsEverySubscription() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let a = h.subscribe()
        let b = h.subscribe()
        let actions = h.record(h.machine.reconnectNow(now: h.now))
        #expect(actions.closes == [1000])
        #expect(actions.connects == 1)
        #expect(actions.operationStates(a) == [.reconnecting])
        let resent = h.connectAndAck().sentTexts.filter { $0.contains("subscribe") }
        #expect(resent.count == 2)
        #expect(h.machine.state(of: a) == .active && h.machine.state(of: b) == .active)
    }

    @Test func lazyTransportClosesAfterTheIdleTimeout() {
        var h = Harness {
            $0.lazy = true
            $0.lazyCloseTimeout = .seconds(5)
        }
        h.start()
        let id = h.subscribe()
        h.connectAndAck()
        h.record(h.machine.complete(id: id, now: h.now))
        #expect(h.advance(ms: 4_999).closes.isEmpty)
        #expect(h.advance(ms: 1).closes == [1000])
        #expect(h.machine.connectionState == .idle)
        h.subscribe()
        #expect(h.log.connects == 2)
    }
}

@Suite struct KeepAliveTests {
    @Test func clientPingsAfterTheIntervalAndDetectsASilentPeer() {
        var h = Harness {
            $0.pingInterval = .seconds(20)
            $0.pongTimeout = .seconds(10)
        }
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        #expect(h.advance(ms: 19_999).sentTexts.isEmpty)
        #expect(h.advance(ms: 1).sentTexts == [#"{"type":"ping"}"#])
        #expect(h.advance(ms: 9_999).aborts == 0)
        let dead = h.advance(ms: 1)
        #expect(dead.aborts == 1)
        #expect(dead.operationStates(id) == [.reconnecting])
    }

    @Test func anyInboundFrameProvesThePeerIsAlive() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        h.advance(ms: 20_000)
        h.advance(ms: 5_000)
        h.receive(#"{"type":"pong"}"#)
        #expect(h.advance(ms: 10_000).aborts == 0)
        h.machine.activity(generation: 1, now: h.now)
        #expect(h.advance(ms: 9_000).aborts == 0)
        #expect(h.machine.connectionState == .connected)
    }

    @Test func serverPingIsAnsweredWithAPongEchoingItsPayload() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let actions = h.receive(#"{"type":"ping","payload":{"n":7}}"#)
        #expect(actions.sentTexts == [#"{"type":"pong","payload":{"n":7}}"#])
        #expect(actions.events.contains(.ping(received: true)))
    }

    @Test func zeroIntervalDisablesPings() {
        var h = Harness { $0.pingInterval = .zero }
        h.start()
        h.connectAndAck()
        #expect(h.advance(ms: 3_600_000).sentTexts.isEmpty)
    }
}
