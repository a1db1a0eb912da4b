import Handover
import NIOCore
import RequestValidation

/// A line-protocol client's wire, between its line decoder and its session: each line becomes a
/// request (``ClientRequest``), a `subscribe`'s document parsed here, once, under the limits in
/// force. The session writes its lines itself (``LocalProtocol``'s encoder), straight to the
/// socket. Carried over a restart as it is whenever its session may be (no partial line held,
/// which the session's budget share says); nothing of its own to stop.
///
/// Not `Sendable`: NIO calls it on its channel's loop only.
final class LineWire: ChannelInboundHandler, CarriedConnection {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ClientRequest

    private let documentLimits: () -> SubscribeRequest.Limits

    init(documentLimits: @escaping () -> SubscribeRequest.Limits) {
        self.documentLimits = documentLimits
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let line = unwrapInboundIn(data)
        guard line.readableBytes > 0 else { return }
        context.fireChannelRead(wrapInboundOut(ClientRequest(line: line, limits: documentLimits())))
    }

    var carriage: HandoverState.Carriage? { .init(.line) }
    func handOver() {}
}

@available(*, unavailable)
extension LineWire: Sendable {}
