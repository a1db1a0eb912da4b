import GQLMuxVocabulary
import GraphQLTransportWS
import NIOCore
import NIOWebSocket

/// Turns WebSocket frames of one connection into transport events, and answers pings.
final class UpstreamFrameHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let transport: UpstreamTransport
    private let generation: Int
    private var reported = false
    private var lastError: String?

    init(transport: UpstreamTransport, generation: Int) {
        self.transport = transport
        self.generation = generation
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            transport.frameReceived(generation: generation, frame.unmaskedData)
        case .binary:
            transport.binaryReceived(generation: generation)
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            transport.activity(generation: generation)
        case .pong:
            transport.activity(generation: generation)
        case .connectionClose:
            if transport.closeFrameReceived(generation: generation) == .completesOurs {
                context.close(promise: nil)  // it answers our close: the handshake is complete
                return
            }
            var data = frame.unmaskedData
            let code = data.readInteger(as: UInt16.self).map { CloseCode($0) } ?? .noStatus
            let reason = data.readString(length: data.readableBytes) ?? ""
            report(code: code, reason: reason)
            var echo = context.channel.allocator.buffer(capacity: 2)
            echo.writeInteger(code == .noStatus ? CloseCode.normal.code : code.code)
            let close = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: echo)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(close)).whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        report(code: nil, reason: lastError.map { "connection lost: \($0)" } ?? "connection lost (1006)")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        lastError = "\(error)"
        let tooBig: Bool =
            switch error {
            case NIOWebSocketError.invalidFrameLength, NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge: true
            default: false
            }
        if tooBig {
            transport.protocolViolation(generation: generation, "message larger than max_message_bytes", code: 1009)
        }
        context.close(promise: nil)
    }

    private func report(code: CloseCode?, reason: String) {
        guard !reported else { return }
        reported = true
        transport.connectionClosed(generation: generation, code: code, reason: reason)
    }
}
