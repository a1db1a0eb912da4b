import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import Upstream

/// A write's flush can make NIO read the socket again (`BaseSocketChannel.flushNow` →
/// `readFromSocket`), so the frame handler's `channelRead` is called again from inside its own
/// write. These tests put a handler at the head of a real pipeline that does exactly that: on
/// each flush it fires the next bytes the "socket" holds into the pipeline, before the write
/// returns. The transport and its frame handler are the real ones.
@Suite struct ReentrantReadTests {
    /// At the head of the pipeline: every flush reads the next queued bytes back in, as a
    /// socket channel's flush may.
    final class ReadOnFlush: ChannelOutboundHandler {
        typealias OutboundIn = Any
        var socket: [ByteBuffer] = []
        private(set) var reentered = 0

        func flush(context: ChannelHandlerContext) {
            context.flush()
            guard !socket.isEmpty else { return }
            reentered += 1
            context.pipeline.syncOperations.fireChannelRead(NIOAny(socket.removeFirst()))
        }
    }

    /// A frame as the server's bytes (NIO's own encoder writes them).
    static func wire(_ opcode: WebSocketOpcode, _ text: String) throws -> ByteBuffer {
        let encoder = EmbeddedChannel(handler: WebSocketFrameEncoder())
        try encoder.writeOutbound(WebSocketFrame(fin: true, opcode: opcode, data: ByteBuffer(string: text)))
        var bytes = ByteBuffer()
        while var part = try encoder.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&part) }
        return bytes
    }

    @Test func aReadReenteredByItsOwnPongIsQueuedAndActedOnInOrder() throws {
        let rig = try EmbeddedTransportTests.Rig()
        let id = rig.subscribe("s")
        try rig.connectAndAck()
        _ = try rig.sent()
        let reader = ReadOnFlush()
        try rig.channel.pipeline.syncOperations.addHandler(reader, position: .first)
        // One read: a ping (answered with a pong, whose flush reads again), then result 1.
        // The re-entered read brings result 2 and another ping, whose pong reads result 3.
        var first = try Self.wire(.ping, "a")
        var next1 = try Self.wire(.text, #"{"type":"next","id":"\#(id)","payload":{"data":{"tick":1}}}"#)
        first.writeBuffer(&next1)
        var second = try Self.wire(.text, #"{"type":"next","id":"\#(id)","payload":{"data":{"tick":2}}}"#)
        var ping2 = try Self.wire(.ping, "b")
        second.writeBuffer(&ping2)
        reader.socket = [second, try Self.wire(.text, #"{"type":"next","id":"\#(id)","payload":{"data":{"tick":3}}}"#)]
        try rig.channel.writeInbound(first)
        rig.loop.run()
        #expect(reader.reentered == 2)
        #expect(rig.recorder.nexts("s") == [#"{"data":{"tick":1}}"#, #"{"data":{"tick":2}}"#, #"{"data":{"tick":3}}"#])
        #expect(try rig.sent() == ["pong a", "pong b"])
        #expect(rig.recorder.states("s") == [.pending, .active])
    }

    @Test func aCloseAnsweredWhileItsReadIsReenteredEndsTheConnectionOnce() throws {
        let rig = try EmbeddedTransportTests.Rig()
        let id = rig.subscribe("s")
        try rig.connectAndAck()
        _ = try rig.sent()
        let reader = ReadOnFlush()
        try rig.channel.pipeline.syncOperations.addHandler(reader, position: .first)
        // The echo of the server's close re-enters with a result and a frame that breaks the
        // rules: nothing after the close is acted on.
        var after = try Self.wire(.text, #"{"type":"next","id":"\#(id)","payload":{"data":{"tick":9}}}"#)
        after.writeBytes([0x8F, 0x00])  // a reserved control opcode, fragmented: malformed
        reader.socket = [after]
        var close = ByteBuffer()
        close.writeInteger(UInt16(1001))
        let encoder = EmbeddedChannel(handler: WebSocketFrameEncoder())
        try encoder.writeOutbound(WebSocketFrame(fin: true, opcode: .connectionClose, data: close))
        let bytes = try encoder.readOutbound(as: ByteBuffer.self)!
        var whole = bytes
        if var rest = try encoder.readOutbound(as: ByteBuffer.self) { whole.writeBuffer(&rest) }
        try rig.channel.writeInbound(whole)
        rig.loop.run()
        #expect(reader.reentered == 1)
        #expect(rig.recorder.nexts("s").isEmpty)
        #expect(try rig.sent() == ["close 1001"])
        #expect(rig.recorder.states("s") == [.pending, .active, .reconnecting])
    }
}
