import GQLMuxTestSupport
import GQLMuxVocabulary
import NIOCore
import Testing

@testable import GraphQLTransportWS

/// Blame and quarantine on a manual clock: one bad operation costs the others at most one
/// reconnect per client-blaming close, never a loop; an outage charges nobody.
@Suite struct QuarantineTests {
    /// How many times `id` was sent upstream in `actions`.
    func sends(_ id: String, in actions: [TransportAction]) -> Int {
        actions.sentTexts.filter { $0.contains(#""type":"subscribe","id":"\#(id)""#) }.count
    }

    @Test(arguments: [UInt16(4400), 1007, 1009, 4409])
    func aClientBlamingCloseRightAfterANewSubscribeQuarantinesItAtOnce(code: UInt16) {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let good = h.subscribe()
        h.advance(ms: 5_000)
        let poison = h.subscribe(.subscription, "subscription { poison }")
        h.advance(ms: 50)
        let closed = h.serverClose(code, "bad")
        guard case .error(.transport(.upstreamClosed(let message, let closeCode, _))) = closed.finish(poison) else {
            Issue.record("poison not finished: \(closed)")
            return
        }
        #expect(closeCode == CloseCode(code))
        #expect(message.contains("quarantined"))
        #expect(closed.events.contains(.quarantined(id: OperationID(Int(poison)!), closeCode: CloseCode(code))))
        #expect(closed.operationStates(good) == [.reconnecting])
        h.advance(ms: 1_000)
        let back = h.connectAndAck()
        #expect(sends(good, in: back) == 1)
        h.advance(ms: 20_000)
        #expect(sends(poison, in: h.log) == 1)  // sent once, ever
        #expect(h.machine.state(of: good) == .active)
    }

    /// Seen on strawberry under load: an innocent subscription was on trial when a bad one
    /// arrived during the reconnect. At the ack both went out in the same instant, and the
    /// server's 4400 was blamed on the trial alone. A newcomer sent during a trial shares the
    /// suspicion; bisection finds the culprit, and the innocent ones are never ended.
    @Test func aNewcomerSentDuringATrialSharesTheBlame() {
        var h = Harness()
        h.start()
        let good = h.subscribe(.subscription, "subscription { a }")  // queued: one burst at the ack
        let other = h.subscribe(.subscription, "subscription { b }")
        h.connectAndAck()
        h.advance(ms: 100)
        h.serverClose(4400, "Syntax Error")  // charges the burst: good and other, on probation
        #expect(h.probation == [[good, other]])
        let bad = h.subscribe(.subscription, "subscription { tick( }")  // arrives while reconnecting
        h.advance(ms: 1_000)
        var back = h.connectAndAck()
        #expect(sends(good, in: back) == 1 && sends(bad, in: back) == 1)  // the same instant
        var closes = 1
        // The server closes 4400 whenever it reads `bad`; nothing else is wrong.
        while sends(bad, in: back) > 0 && closes < 10 {
            h.advance(ms: 50)
            let closed = h.serverClose(4400, "Syntax Error")
            closes += 1
            #expect(closed.finish(good) == nil && closed.finish(other) == nil, "an innocent one blamed after \(closes) closes: \(closed)")
            if closed.finish(bad) != nil { break }
            h.advance(ms: 60_000)  // past any backoff
            back = h.connectAndAck()
            for _ in 0..<3 where sends(bad, in: back) == 0 { back += h.advance(ms: 1_500) }  // trials that stay up pass
        }
        #expect(h.log.finish(bad) != nil, "bad never quarantined")
        #expect(h.log.finish(good) == nil && h.log.finish(other) == nil)
        #expect(closes <= 4)
        h.advance(ms: 60_000)
        h.connectAndAck()
        h.advance(ms: 20_000)
        #expect(h.machine.state(of: good) == .active && h.machine.state(of: other) == .active)
    }

    /// A close that does not blame the client, right after a new subscribe, is an outage: the
    /// new subscription is re-sent with every other one right after the next ack, as often as it
    /// happens, and is never ended or held back.
    @Test(arguments: [nil, UInt16(1000), 1001, 1006, 1011, 1012, 1013, 1014])
    func anAmbiguousCloseNeverChargesAnOperation(code: UInt16?) {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let good = h.subscribe()
        h.advance(ms: 5_000)
        let suspect = h.subscribe(.subscription, "subscription { crash }")
        for round in 0..<6 {
            h.advance(ms: 30)
            let closed = h.serverClose(code, "gone")
            #expect(closed.finish(suspect) == nil && closed.finish(good) == nil, "round \(round): \(closed)")
            #expect(!closed.events.contains { if case .quarantined = $0 { true } else { false } })
            h.advance(ms: 60_000)
            let back = h.connectAndAck()
            #expect(sends(good, in: back) == 1 && sends(suspect, in: back) == 1, "round \(round): both re-sent at the ack")
            #expect(h.machine.probation.isEmpty)
        }
        #expect(h.machine.state(of: suspect) == .active && h.machine.state(of: good) == .active)
    }

    @Test func aServerRestartRightAfterAResubscribeBurstChargesNobody() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let ids = (0..<5).map { _ in h.subscribe() }
        h.advance(ms: 20_000)  // healthy: nothing is on trial any more
        for _ in 0..<4 {
            h.serverClose(1012, "service restart")
            h.advance(ms: 60_000)
            let back = h.connectAndAck()
            #expect(ids.allSatisfy { sends($0, in: back) == 1 })
            h.advance(ms: 100)  // killed again right after the re-subscribe burst
        }
        #expect(ids.allSatisfy { h.machine.state(of: $0) == .active })
    }

    @Test func aBurstOfSuspectsIsBisectedUntilThePoisonIsAlone() {
        var h = Harness()
        h.start()
        let ids = (0..<8).map { h.subscribe(.subscription, "subscription { s\($0) }") }  // queued: one burst at the ack
        let poison = ids[5]
        var closes = 0
        var actions = h.connectAndAck()
        for _ in 0..<30 where h.machine.state(of: poison) != nil {
            if sends(poison, in: actions) == 1 {  // the server chokes on it, whoever else came along
                h.serverClose(4400, "bad")
                closes += 1
                h.advance(ms: 60_000)
                actions = h.connectAndAck()
            } else {
                actions = h.advance(ms: 1_000)  // a group passed its trial; the next one goes
            }
        }
        #expect(h.machine.state(of: poison) == nil)
        #expect(closes == 5)  // the burst, log2(8) bisections, the group of one
        h.advance(ms: 5_000)
        #expect(ids.filter { $0 != poison }.allSatisfy { h.machine.state(of: $0) == .active })
        #expect(h.machine.probation.isEmpty)
    }

    @Test func aTrialThatStaysUpClearsItsGroup() {
        var h = Harness()
        h.start()
        let a = h.subscribe(.subscription, "subscription { a }")
        let b = h.subscribe(.subscription, "subscription { b }")
        h.connectAndAck()  // one burst
        h.serverClose(4400, "bad")  // both charged, one group on probation
        h.advance(ms: 1_000)
        let trial = h.connectAndAck()
        #expect(sends(a, in: trial) == 1 && sends(b, in: trial) == 1)  // tried at once
        h.advance(ms: 1_000)  // its trial passed
        #expect(h.machine.probation.isEmpty)
        h.serverClose(1006, "drop")  // a later drop blames nobody
        h.advance(ms: 2_000)
        let back = h.connectAndAck()
        #expect(sends(a, in: back) == 1 && sends(b, in: back) == 1)
        h.advance(ms: 1_000)
        #expect(h.machine.state(of: a) == .active && h.machine.state(of: b) == .active)
    }

    /// An outage in the middle of a trial neither passes nor fails it: the group goes out again
    /// right after the next ack, together with every clean subscription.
    @Test func anOutageDuringATrialDelaysNobody() {
        var h = Harness()
        h.start()
        let clean = h.subscribe()
        h.connectAndAck()
        h.advance(ms: 20_000)
        let a = h.subscribe(.subscription, "subscription { a }")
        let b = h.subscribe(.subscription, "subscription { b }")  // same instant as a
        h.serverClose(4409, "Subscriber for 2 already exists")
        #expect(h.probation == [[a, b]])
        h.advance(ms: 1_000)
        h.connectAndAck()
        h.advance(ms: 200)
        h.serverClose(1012, "service restart")  // inside the trial's window
        h.advance(ms: 2_000)
        let back = h.connectAndAck()
        #expect([clean, a, b].allSatisfy { sends($0, in: back) == 1 })
        #expect(h.log.finish(a) == nil && h.log.finish(b) == nil)
        h.advance(ms: 1_000)
        #expect(h.machine.probation.isEmpty)
    }

    /// A rolling deploy, as a review run saw it on strawberry: 100 subscriptions, the server
    /// drops every connection (1012, or no close frame) right after each re-subscribe burst,
    /// while new subscribes keep arriving. Nothing is ever ended or held back.
    @Test func aRollingRestartLosesNothingAndHoldsNothingBack() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        var ids: [String] = []
        var rng = SplitMix64(seed: 7)
        for outage in 0..<40 {
            for _ in 0..<(outage < 10 ? 10 : 1) { ids.append(h.subscribe(.subscription, "subscription { s\(ids.count) }")) }
            h.advance(ms: Int64(rng.next() % 300))  // within the blame window of the last sends
            h.serverClose(outage % 2 == 0 ? 1012 : nil, "gone")
            h.advance(ms: 31_000 + Int64(rng.next() % 1_000))  // past the backoff, which grows: no ack lasts `healthyAfter`
            let back = h.connectAndAck()
            for id in ids { #expect(sends(id, in: back) == 1, "outage \(outage): \(id) not re-sent at the ack") }
        }
        #expect(!h.log.events.contains { if case .quarantined = $0 { true } else { false } })
        #expect(ids.allSatisfy { h.log.finish($0) == nil && h.machine.state(of: $0) == .active })
        #expect(h.machine.probation.isEmpty)
    }

    @Test func invalidUTF8FromTheServerClosesWith1007AndReconnects() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let id = h.subscribe()
        var frame = ByteBuffer(string: #"{"type":"next","id":"1","payload":{"data":{"s":""#)
        frame.writeBytes([0xFF, 0xFE])
        frame.writeString(#""}}}"#)
        let actions = h.record(h.machine.received(generation: h.lastGeneration!, frame, now: h.now))
        #expect(actions.closes == [1007])
        #expect(actions.updates(id).allSatisfy { if case .next = $0 { false } else { true } })
        #expect(actions.operationStates(id) == [.reconnecting])
    }
}
