import HTTPStreaming
import NIOCore
import NIOPosix

/// Why a connection through the proxy did not open, naming the proxy and the target once each.
struct ProxyTunnelError: Error, CustomStringConvertible {
    var proxy: HTTPProxy
    var target: String
    var reason: String

    var description: String { "\(target) through proxy \(proxy): \(reason)" }
}

/// Opens upstream connections: directly, or through an HTTP proxy's `CONNECT` tunnel. Either
/// way the returned channel is one whose bytes reach `host:port` (TLS, HTTP and WebSocket
/// handlers run over the tunnel as over a socket), and the future succeeds only once the tunnel
/// is open, so every caller sees a refused tunnel as a failed connect.
enum UpstreamDialer {
    /// - Parameters:
    ///   - bootstrap: timeouts and socket options set; its initializer is `initializer`.
    ///   - initializer: the handlers of the connection (TLS, HTTP, …), added behind the tunnel's.
    static func connect(
        _ bootstrap: ClientBootstrap,
        on eventLoop: any EventLoop,
        host: String,
        port: Int,
        proxy: HTTPProxy?,
        initializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) -> EventLoopFuture<any Channel> {
        guard let proxy else {
            return bootstrap.channelInitializer(initializer).connect(host: host, port: port)
        }
        let target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let established = eventLoop.makePromise(of: Void.self)
        return bootstrap.channelInitializer { channel in
            do {
                try channel.pipeline.syncOperations.addHandler(ProxyTunnelHandler(proxy: proxy, target: target, established: established))
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
            return initializer(channel)
        }
        .connect(host: proxy.host, port: proxy.port)
        .flatMapErrorThrowing { error in
            // The proxy's address is named once, by the error's own description.
            let cause = (error as? NIOConnectionError)?.connectionErrors.first.map { describe($0.error) } ?? describe(error)
            let failure = ProxyTunnelError(proxy: proxy, target: target, reason: "the proxy is unreachable: \(cause)")
            established.fail(failure)
            throw failure
        }
        .flatMap { channel in established.futureResult.map { channel } }
    }
}

/// The head of a tunnelled connection's pipeline: sends `CONNECT target` when the socket to the
/// proxy opens, holds back `channelActive` and every write of the handlers behind it until the
/// proxy answers 2xx, then steps aside. Any other answer (407, 403, 502) fails ``established``
/// with the proxy's status line and closes the connection; nothing ever reaches the server.
final class ProxyTunnelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let established: EventLoopPromise<Void>
    private let proxy: HTTPProxy
    private let target: String
    private var answer = ProxyAnswer()
    private var open = false
    private var held: [(NIOAny, EventLoopPromise<Void>?)] = []
    private var flushHeld = false

    init(proxy: HTTPProxy, target: String, established: EventLoopPromise<Void>) {
        self.proxy = proxy
        self.target = target
        self.established = established
    }

    func channelActive(context: ChannelHandlerContext) {
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization = proxy.authorization { request += "Proxy-Authorization: \(authorization)\r\n" }
        request += "\r\n"
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !open else {
            context.fireChannelRead(data)
            return
        }
        switch answer.feed(unwrapInboundIn(data)) {
        case .incomplete:
            return
        case .refused(let reason):
            fail(context: context, reason)
        case .open(let rest):
            open = true
            context.fireChannelActive()
            for (data, promise) in held { context.write(data, promise: promise) }
            held = []
            if flushHeld { context.flush() }
            if rest.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(rest)) }
            established.succeed(())
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        guard open else {
            // Behind this handler nothing was ever active; the failure is the connect's.
            fail(context: context, "the proxy closed the connection before answering CONNECT")
            return
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard open else {
            fail(context: context, describe(error))
            return
        }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard open else {
            held.append((data, promise))
            return
        }
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        guard open else {
            flushHeld = true
            return
        }
        context.flush()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        guard !open else { return }
        let error = ProxyTunnelError(proxy: proxy, target: target, reason: "the connection was closed")
        for (_, promise) in held { promise?.fail(error) }
        held = []
        established.fail(error)
    }

    private func fail(context: ChannelHandlerContext, _ reason: String) {
        let error = ProxyTunnelError(proxy: proxy, target: target, reason: reason)
        established.fail(error)
        for (_, promise) in held { promise?.fail(error) }
        held = []
        context.close(promise: nil)
    }
}
