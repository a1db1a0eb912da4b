import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOWebSocket

/// Reads a connection's WebSocket messages from its bytes (``WebSocketMessageReader``), turns
/// them into transport events, and answers pings and the server's close.
final class UpstreamFrameHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = WebSocketFrame

    private let transport: UpstreamTransport
    private let generation: Int
    private var reader: WebSocketMessageReader
    /// The frames broke the rules: nothing more is read.
    private var failed = false
    private var reported = false
    private var lastError: String?

    init(transport: UpstreamTransport, generation: Int, maxMessageBytes: Int) {
        self.transport = transport
        self.generation = generation
        self.reader = WebSocketMessageReader(maxMessageBytes: maxMessageBytes)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        do {
            try reader.read(unwrapInboundIn(data)) { received($0, context: context) }
        } catch {
            fail(error, context: context)
        }
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
            transport.activity(generation: generation)
        case .close(var data):
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

    func channelInactive(context: ChannelHandlerContext) {
        report(code: nil, reason: lastError.map { "connection lost: \($0)" } ?? "connection lost (1006)")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        lastError = "\(error)"
        context.close(promise: nil)
    }

    private func report(code: CloseCode?, reason: String) {
        guard !reported else { return }
        reported = true
        transport.connectionClosed(generation: generation, code: code, reason: reason)
    }
}
