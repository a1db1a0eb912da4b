import GQLMuxVocabulary
import LocalEndpoint
import LocalProtocol
import NIOCore
import NIOEmbedded
import Testing

@testable import ResultDelivery

/// One client's ``ResultWriter`` on an `EmbeddedChannel`, in each framing and each of its three outputs: what
/// it hands its wire is exactly each result framed alone, in order, one write per flush, with
/// the messages told in between after the results before them; a large payload is passed by
/// reference, an HTTP stream's batch is one whole chunk, a single answer gets values, and a
/// closed writer writes nothing.
@Suite struct ResultWriterTests {
    private func rig(_ output: ResultWriter.Output, _ framing: NextFraming = .line) throws -> (EmbeddedChannel, ResultWriter, CountingBudget) {
        let channel = EmbeddedChannel()
        let budget = CountingBudget()
        let writer = ResultWriter(output: output, channel: channel, budget: budget, spare: BatchSpare())
        writer.framing = framing
        try channel.pipeline.syncOperations.addHandler(WriterPlace(writer))
        return (channel, writer, budget)
    }

    /// Writes `payloads` as one subscriber's share of a run, with `prefix`.
    @discardableResult
    private func write(_ writer: ResultWriter, prefix: ByteBuffer, _ payloads: [String]) -> Bool {
        let scratch = ByteBuffer(string: payloads.joined())
        return prefix.withUnsafeReadableBytes { head in
            scratch.withUnsafeReadableBytes { all in
                var start = 0
                let bodies = payloads.map { payload in
                    defer { start += payload.utf8.count }
                    return UnsafeRawBufferPointer(rebasing: all[start..<(start + payload.utf8.count)])
                }
                return bodies.withUnsafeBufferPointer { writer.writeNexts(prefix: head, bodies: $0) }
            }
        }
    }

    /// One result on its own: `payload` passed as a buffer (queued by reference when large).
    @discardableResult
    private func writeOne(_ writer: ResultWriter, prefix: ByteBuffer, _ payload: ByteBuffer) -> Bool {
        prefix.withUnsafeReadableBytes { head in
            payload.withUnsafeReadableBytes { body in writer.writeNext(prefix: head, body: body, payload: payload) }
        }
    }

    @Test func aLineClientsResultsAndMessagesLeaveAsOneWriteOfLinesInOrder() throws {
        let (channel, writer, _) = try rig(.lines)
        let prefix = NextFraming.line.prefix(id: "s1")
        #expect(write(writer, prefix: prefix, [#"{"data":{"tick":1}}"#, #"{"data":{"tick":2}}"#]))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "nothing leaves before the flush")
        // A message told without a flush joins the batch after the results before it.
        #expect(writer.send(.complete(id: "s1"), flush: false) == 0)
        let handed = writer.flush()
        let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "one write")
        let expected =
            #"{"type":"next","id":"s1","payload":{"data":{"tick":1}}}"# + "\n" + #"{"type":"next","id":"s1","payload":{"data":{"tick":2}}}"#
            + "\n" + #"{"type":"complete","id":"s1"}"# + "\n"
        #expect(String(buffer: written) == expected)
        #expect(handed == written.readableBytes)
        #expect(writer.bytesSent == written.readableBytes && writer.buffered == written.readableBytes)
        writer.noteDelivered(2, second: 7)
        #expect(writer.resultsSent == 2)
        #expect(writer.kindName == "line")
    }

    @Test func aLargePayloadIsPassedByReferenceBetweenItsPrefixAndSuffix() throws {
        let (channel, writer, _) = try rig(.lines)
        let large = ByteBuffer(string: #"{"data":{"blob":""# + String(repeating: "z", count: 2_000) + #""}}"#)
        #expect(writeOne(writer, prefix: NextFraming.line.prefix(id: "big"), large))
        writer.flush()
        var parts: [ByteBuffer] = []
        while let part = try channel.readOutbound(as: ByteBuffer.self) { parts.append(part) }
        #expect(parts.count == 3, "prefix, the payload itself, suffix")
        #expect(parts[1] == large)
        #expect(parts.map { String(buffer: $0) }.joined() == #"{"type":"next","id":"big","payload":"# + String(buffer: large) + "}\n")
    }

    @Test func aWebSocketClientGetsFramedResultsThenMessagesAsValues() throws {
        for wire in [WireProtocol.transportWS, .legacyWS] {
            let (channel, writer, _) = try rig(.webSocket, .webSocket(wire))
            let framing = NextFraming.webSocket(wire)
            let payload = #"{"data":{"tick":1}}"#
            write(writer, prefix: framing.prefix(id: "a"), [payload])
            _ = writer.send(.complete(id: "a"))
            guard case .frames(let frame)? = try channel.readOutbound(as: WebSocketOutput.self) else {
                Issue.record("the results first, framed")
                continue
            }
            let text = String(buffer: framing.prefix(id: "a")) + payload + "}"
            #expect(Array(frame.readableBytesView) == [0x81, UInt8(text.utf8.count)] + Array(text.utf8))
            guard case .message(.complete(let id))? = try channel.readOutbound(as: WebSocketOutput.self) else {
                Issue.record("then the message, as a value")
                continue
            }
            #expect(id == "a")
            #expect(writer.kindName == (wire == .transportWS ? "graphql-transport-ws" : "graphql-ws"))
        }
    }

    @Test func anHTTPStreamsBatchIsOneWholeChunk() throws {
        for framing in [NextFraming.sse, .multipart] {
            let (channel, writer, _) = try rig(.http, framing)
            let payloads = [#"{"data":{"tick":1}}"#, #"{"data":{"tick":2}}"#]
            write(writer, prefix: framing.prefix(id: "http-1"), payloads)
            writer.flush()
            guard case .chunk(let chunk)? = try channel.readOutbound(as: HTTPOutput.self) else {
                Issue.record("a sealed chunk")
                continue
            }
            let body = payloads.map { String(buffer: framing.prefix(id: "http-1")) + $0 + "\(framing.suffix)" }.joined()
            #expect(String(buffer: chunk) == String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n")
            #expect(try channel.readOutbound(as: HTTPOutput.self) == nil)
        }
    }

    @Test func aSingleAnswersResultsReachItsWireAsValues() throws {
        let (channel, writer, budget) = try rig(.http, .answer(id: "http-3"))
        #expect(!writer.takesSharedFrames)
        write(writer, prefix: ByteBuffer(), [#"{"data":{"a":1}}"#])
        guard case .message(.next(let id, let payload, let mark))? = try channel.readOutbound(as: HTTPOutput.self) else {
            Issue.record("a value, not bytes")
            return
        }
        #expect(id == "http-3" && String(buffer: payload) == #"{"data":{"a":1}}"# && mark == nil)
        #expect(budget.outbound == 0, "a value counts as no bytes: its wire encodes it")
        #expect(writer.kindName == "http")
    }

    @Test func aClosedWriterWritesNothing() throws {
        let (channel, writer, _) = try rig(.lines)
        writer.closed = true
        #expect(!write(writer, prefix: NextFraming.line.prefix(id: "s"), ["{}"]))
        #expect(!writeOne(writer, prefix: NextFraming.line.prefix(id: "s"), ByteBuffer(string: "{}")))
        #expect(!writer.writeFrames([ByteBuffer(string: "x")]))
        #expect(writer.send(.complete(id: "s")) == 0)
        #expect(writer.flush() == 0)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
    }

    @Test func writingOutHandsEverythingBatchedOverThenNothingMore() throws {
        let (channel, writer, _) = try rig(.lines)
        write(writer, prefix: NextFraming.line.prefix(id: "s"), ["{}"])
        var done = false
        writer.writeOut().assumeIsolated().whenSuccess { done = true }
        #expect(done, "the write completes once handed over")
        #expect(String(buffer: try #require(try channel.readOutbound(as: ByteBuffer.self))) == #"{"type":"next","id":"s","payload":{}}"# + "\n")
        #expect(!write(writer, prefix: NextFraming.line.prefix(id: "s"), ["{}"]))
    }
}
