import GQLMuxVocabulary
import LocalEndpoint
import LocalProtocol
import Multiplexing
import NIOCore
import NIOEmbedded
import Testing

@testable import ResultDelivery

/// The invariants that make the hot path's unsafe code safe, as `Fanout+Delivery.swift` states
/// them, one test each (the fourth is `SharedFramesTests.framesStillHeldForOneSubscriberAreCopiedBeforeTheNextPrefix`).
@Suite struct InvariantTests {
    /// 1: a delivery alone keeps its writer and its prefix alive: with every other reference to
    /// the writer gone and the encoded prefix's buffer overwritten, a result written through the
    /// delivery's plain values still reaches the client, under the prefix it was made with.
    @Test func aDeliveryOwnsWhatItsPlainValuesPointAt() throws {
        let channel = EmbeddedChannel()
        let budget = CountingBudget()
        let fanout = Fanout(eventLoop: channel.embeddedEventLoop, budget: budget, turn: OneAtATime())
        var delivery: Fanout.Delivery?
        weak var weakWriter: ResultWriter?
        do {
            let writer = ResultWriter(output: .lines, channel: channel, budget: budget, spare: BatchSpare())
            try channel.pipeline.syncOperations.addHandler(WriterPlace(writer))
            var prefix = NextFraming.line.prefix(id: "kept")
            delivery = Fanout.Delivery(writer: writer, prefix: prefix)
            prefix.setString("XXXXXXXXXXXXXXXXXXXXXXXX", at: prefix.readerIndex)
            weakWriter = writer
        }
        #expect(weakWriter != nil, "the sink holds its writer")
        let payload = ByteBuffer(string: #"{"data":1}"#)
        let written = try #require(delivery).prefixBytes.count
        #expect(written == NextFraming.line.prefix(id: "kept").readableBytes)
        #expect(String(decoding: try #require(delivery).prefixBytes, as: UTF8.self) == String(buffer: NextFraming.line.prefix(id: "kept")))
        #expect(payload.withUnsafeReadableBytes { fanout.write($0, payload, to: delivery!) })
        channel.embeddedEventLoop.run()  // the end of the turn's flush, which lets go of it
        #expect(String(buffer: try #require(try channel.readOutbound(as: ByteBuffer.self))) == #"{"type":"next","id":"kept","payload":{"data":1}}"# + "\n")
        delivery = nil
        #expect(weakWriter == nil, "and nothing else: gone with its last delivery")
    }

    /// 2: a run's body pointers are not kept past the run: the arrays a small run was written
    /// with are kept for the next run empty.
    @Test func aRunsPointersAreNotKeptPastIt() throws {
        let channel = EmbeddedChannel()
        let budget = CountingBudget()
        let fanout = Fanout(eventLoop: channel.embeddedEventLoop, budget: budget, turn: OneAtATime())
        let writer = ResultWriter(output: .lines, channel: channel, budget: budget, spare: BatchSpare())
        try channel.pipeline.syncOperations.addHandler(WriterPlace(writer))
        typealias Core = Fanout.Core
        var core = Core(maxOperationsPerClient: 10)
        let actions = core.subscribe(
            client: ObjectIdentifier(writer),
            localID: "s",
            kind: .subscription,
            key: "k",
            tag: Fanout.Delivery(writer: writer, prefix: NextFraming.line.prefix(id: "s"))
        )
        guard case .open(let id, _, _, _, _, _)? = actions.first(where: { if case .open = $0 { true } else { false } }) else {
            Issue.record("the first subscriber opens the operation")
            return
        }
        for tick in 0..<3 { fanout.append(ByteBuffer(string: #"{"data":\#(tick)}"#), of: id, subscribers: core.subscribers(of: id)) }
        fanout.writeRun(flushing: true)
        #expect(fanout.runArrays.bodies.isEmpty)
        #expect(fanout.run.payloads.isEmpty)
        var out = ""
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: bytes) }
        #expect(out.split(separator: "\n").count == 3)
    }

    /// 3: what `frame` writes is at most what `fitting` counted, for every framing's header
    /// (each of its three lengths), prefix and tail; the byte after the counted room is never
    /// touched.
    @Test(arguments: [NextFraming.line, .webSocket(.transportWS), .sse, .multipart])
    func framingWritesWithinWhatWasCounted(_ framing: NextFraming) {
        let payloads = (0..<40).map { String(repeating: "p", count: $0 * 13 % 300) } + [String(repeating: "q", count: 70_000)]
        let scratch = ByteBuffer(string: payloads.joined())
        let prefix = framing.prefix(id: "abc")
        prefix.withUnsafeReadableBytes { head in
            scratch.withUnsafeReadableBytes { all in
                var start = 0
                let bodies = payloads.map { payload in
                    defer { start += payload.utf8.count }
                    return UnsafeRawBufferPointer(rebasing: all[start..<(start + payload.utf8.count)])
                }
                bodies.withUnsafeBufferPointer { bodies in
                    framing.suffix.withUTF8Buffer { tail in
                        let fixed = (framing.hasHeader ? NextFraming.maxHeaderBytes : 0) + head.count + tail.count
                        var next = 0
                        while next < bodies.count {
                            let (end, bytes) = ResultBytes.fitting(bodies, from: next, fixed: fixed, room: 2_000)  // the large one alone: at least one result
                            let out = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes + 1, alignment: 1)
                            defer { out.deallocate() }
                            out.storeBytes(of: 0xA5, toByteOffset: bytes, as: UInt8.self)
                            let written = ResultBytes.frame(bodies, next..<end, header: framing.hasHeader, prefix: head, tail: tail, to: out.baseAddress!)
                            #expect(written <= bytes, "within the room counted")
                            #expect(out[bytes] == 0xA5, "nothing past it")
                            #expect(end > next)
                            next = end
                        }
                    }
                }
            }
        }
    }
}
