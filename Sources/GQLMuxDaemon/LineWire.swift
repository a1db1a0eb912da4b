import Handover
import LocalProtocol
import NIOCore
import RequestValidation

/// A line-protocol client's wire, between its line decoder and its session: each line becomes a
/// request (``ClientRequest``), a `subscribe`'s document parsed here, once, under the limits in
/// force, and a line the decoder could not take a refusal. The session's writer encodes its
/// lines (``LocalProtocol``'s encoder) straight to the socket. Carried over a restart as it is
/// whenever its session may be (no partial line held, which the session's budget share says),
/// its client told `reconnecting` for each subscription; nothing of its own to stop.
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

    /// The decoder's refusals reach the session as requests it answers; anything else passes.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tooLong = error as? LineFrameDecoder.LineTooLong {
            context.fireChannelRead(
                wrapInboundOut(.refused(.badRequest, message: "line longer than max_line_bytes (\(tooLong.limit))", logged: "line too long"))
            )
        } else if error is LineFrameDecoder.OverBudget {
            let message = "the daemon's memory budget (total_buffer_bytes) cannot hold this request now; try again later"
            context.fireChannelRead(wrapInboundOut(.refused(.limitExceeded, message: message, logged: nil)))
        } else {
            context.fireErrorCaught(error)
        }
    }

    var carriage: HandoverState.Carriage? { .init(.line) }
    /// Its client hears that each subscription is `reconnecting`: the next process resumes it
    /// and tells it `active` again.
    func farewell(subscriptions ids: [String]) -> [SessionMessage] {
        ids.map { .state(id: $0, .reconnecting, gapMs: nil) }
    }
    func handOver() {}
}

@available(*, unavailable)
extension LineWire: Sendable {}
