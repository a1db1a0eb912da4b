import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOWebSocket

/// Reads a connection's WebSocket messages from its bytes (``WebSocketMessageReader``), turns
/// them into transport events, and answers pings and the server's close.
///
/// Reading and acting are two steps. A read's messages are queued first, with the reader's state
/// released, and acted on afterwards: acting writes (a pong, a close, a subscribe the transport
/// sends on an ack), and a write's flush may make NIO read the socket again, which calls
/// `channelRead` again before the outer call has returned. That inner call only queues what it
/// read; the outer call, still draining, acts on it in order.
package final class UpstreamFrameHandler: ChannelInboundHandler {
    package typealias InboundIn = ByteBuffer
    package typealias OutboundOut = WebSocketFrame

    private let transport: any UpstreamFrameSink
    private let generation: Int
    private var reader: WebSocketMessageReader
    /// What the reads gave and nothing has acted on yet, oldest first; kept for its capacity.
    private var queued: [Event] = []
    /// A `channelRead` is acting on `queued`: a call made from inside it only adds to the queue.
    private var draining = false
    /// The frames broke the rules, or the server's close came: nothing more is read.
    private var failed = false
    private var reported = false
    private var lastError: String?

    package init(transport: any UpstreamFrameSink, generation: Int, maxMessageBytes: Int) {
        self.transport = transport
        self.generation = generation
        self.reader = WebSocketMessageReader(maxMessageBytes: maxMessageBytes)
    }

    /// One read's outcome: a whole message, or the failure that ends the connection.
    private enum Event {
        case message(WebSocketMessageReader.Message)
        case failure(WebSocketMessageReader.Failure)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        do {
            try reader.read(unwrapInboundIn(data)) { queued.append(.message($0)) }
        } catch {
            queued.append(.failure(error))
        }
        guard !draining else { return }  // re-entered by our own write: the outer call acts on it
        draining = true
        defer { draining = false }
        var next = 0
        while next < queued.count, !failed {
            let event = queued[next]
            next += 1
            switch event {
            case .message(let message): received(message, context: context)
            case .failure(let failure): fail(failure, context: context)
            }
        }
        queued.removeAll(keepingCapacity: queued.capacity <= 64)
    }

    /// The socket's read is done: its messages were all acted on (a read completed inside our
    /// own write, while the outer call drains, is the outer read's to tell).
    package func channelReadComplete(context: ChannelHandlerContext) {
        if !failed, !draining { transport.readComplete(generation: generation) }
        context.fireChannelReadComplete()
    }

    private func received(_ message: WebSocketMessageReader.Message, context: ChannelHandlerContext) {
        switch message {
        case .text(let text):
            transport.frameReceived(generation: generation, text)
        case .binary:
            transport.binaryReceived(generation: generation)
        case .ping(let data):
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: data)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            transport.activity(generation: generation)
        case .pong:
            transport.pongReceived(generation: generation)
        case .close(var data):
            failed = true  // nothing after a close frame is read (RFC 6455 §5.5.1)
            if transport.closeFrameReceived(generation: generation) == .completesOurs {
                context.close(promise: nil)  // it answers our close: the handshake is complete
                return
            }
            let code = data.readInteger(as: UInt16.self).map { CloseCode($0) } ?? .noStatus
            let reason = data.readString(length: data.readableBytes) ?? ""
            report(code: code, reason: reason)
            var echo = context.channel.allocator.buffer(capacity: 2)
            echo.writeInteger(code == .noStatus ? CloseCode.normal.code : code.code)
            let close = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: echo)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(close)).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// The server's frames broke the rules, or a message was too large (a protocol violation
    /// with 1009, as the limit's contract says): the connection is closed.
    private func fail(_ error: WebSocketMessageReader.Failure, context: ChannelHandlerContext) {
        failed = true
        lastError = "\(error)"
        if error == .tooLarge {
            transport.protocolViolation(generation: generation, "message larger than max_message_bytes", code: 1009)
        }
        context.close(promise: nil)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        report(code: nil, reason: lastError.map { "connection lost: \($0)" } ?? "connection lost (1006)")
        context.fireChannelInactive()
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        lastError = "\(error)"
        context.close(promise: nil)
    }

    private func report(code: CloseCode?, reason: String) {
        guard !reported else { return }
        reported = true
        transport.connectionClosed(generation: generation, code: code, reason: reason)
    }
}

@available(*, unavailable)
extension UpstreamFrameHandler: Sendable {}
