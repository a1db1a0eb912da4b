import NIOCore

@testable import ResultDelivery

/// Gives a writer its place in a test channel's pipeline, as a session does, without holding it.
final class WriterPlace: ChannelInboundHandler {
    typealias InboundIn = Never
    weak var writer: ResultWriter?
    init(_ writer: ResultWriter) { self.writer = writer }
    func handlerAdded(context: ChannelHandlerContext) { writer?.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { writer?.context = nil }
}

/// A memory budget that adds up what it is told.
final class CountingBudget: OutboundBudget {
    var outbound = 0
    func outboundChanged(by delta: Int) { outbound += delta }
}
