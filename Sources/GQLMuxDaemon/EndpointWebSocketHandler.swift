import LocalEndpoint
import NIOCore
import NIOWebSocket

/// One GraphQL WebSocket client of the endpoint, in front of its ``ClientSession``: frames in
/// become local-protocol lines for the session; the session's lines become frames
/// (``WebSocketServerSession`` decides both). Answers WebSocket pings, times the
/// `connection_init` wait, and sends legacy `ka` keep-alives.
///
/// `@unchecked Sendable` — safe because NIO calls it on its channel's loop only, and its
/// timers run there.
final class EndpointWebSocketHandler: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = WebSocketFrame

    /// graphql-ws's default wait for `connection_init`.
    static let initTimeout = TimeAmount.seconds(3)
    static let keepAliveInterval = TimeAmount.seconds(10)

    private var session: WebSocketServerSession
    private var closeSent = false
    private var timers: [Scheduled<Void>] = []
    private var keepAlive: RepeatedTask?

    init(wire: EndpointSubprotocol) { session = WebSocketServerSession(wire: wire) }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timers.append(
            context.eventLoop.scheduleTask(in: Self.initTimeout) {
                let context = loopBound.value
                self.perform(self.session.initTimedOut(), context: context, promise: nil)
            }
        )
    }

    func handlerRemoved(context: ChannelHandlerContext) { stopTimers() }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimers()
        context.fireChannelInactive()
    }

    private func stopTimers() {
        for timer in timers { timer.cancel() }
        timers = []
        keepAlive?.cancel()
        keepAlive = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            let acknowledged = session.acknowledged
            perform(session.received(frame.unmaskedData), context: context, promise: nil)
            if !acknowledged, session.acknowledged, session.wire == .legacyWS { startKeepAlive(context) }
        case .binary:
            perform(session.receivedBinary(), context: context, promise: nil)
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            if !closeSent {
                closeSent = true
                var data = frame.unmaskedData
                let code = data.readWebSocketErrorCode() ?? .normalClosure
                var echo = context.channel.allocator.buffer(capacity: 2)
                echo.write(webSocketErrorCode: code)
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: echo)), promise: nil)
            }
            context.close(promise: nil)
        default:
            break
        }
    }

    /// The session's lines, translated.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        perform(session.fromSession(unwrapOutboundIn(data)), context: context, promise: promise)
    }

    private func perform(_ actions: [WebSocketServerSession.Action], context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard !actions.isEmpty else {
            promise?.succeed()
            return
        }
        for (index, action) in actions.enumerated() {
            let last = index == actions.count - 1 ? promise : nil
            switch action {
            case .send(let text):
                guard !closeSent else {
                    last?.succeed()
                    continue
                }
                context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: text)), promise: last)
            case .forward(let line):
                context.fireChannelRead(wrapInboundOut(line))
                last?.succeed()
            case .close(let code, let reason):
                guard !closeSent else {
                    last?.succeed()
                    continue
                }
                closeSent = true
                stopTimers()
                var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
                data.write(webSocketErrorCode: .init(codeNumber: Int(code)))
                data.writeString(reason)
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
                    .whenComplete { _ in
                        last?.succeed()
                        // The peer answers with its close frame; close anyway soon after.
                        channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
                    }
            }
        }
        context.flush()
    }

    private func startKeepAlive(_ context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        keepAlive = context.eventLoop.scheduleRepeatedTask(initialDelay: Self.keepAliveInterval, delay: Self.keepAliveInterval) { _ in
            let context = loopBound.value
            guard !self.closeSent else { return }
            context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: WebSocketServerSession.keepAlive)), promise: nil)
        }
    }
}
