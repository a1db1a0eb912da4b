import GQLMuxVocabulary
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing
import UpstreamFrames

/// The frame handler on its own: server bytes in, a recording sink's calls out, and the frames
/// it writes back (pongs, the close echo) read off an embedded channel.
@Suite struct UpstreamFrameHandlerTests {
    /// Every call the handler makes, in order, as text.
    final class RecordingSink: UpstreamFrameSink {
        var calls: [String] = []
        var peerClose = CloseHandshake.PeerClose.startsTheirs
        func frameReceived(generation: Int, _ frame: ByteBuffer) { calls.append("text \(generation) \(String(buffer: frame))") }
        func binaryReceived(generation: Int) { calls.append("binary") }
        func activity(generation: Int) { calls.append("activity") }
        func pongReceived(generation: Int) { calls.append("pong") }
        func closeFrameReceived(generation: Int) -> CloseHandshake.PeerClose {
            calls.append("close frame")
            return peerClose
        }
        func protocolViolation(generation: Int, _ reason: String, code: CloseCode) { calls.append("violation \(code.code) \(reason)") }
        func connectionClosed(generation: Int, code: CloseCode?, reason: String) {
            calls.append("closed \(code.map { "\($0.code)" } ?? "-") \(reason)")
        }
        func readComplete(generation: Int) { calls.append("read complete") }
    }

    /// Frames as a server sends them (unmasked), encoded by NIO's own encoder.
    static func wire(_ frames: [(WebSocketOpcode, ByteBuffer)]) throws -> ByteBuffer {
        let encoder = EmbeddedChannel(handler: WebSocketFrameEncoder())
        for (opcode, data) in frames { try encoder.writeOutbound(WebSocketFrame(fin: true, opcode: opcode, data: data)) }
        var bytes = ByteBuffer()
        while var part = try encoder.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&part) }
        return bytes
    }

    static func text(_ string: String) -> (WebSocketOpcode, ByteBuffer) { (.text, ByteBuffer(string: string)) }

    /// The frames the handler wrote back, as it wrote them (a client's must carry a mask key).
    static func written(_ channel: EmbeddedChannel) throws -> [WebSocketFrame] {
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readOutbound(as: WebSocketFrame.self) { frames.append(frame) }
        return frames
    }

    func channel(_ sink: RecordingSink, maxMessageBytes: Int = 1 << 20) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(UpstreamFrameHandler(transport: sink, generation: 7, maxMessageBytes: maxMessageBytes))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 4000)).wait()  // active, as a connected socket is
        #expect(channel.isActive)
        return channel
    }

    @Test func oneReadsMessagesAreToldInOrderThenItsEndOnce() throws {
        let sink = RecordingSink()
        let channel = try channel(sink)
        var bytes = try Self.wire([Self.text("a"), (.ping, ByteBuffer(string: "p")), Self.text("b"), (.pong, ByteBuffer())])
        // "b" split across two reads is told once, whole, in the read that ends it (an embedded
        // channel's writeInbound is one read: channelRead, then channelReadComplete).
        let first = bytes.readSlice(length: bytes.readableBytes - 3)!
        try channel.writeInbound(first)
        #expect(sink.calls == ["text 7 a", "activity", "read complete"])
        try channel.writeInbound(bytes)
        #expect(sink.calls == ["text 7 a", "activity", "read complete", "text 7 b", "pong", "read complete"])
        let pongs = try Self.written(channel)
        #expect(pongs.map(\.opcode) == [.pong])
        #expect(pongs.first.map { String(buffer: $0.data) } == "p", "the ping's own data, echoed")
        #expect(pongs.first?.maskKey != nil, "a client's frames are masked")
    }

    @Test func theServersCloseIsToldOnceEchoedAndNothingAfterItIsRead() throws {
        let sink = RecordingSink()
        let channel = try channel(sink)
        var close = ByteBuffer()
        close.writeInteger(UInt16(4403))
        close.writeString("forbidden")
        try channel.writeInbound(try Self.wire([(.connectionClose, close), Self.text("after the close")]))
        #expect(sink.calls == ["close frame", "closed 4403 forbidden"])
        let echo = try Self.written(channel)
        #expect(echo.map(\.opcode) == [.connectionClose])
        var data = echo.first?.data ?? ByteBuffer()
        #expect(data.readInteger(as: UInt16.self) == 4403, "the close echoes the server's code")
        try channel.writeInbound(try Self.wire([Self.text("still after")]))
        channel.pipeline.fireChannelInactive()
        #expect(sink.calls == ["close frame", "closed 4403 forbidden"], "nothing is read after a close, and the end is told once")
    }

    @Test func aCloseThatAnswersOursEndsTheConnectionWithoutAnEcho() throws {
        let sink = RecordingSink()
        sink.peerClose = .completesOurs
        let channel = try channel(sink)
        var close = ByteBuffer()
        close.writeInteger(UInt16(1000))
        try channel.writeInbound(try Self.wire([(.connectionClose, close)]))
        #expect(try Self.written(channel).isEmpty)
        #expect(!channel.isActive, "the handshake is complete: the connection is closed")
        #expect(sink.calls.first == "close frame")
    }

    @Test func aMessageOverTheLimitIsAViolationWith1009AndEndsTheReading() throws {
        let sink = RecordingSink()
        let channel = try channel(sink, maxMessageBytes: 16)
        try channel.writeInbound(try Self.wire([Self.text("small"), Self.text(String(repeating: "x", count: 17)), Self.text("never")]))
        #expect(sink.calls.prefix(2) == ["text 7 small", "violation 1009 message larger than max_message_bytes"])
        #expect(!sink.calls.contains("text 7 never"))
        #expect(!sink.calls.contains("read complete"), "a failed connection tells no read's end")
        #expect(!channel.isActive)
    }

    @Test func framesOfAReservedOpcodeAreSkipped() throws {
        let sink = RecordingSink()
        let channel = try channel(sink)
        var bytes = ByteBuffer(bytes: [0x83, 0x00])
        var after = try Self.wire([Self.text("next")])
        bytes.writeBuffer(&after)
        try channel.writeInbound(bytes)
        #expect(sink.calls == ["text 7 next", "read complete"])
        #expect(channel.isActive)
    }

    @Test func malformedFramesCloseTheConnectionAndSayWhy() throws {
        let sink = RecordingSink()
        let channel = try channel(sink)
        // A final continuation frame with no message to continue.
        try channel.writeInbound(ByteBuffer(bytes: [0x80, 0x00]))
        #expect(!channel.isActive)
        channel.pipeline.fireChannelInactive()
        #expect(sink.calls.count == 1, "\(sink.calls)")
        #expect(sink.calls.first == "closed - connection lost: WebSocket protocol error: continuation frame without a message to continue")
    }
}
