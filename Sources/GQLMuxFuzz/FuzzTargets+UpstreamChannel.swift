import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOEmbedded
import NIOWebSocket
import UpstreamFrames

extension FuzzTargets {
    /// A server's bytes through the real upstream frame handler in a channel whose every flush
    /// reads the next cut of bytes back in before the write returns, as a socket channel's flush
    /// may; the handler's transport writes on every message it is told of (as the real one
    /// answers pings, acks and closes). Invariants: no trap (the handler is never re-entered
    /// with its reader borrowed); the messages told are those the reader finds in the whole
    /// input, in order, up to the first close or failure, and nothing after.
    public static func upstreamFramesThroughAChannel(_ data: UnsafeRawBufferPointer) {
        guard let first = data.first else { return }
        let limit = 4_096
        var bytes = ByteBuffer()
        bytes.writeBytes(data)

        // What the reader alone finds in the whole input, cut short as the handler stops.
        var expected: [String] = []
        var reader = WebSocketMessageReader(maxMessageBytes: limit)
        var failed = false
        do {
            try reader.read(bytes) { message in
                guard !failed else { return }
                expected.append(UpstreamRecorder.describe(message))
                if case .close = message { failed = true }
            }
        } catch {
            if !failed, error == .tooLarge { expected.append("too large") }
        }

        let recorder = UpstreamRecorder()
        let socket = ReadOnFlush()
        let handler = UpstreamFrameHandler(transport: recorder, generation: 1, maxMessageBytes: limit)
        let channel = EmbeddedChannel()
        defer {
            // A closed channel's handlers are removed by a task on its loop: run it, or the
            // pipeline and its handlers keep each other alive.
            _ = try? channel.finish()
            channel.embeddedEventLoop.run()
        }
        try! channel.pipeline.syncOperations.addHandler(socket)
        try! channel.pipeline.syncOperations.addHandler(handler)
        recorder.channel = channel
        _ = try? channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let cut = Int(first % 61) + 1
        var from = 0
        while from < bytes.readableBytes {
            let count = Swift.min(cut, bytes.readableBytes - from)
            socket.pending.append(bytes.getSlice(at: from, length: count)!)
            from += count
        }
        while channel.isActive, !socket.pending.isEmpty {
            _ = try? channel.writeInbound(socket.pending.removeFirst())
        }
        precondition(recorder.told == expected, "the channel told \(recorder.told), the reader found \(expected)")
    }
}

/// At the head of the pipeline: each flush fires the next pending bytes into the pipeline
/// before it returns.
private final class ReadOnFlush: ChannelOutboundHandler {
    typealias OutboundIn = Any
    var pending: [ByteBuffer] = []

    func flush(context: ChannelHandlerContext) {
        context.flush()
        guard context.channel.isActive, !pending.isEmpty else { return }
        context.pipeline.syncOperations.fireChannelRead(NIOAny(pending.removeFirst()))
    }
}

/// A transport that records what it is told and writes (and flushes) a frame for each message.
private final class UpstreamRecorder: UpstreamFrameSink {
    var told: [String] = []
    weak var channel: EmbeddedChannel?

    static func describe(_ message: WebSocketMessageReader.Message) -> String {
        switch message {
        case .text(let text): "text \(Array(text.readableBytesView))"
        case .binary: "binary"
        case .ping, .pong: "activity"
        case .close: "close"
        }
    }

    private func answer() {
        let frame = WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "{}"))
        channel?.writeAndFlush(frame, promise: nil)
    }

    func frameReceived(generation: Int, _ frame: ByteBuffer) {
        told.append("text \(Array(frame.readableBytesView))")
        answer()
    }
    func binaryReceived(generation: Int) {
        told.append("binary")
        answer()
    }
    func activity(generation: Int) { told.append("activity") }
    func pongReceived(generation: Int) { told.append("activity") }
    func closeFrameReceived(generation: Int) -> CloseHandshake.PeerClose {
        told.append("close")
        return .startsTheirs
    }
    func protocolViolation(generation: Int, _ reason: String, code: CloseCode) { told.append("too large") }
    func connectionClosed(generation: Int, code: CloseCode?, reason: String) {}
}
