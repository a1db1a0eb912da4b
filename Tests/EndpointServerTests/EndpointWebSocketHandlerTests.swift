import EndpointServer
import GQLMuxVocabulary
import LocalEndpoint
import LocalProtocol
import NIOCore
import NIOEmbedded
import NIOWebSocket
import RequestValidation
import Testing

/// The endpoint's WebSocket handler on an `EmbeddedChannel` and its manual clock: the close
/// handshake both ways, the connection_init wait, pings, lines to the session.
@Suite struct EndpointWebSocketHandlerTests {
    /// A connected channel: the frame writer, then the handler; what it sends is read raw.
    private func channel(_ wire: WireProtocol = .transportWS) throws -> EmbeddedChannel {
        let writer = EncodedFrameWriter()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(writer)
        try channel.pipeline.syncOperations.addHandler(EndpointWebSocketHandler(wire: wire, writer: writer))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    private func frame(_ opcode: WebSocketOpcode, _ text: String = "") -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode, data: ByteBuffer(string: text))
    }

    private func closeFrame(_ code: UInt16) -> WebSocketFrame {
        var data = ByteBuffer()
        data.writeInteger(code)
        return WebSocketFrame(fin: true, opcode: .connectionClose, data: data)
    }

    /// The frames written so far, as (opcode byte, payload).
    private func sent(_ channel: EmbeddedChannel) throws -> [(opcode: UInt8, payload: [UInt8])] {
        var frames: [(UInt8, [UInt8])] = []
        while var bytes = try channel.readOutbound(as: ByteBuffer.self) {
            while bytes.readableBytes > 0 {
                let first = bytes.readInteger(as: UInt8.self)!
                var length = Int(bytes.readInteger(as: UInt8.self)! & 0x7F)
                if length == 126 { length = Int(bytes.readInteger(as: UInt16.self)!) }
                if length == 127 { length = Int(bytes.readInteger(as: UInt64.self)!) }
                frames.append((first & 0x0F, bytes.readBytes(length: length)!))
            }
        }
        return frames
    }

    private static func code(_ payload: [UInt8]) -> UInt16 { UInt16(payload[0]) << 8 | UInt16(payload[1]) }

    @Test func afterOurCloseFrameTheClientsAnswerClosesTheSocketAndIsNotEchoed() throws {
        let channel = try channel()
        try channel.writeInbound(frame(.binary, "x"))  // not allowed: closed 4400
        let close = try sent(channel)
        #expect(close.map(\.opcode) == [0x8])
        #expect(Self.code(close[0].payload) == 4400)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        #expect(channel.isActive, "open while the client may still answer")
        try channel.writeInbound(closeFrame(4400))
        #expect(!channel.isActive)
        #expect(try sent(channel).isEmpty, "the client's answer completes the handshake: no second close frame")
    }

    @Test func aClientThatNeverAnswersIsClosedAtTheHandshakesDeadline() throws {
        let channel = try channel()
        try channel.writeInbound(frame(.binary, "x"))
        #expect(try sent(channel).map(\.opcode) == [0x8])
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(EndpointWebSocketHandler.closeTimeout.nanoseconds - 1))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(!channel.isActive)
    }

    @Test func aClientThatClosesFirstGetsItsCodeBackAndIsClosed() throws {
        let channel = try channel()
        try channel.writeInbound(closeFrame(1001))
        let echo = try sent(channel)
        #expect(echo.map(\.opcode) == [0x8])
        #expect(Self.code(echo[0].payload) == 1001)
        #expect(!channel.isActive)
    }

    @Test func noConnectionInitInThreeSecondsIsClosed4408() throws {
        let channel = try channel()
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(2999))
        #expect(try sent(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        let close = try sent(channel)
        #expect(close.map(\.opcode) == [0x8])
        #expect(Self.code(close[0].payload) == 4408)
    }

    @Test func pingsAreAnsweredAndMessagesBecomeRequestsForTheSession() throws {
        let channel = try channel()
        try channel.writeInbound(frame(.ping, "hi"))
        let pong = try sent(channel)
        #expect(pong.map(\.opcode) == [0xA])
        #expect(pong.first?.payload == Array("hi".utf8))
        try channel.writeInbound(frame(.text, #"{"type":"connection_init"}"#))
        let ack = try sent(channel)
        #expect(ack.map(\.opcode) == [0x1])
        #expect(ack.first?.payload == Array(#"{"type":"connection_ack"}"#.utf8))
        try channel.writeInbound(frame(.text, #"{"type":"subscribe","id":"a","payload":{"query":"{ hello }"}}"#))
        let request = try #require(try channel.readInbound(as: ClientRequest.self))
        guard case .subscribe(let id, .success(let parsed)) = request else {
            Issue.record("not a parsed subscribe: \(request)")
            return
        }
        #expect(id == "a")
        #expect(parsed.kind == .query && String(buffer: parsed.payload) == #"{"query":"{ hello }"}"#, "parsed once, by the wire")
        try channel.writeInbound(frame(.text, #"{"type":"subscribe","id":"b","payload":{"query":"{ hello "}}"#))
        guard case .subscribe("b", .failure(let invalid))? = try channel.readInbound(as: ClientRequest.self) else {
            Issue.record("a document that does not parse is not told to the session as refused")
            return
        }
        #expect(invalid.code == .invalidDocument)
        try channel.writeInbound(frame(.text, #"{"type":"complete","id":"a"}"#))
        guard case .complete("a")? = try channel.readInbound(as: ClientRequest.self) else {
            Issue.record("no complete")
            return
        }
    }

    /// The legacy protocol's `ka` every 10 s, counted on the manual clock from `since`.
    private func keepAlives(_ channel: EmbeddedChannel, over seconds: Int64) throws -> Int {
        var count = 0
        for _ in 0..<seconds {
            channel.embeddedEventLoop.advanceTime(by: .seconds(1))
            count += try sent(channel).filter { $0.payload == Array(#"{"type":"ka"}"#.utf8) }.count
        }
        return count
    }

    @Test func aLegacyClientHearsKeepAlivesFromItsAcknowledgement() throws {
        let channel = try channel(.legacyWS)
        try channel.writeInbound(frame(.text, #"{"type":"connection_init"}"#))
        #expect(try sent(channel).map(\.payload).contains(Array(#"{"type":"ka"}"#.utf8)), "a ka right after the ack")
        #expect(try keepAlives(channel, over: 35) == 3)
    }

    /// A connection carried over a restart gets its handlers before its channel is registered
    /// and active (as `ClientBootstrap.withConnectedSocket` does): its keep-alives start when it
    /// becomes active, exactly as a fresh connection's, and no `connection_init` wait is armed.
    @Test(arguments: [WireProtocol.legacyWS, .transportWS])
    func aCarriedConnectionResumesItsKeepAlivesOnceActive(wire: WireProtocol) throws {
        let writer = EncodedFrameWriter()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(writer)
        try channel.pipeline.syncOperations.addHandler(EndpointWebSocketHandler(wire: wire, writer: writer, acknowledged: true))
        #expect(!channel.isActive)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let atOnce = try sent(channel).filter { $0.payload == Array(#"{"type":"ka"}"#.utf8) }.count
        #expect(atOnce == (wire == .legacyWS ? 1 : 0), "legacy: a ka at once, as a fresh connection's ack brings")
        let heard = try keepAlives(channel, over: 35)
        #expect(heard == (wire == .legacyWS ? 3 : 0), "graphql-transport-ws has no server keep-alive; legacy sends one every 10 s")
        #expect(channel.isActive, "no connection_init wait for a carried client")
        try channel.writeInbound(frame(.ping, "p"))
        #expect(try sent(channel).map(\.opcode) == [0xA], "pings still answered")
    }

    /// A connection that never became active before it was handed over again starts nothing.
    @Test func aConnectionHandedOverBeforeItWasActiveStartsNoKeepAlive() throws {
        let writer = EncodedFrameWriter()
        let channel = EmbeddedChannel()
        let handler = EndpointWebSocketHandler(wire: .legacyWS, writer: writer, acknowledged: true)
        try channel.pipeline.syncOperations.addHandler(writer)
        try channel.pipeline.syncOperations.addHandler(handler)
        handler.handOver()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        #expect(try keepAlives(channel, over: 25) == 0)
    }
}
