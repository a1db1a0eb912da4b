import NIOCore
import Testing

@testable import GraphQLTransportWS

/// Blame and quarantine on a manual clock: one bad operation costs the others at most one
/// reconnect (a client-blaming close) or two (an ambiguous one), never a loop.
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
        #expect(closeCode == code)
        #expect(message.contains("quarantined"))
        #expect(closed.events.contains(.quarantined(id: poison, closeCode: code)))
        #expect(closed.operationStates(good) == [.reconnecting])
        h.advance(ms: 1_000)
        let back = h.connectAndAck()
        #expect(sends(good, in: back) == 1)
        h.advance(ms: 20_000)
        #expect(sends(poison, in: h.log) == 1)  // sent once, ever
        #expect(h.machine.state(of: good) == .active)
    }

    /// Seen on strawberry under load: an innocent subscription was on trial (a connection drop
    /// right after its first send charged it) when a bad one arrived during the reconnect. At
    /// the ack both went out in the same instant, and the server's 4400 was blamed on the trial
    /// alone. A newcomer sent during a trial shares the suspicion; bisection finds the culprit.
    @Test func aNewcomerSentDuringATrialSharesTheBlame() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let good = h.subscribe()
        h.advance(ms: 100)
        h.serverClose(nil, "connection lost (1006)")  // charges good: sent first 100 ms ago
        let bad = h.subscribe(.subscription, "subscription { tick( }")  // arrives while reconnecting
        h.advance(ms: 1_000)
        var back = h.connectAndAck()
        #expect(sends(good, in: back) == 1 && sends(bad, in: back) == 1)  // the same instant
        var closes = 0
        // The server closes 4400 whenever it reads `bad`; nothing else is wrong.
        while sends(bad, in: back) > 0 && closes < 10 {
            h.advance(ms: 50)
            let closed = h.serverClose(4400, "Syntax Error")
            closes += 1
            #expect(closed.finish(good) == nil, "good blamed after \(closes) closes: \(closed)")
            if closed.finish(bad) != nil { break }
            h.advance(ms: 2_000)
            back = h.connectAndAck()
            back += h.advance(ms: 1_500)  // a trial that stays up passes; the next one is sent
        }
        #expect(h.log.finish(bad) != nil, "bad never quarantined")
        #expect(h.log.finish(good) == nil)
        #expect(closes <= 3)
        h.advance(ms: 60_000)
        h.connectAndAck()
        h.advance(ms: 20_000)
        #expect(h.machine.state(of: good) == .active)
    }

    @Test func anAmbiguousCloseAfterANewSubscribePutsItOnTrialAndASecondQuarantinesIt() {
        var h = Harness()
        h.start()
        h.connectAndAck()
        let good = h.subscribe()
        h.advance(ms: 5_000)
        let suspect = h.subscribe(.subscription, "subscription { crash }")
        h.serverClose(nil, "connection lost (1006)")
        #expect(h.machine.state(of: suspect) != nil)  // charged once: not finished
        h.advance(ms: 1_000)
        let back = h.connectAndAck()
        // The clean ones first, then the charged one as a trial of its own.
        #expect(back.sentTexts.filter { $0.contains(#""type":"subscribe""#) }.count == 2)
        #expect(back.sentTexts.last?.contains(#""id":"\#(suspect)""#) == true)
        let second = h.serverClose(nil, "connection lost (1006)")
        #expect(second.finish(suspect)?.failure == "upstreamClosed")
        #expect(h.machine.state(of: good) == .reconnecting)
        h.advance(ms: 2_000)
        let again = h.connectAndAck()
        #expect(sends(good, in: again) == 1)
        #expect(sends(suspect, in: again + h.advance(ms: 5_000)) == 0)
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
        h.connectAndAck()
        let op = h.subscribe()
        h.serverClose(nil, "drop")  // on trial: charged, put on probation
        h.advance(ms: 1_000)
        #expect(sends(op, in: h.connectAndAck()) == 1)  // tried at once, after the clean ones
        h.advance(ms: 1_000)  // its trial passed
        #expect(h.machine.probation.isEmpty)
        h.serverClose(1006, "drop")  // a later drop blames nobody
        h.advance(ms: 2_000)
        #expect(sends(op, in: h.connectAndAck()) == 1)
        h.advance(ms: 1_000)
        #expect(h.machine.state(of: op) == .active)
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
