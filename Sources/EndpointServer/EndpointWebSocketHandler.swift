import GQLMuxVocabulary
import Handover
import LocalEndpoint
import NIOCore
import NIOWebSocket
import RequestValidation

/// One GraphQL WebSocket client of the endpoint, in front of its session (``EndpointSession``): frames in
/// become requests for the session (a `subscribe`'s document parsed here, once); the session's
/// messages become frames (``WebSocketServerSession`` decides both). Answers WebSocket pings, times the
/// `connection_init` wait, and sends legacy `ka` keep-alives. Its close follows the same
/// close handshake as the upstream's (``CloseHandshake``): after our close frame the socket is
/// closed when the client's answers it, or when the handshake's deadline passes without one.
///
/// It encodes the frames it sends itself and writes them through an ``EncodedFrameWriter`` at
/// the head of the pipeline, below NIO's frame encoder: all the frames of one write of the
/// session go out as one buffer, as the line protocol's batch does, instead of two writes per
/// frame.
///
/// Not `Sendable`: NIO calls it on its channel's loop, and its timers reach it through a
/// `NIOLoopBound`, checked on that loop.
package final class EndpointWebSocketHandler: ChannelDuplexHandler {
    package typealias InboundIn = WebSocketFrame
    package typealias InboundOut = ClientRequest
    package typealias OutboundIn = WebSocketOutput
    package typealias OutboundOut = WebSocketFrame

    /// graphql-ws's default wait for `connection_init`.
    package static let initTimeout = TimeAmount.seconds(3)
    package static let keepAliveInterval = TimeAmount.seconds(10)

    private var session: WebSocketServerSession
    /// A close frame was sent (ours, or the echo of the client's): nothing more is sent.
    private var closeSent = false
    /// How long a client has to answer our close frame.
    package static let closeTimeout = Duration.seconds(1)
    private var handshake = CloseHandshake(timeout: closeTimeout)
    private var closeTimer: Scheduled<Void>?
    private var timers: [Scheduled<Void>] = []
    private var keepAlive: RepeatedTask?

    private let writer: EncodedFrameWriter
    /// The document limits in force (a reload may change them).
    private let documentLimits: () -> SubscribeRequest.Limits
    /// Told once when the client is closed for a missing or wrong token.
    private let onDeniedToken: () -> Void
    /// The upstream this connection's path names (nil: `default`).
    let upstream: String?
    /// Told the client's `connection_init` payload once it is acknowledged.
    private let onInit: (ByteBuffer?) -> Void

    /// - Parameter token: the token the client must present in `connection_init` (a TCP client
    ///   whose upgrade carried no valid `Authorization`); nil when it need not.
    /// - Parameter acknowledged: the client was acknowledged before a restart: no
    ///   `connection_init` wait, and legacy keep-alives from the start.
    /// - Parameter onInit: told the client's `connection_init` payload once it is acknowledged.
    package init(
        wire: WireProtocol,
        writer: EncodedFrameWriter,
        token: EndpointToken? = nil,
        acknowledged: Bool = false,
        upstream: String? = nil,
        documentLimits: @escaping () -> SubscribeRequest.Limits = { SubscribeRequest.Limits() },
        onInit: @escaping (ByteBuffer?) -> Void = { _ in },
        onDeniedToken: @escaping () -> Void = {}
    ) {
        session = WebSocketServerSession(wire: wire, token: token, acknowledged: acknowledged)
        self.writer = writer
        self.documentLimits = documentLimits
        self.onInit = onInit
        self.onDeniedToken = onDeniedToken
        self.upstream = upstream
    }

    /// Whether this connection's periodic and pending duties (the `connection_init` wait, legacy
    /// keep-alives) were started: once, when the handler is in the pipeline of an active
    /// channel, whichever comes last. After an upgrade the channel is active when the handler
    /// is added; a connection carried over a restart is added before its channel is
    /// registered, and becomes active after: both start the same duties.
    private var dutiesStarted = false

    package func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startDuties(context) }
    }

    package func channelActive(context: ChannelHandlerContext) {
        startDuties(context)
        context.fireChannelActive()
    }

    private func startDuties(_ context: ChannelHandlerContext) {
        guard !dutiesStarted, !closeSent else { return }
        dutiesStarted = true
        if session.acknowledged {
            // Carried over a restart: a `ka` at once, as a fresh connection gets with its
            // `connection_ack`, then every 10 s. Without it a client restarted more often than
            // every 10 s would hear none at all and give up (30 s for SubscriptionClient).
            if session.wire == .legacyWS {
                writer.write(Self.frame(.text, WebSocketServerSession.keepAlive), flush: true, promise: nil)
                startKeepAlive(context)
            }
            return
        }
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        timers.append(
            context.eventLoop.scheduleTask(in: Self.initTimeout) {
                let (context, handler) = bound.value
                handler.perform(handler.session.initTimedOut(), context: context, promise: nil)
            }
        )
    }

    package func handlerRemoved(context: ChannelHandlerContext) { stopTimers() }

    package func channelInactive(context: ChannelHandlerContext) {
        stopTimers()
        handshake.socketClosed(generation: 0)
        closeTimer?.cancel()
        closeTimer = nil
        context.fireChannelInactive()
    }

    private func stopTimers() {
        for timer in timers { timer.cancel() }
        timers = []
        keepAlive?.cancel()
        keepAlive = nil
    }

    /// The loop's clock (an `EmbeddedEventLoop`'s in tests), as the handshake counts time.
    private static func now(_ loop: any EventLoop) -> Instant { Instant(nanoseconds: Int64(loop.now.uptimeNanoseconds)) }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            let acknowledged = session.acknowledged
            let denied = session.deniedToken
            perform(session.received(frame.unmaskedData), context: context, promise: nil)
            if !denied, session.deniedToken { onDeniedToken() }
            if !acknowledged, session.acknowledged {
                onInit(session.initPayload)
                session.forgetInitPayload()  // the session keeps what it presents, bounded
                if session.wire == .legacyWS, keepAlive == nil { startKeepAlive(context) }
            }
        case .binary:
            perform(session.receivedBinary(), context: context, promise: nil)
        case .ping:
            writer.write(Self.frame(.pong, frame.unmaskedData), flush: true, promise: nil)
        case .connectionClose:
            switch handshake.peerClosed(generation: 0) {
            case .completesOurs:
                break  // the client answered our close frame: the handshake is done
            case .startsTheirs:
                guard !closeSent else { break }
                closeSent = true
                stopTimers()
                var data = frame.unmaskedData
                let code = data.readWebSocketErrorCode() ?? .normalClosure
                var echo = context.channel.allocator.buffer(capacity: 2)
                echo.write(webSocketErrorCode: code)
                writer.write(Self.frame(.connectionClose, echo), flush: true, promise: nil)
            }
            context.close(promise: nil)
        default:
            break
        }
    }

    /// The session's results, already framed, as they are; its other lines, translated.
    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .frames(let frames):
            guard !closeSent else {
                promise?.succeed()
                return
            }
            writer.write(frames, flush: false, promise: promise)
        case .message(let message):
            perform(session.deliver(message), context: context, promise: promise, flush: false)
        }
    }

    /// - Parameter flush: whether to flush what is sent (the session's own writes are flushed
    ///   when it flushes).
    private func perform(
        _ actions: [WebSocketServerSession.Action],
        context: ChannelHandlerContext,
        promise: EventLoopPromise<Void>?,
        flush: Bool = true
    ) {
        var out: ByteBuffer?
        var closing: ByteBuffer?
        for action in actions {
            switch action {
            case .send(let text):
                guard !closeSent else { continue }
                if out == nil { out = context.channel.allocator.buffer(capacity: text.readableBytes + 10) }
                Self.appendFrame(.text, text, to: &out!)
            case .subscribe(let id, let payload):
                context.fireChannelRead(wrapInboundOut(.subscribe(id: id, payload: payload, limits: documentLimits(), upstream: upstream)))
            case .complete(let id):
                context.fireChannelRead(wrapInboundOut(.complete(id: id)))
            case .close(let code, let reason):
                guard !closeSent else { continue }
                closeSent = true
                stopTimers()
                var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
                data.writeInteger(code.code)
                data.writeString(reason)
                closing = Self.frame(.connectionClose, data)
            }
        }
        if let out { writer.write(out, flush: flush && closing == nil, promise: closing == nil ? promise : nil) }
        if let closing {
            writer.write(closing, flush: true, promise: nil)
            promise?.succeed()
            closeFrameSent(context)
        } else if out == nil {
            promise?.succeed()
        }
    }

    package func flush(context: ChannelHandlerContext) { writer.flush() }

    /// Our close frame is on its way: the connection is `closing` until the client's close
    /// frame arrives (``channelRead``) or the handshake's deadline passes.
    private func closeFrameSent(_ context: ChannelHandlerContext) {
        handshake.closeSent(generation: 0, now: Self.now(context.eventLoop))
        guard let deadline = handshake.nextDeadline else { return }
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        let wait = max(deadline - Self.now(context.eventLoop), .zero)
        closeTimer = context.eventLoop.scheduleTask(in: .nanoseconds(wait.nanoseconds)) {
            let (context, handler) = bound.value
            handler.closeTimer = nil
            // The client did not answer in time: close the socket without its close frame.
            if !handler.handshake.expired(now: Self.now(context.eventLoop)).isEmpty { context.close(promise: nil) }
        }
    }

    /// One unmasked server frame (RFC 6455 5.2), header and payload in one buffer.
    package static func frame(_ opcode: WebSocketOpcode, _ payload: ByteBuffer) -> ByteBuffer {
        var out = ByteBuffer()
        out.reserveCapacity(payload.readableBytes + 10)
        appendFrame(opcode, payload, to: &out)
        return out
    }

    package static func appendFrame(_ opcode: WebSocketOpcode, _ payload: ByteBuffer, to out: inout ByteBuffer) {
        NextFraming.writeWebSocketHeader(opcode: UInt8(webSocketOpcode: opcode), length: payload.readableBytes, to: &out)
        var payload = payload
        out.writeBuffer(&payload)
    }

    private func startKeepAlive(_ context: ChannelHandlerContext) {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        keepAlive = context.eventLoop.scheduleRepeatedTask(initialDelay: Self.keepAliveInterval, delay: Self.keepAliveInterval) { _ in
            let handler = bound.value
            guard !handler.closeSent else { return }
            handler.writer.write(Self.frame(.text, WebSocketServerSession.keepAlive), flush: true, promise: nil)
        }
    }
}

/// Sits first in an endpoint client's pipeline: bytes written through it, already encoded for
/// the wire (WebSocket frames, an HTTP stream's whole chunks), go straight to the socket,
/// below NIO's codecs.
package final class EncodedFrameWriter: ChannelOutboundHandler, RemovableChannelHandler {
    package typealias OutboundIn = ByteBuffer

    /// Set while in the pipeline; used on the channel's loop only (its handler's methods).
    private var context: ChannelHandlerContext?

    package init() {}

    package func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    package func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    package func write(_ bytes: ByteBuffer, flush: Bool, promise: EventLoopPromise<Void>?) {
        guard let context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(NIOAny(bytes), promise: promise)
        if flush { context.flush() }
    }

    package func flush() { context?.flush() }
}

/// Carried over a restart while open (no close frame sent), with its subprotocol and whether
/// its `connection_init` was acknowledged.
extension EndpointWebSocketHandler: CarriedConnection {
    package var carriage: HandoverState.Carriage? {
        guard !closeSent else { return nil }
        return .init(session.wire == .legacyWS ? .legacyWS : .transportWS, acknowledged: session.acknowledged, upstream: upstream)
    }

    package func handOver() {
        closeSent = true
        stopTimers()
    }
}
