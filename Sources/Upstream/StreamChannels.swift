import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// Opens the channel one stream request travels on: over `https` whose server chose `h2` in
/// ALPN, a new HTTP/2 stream of the upstream's one shared connection; otherwise (`http`, or a
/// server that chose HTTP/1.1) a TCP connection of its own. Either way the channel carries
/// `HTTPClientRequestPart` out and `HTTPClientResponsePart` in, so the reader is the same.
///
/// Confined to the transport's event loop. `@unchecked Sendable` — safe because of that: `open`
/// and `reset` precondition the loop, and the futures it chains complete on it.
final class StreamChannels: @unchecked Sendable {
    /// What the server has said about HTTP/2 since the last reset.
    private enum Mode {
        case unknown, http1, http2
    }

    private struct NotHTTP2: Error {}

    private let eventLoop: any EventLoop
    private var mode = Mode.unknown
    /// The shared HTTP/2 connection, being made or made.
    private var shared: EventLoopFuture<NIOHTTP2Handler.StreamMultiplexer>?
    private var sharedChannel: (any Channel)?

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Whether the server chose HTTP/1.1 (each request then needs a connection of its own).
    var isHTTP1: Bool { mode == .http1 }

    /// Whether streams now share one HTTP/2 connection.
    var isHTTP2: Bool { mode == .http2 && sharedChannel != nil }

    /// Forgets what the server said and closes the shared connection (a reload, or a stream on
    /// it that went silent: the connection itself may be dead). Its streams end and are
    /// requested again.
    func reset() {
        eventLoop.preconditionInEventLoop()
        mode = .unknown
        shared = nil
        sharedChannel?.close(promise: nil)
        sharedChannel = nil
    }

    /// A channel for one request, with `handler` reading its response.
    func open(
        url: HTTPURL,
        proxy: HTTPProxy?,
        sslContext: NIOSSLContext?,
        connectTimeout: TimeAmount,
        handler: @escaping @Sendable () -> any ChannelHandler
    ) -> EventLoopFuture<any Channel> {
        eventLoop.preconditionInEventLoop()
        guard url.secure, let sslContext, mode != .http1 else {
            return Self.connectHTTP1(url: url, proxy: proxy, sslContext: sslContext, connectTimeout: connectTimeout, on: eventLoop, handler: handler)
        }
        let multiplexer = shared ?? connectShared(url: url, proxy: proxy, sslContext: sslContext, connectTimeout: connectTimeout)
        return multiplexer.flatMap { multiplexer in
            multiplexer.createStreamChannel { stream in
                stream.eventLoop.makeCompletedFuture {
                    let sync = stream.pipeline.syncOperations
                    try sync.addHandler(HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: .https))
                    try sync.addHandler(handler())
                }
            }
        }.flatMapError { error in
            guard error is NotHTTP2 else { return self.eventLoop.makeFailedFuture(error) }
            // The server chose HTTP/1.1: this and every later stream takes a connection.
            return Self.connectHTTP1(url: url, proxy: proxy, sslContext: sslContext, connectTimeout: connectTimeout, on: self.eventLoop, handler: handler)
        }
    }

    private func connectShared(url: HTTPURL, proxy: HTTPProxy?, sslContext: NIOSSLContext, connectTimeout: TimeAmount) -> EventLoopFuture<
        NIOHTTP2Handler.StreamMultiplexer
    > {
        let negotiated = eventLoop.makePromise(of: NIOHTTP2Handler.StreamMultiplexer.self)
        let future = negotiated.futureResult
        shared = future
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
        UpstreamDialer.connect(bootstrap, on: eventLoop, host: url.host, port: url.port, proxy: proxy) { channel in
            channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(Self.tls(url, sslContext))
                try sync.addHandler(
                    ApplicationProtocolNegotiationHandler { result, channel in
                        guard case .negotiated("h2") = result else {
                            negotiated.fail(NotHTTP2())
                            return channel.close()
                        }
                        do {
                            let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                                mode: .client,
                                connectionConfiguration: .init(),
                                streamConfiguration: .init()
                            ) { inbound in inbound.close() }  // servers do not open streams to us
                            negotiated.succeed(multiplexer)
                            return channel.eventLoop.makeSucceededVoidFuture()
                        } catch {
                            negotiated.fail(error)
                            return channel.close()
                        }
                    }
                )
            }
        }
        .whenComplete { result in
            switch result {
            case .success(let channel):
                guard self.shared === future else {  // reset meanwhile
                    channel.close(promise: nil)
                    return
                }
                self.sharedChannel = channel
                channel.closeFuture.whenComplete { _ in
                    negotiated.fail(ChannelError.ioOnClosedChannel)  // closed before ALPN finished
                    if self.shared === future {
                        self.shared = nil
                        self.sharedChannel = nil
                    }
                }
            case .failure(let error):
                negotiated.fail(error)
                if self.shared === future { self.shared = nil }
            }
        }
        future.whenComplete { result in
            switch result {
            case .success: self.mode = .http2
            case .failure(let error): if error is NotHTTP2 { self.mode = .http1 }
            }
        }
        return future
    }

    /// One HTTP/1.1 connection (TLS for https), its response read by `handler`: for a stream,
    /// and for an `http_url` query or mutation (``HTTPOperations``).
    static func connectHTTP1(
        url: HTTPURL,
        proxy: HTTPProxy?,
        sslContext: NIOSSLContext?,
        connectTimeout: TimeAmount,
        on eventLoop: any EventLoop,
        handler: @escaping @Sendable () -> any ChannelHandler
    ) -> EventLoopFuture<any Channel> {
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
        return UpstreamDialer.connect(bootstrap, on: eventLoop, host: url.host, port: url.port, proxy: proxy) { channel in
            channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                if url.secure, let sslContext { try sync.addHandler(tls(url, sslContext)) }
                try sync.addHTTPClientHandlers()
                try sync.addHandler(handler())
            }
        }
    }

    /// TLS for `url`, with SNI unless the host is an IP address.
    private static func tls(_ url: HTTPURL, _ sslContext: NIOSSLContext) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: sslContext, serverHostname: WebSocketConnector.isIPAddress(url.host) ? nil : url.host)
    }

    /// Writes one GraphQL POST (`payload` is the request object) on an HTTP/1.1 or HTTP/2-stream
    /// channel: the configured headers after ours, and `Connection: close` when asked.
    static func writePOST(
        _ payload: ByteBuffer,
        to url: HTTPURL,
        accept: String,
        headers extra: [(name: String, value: String)],
        close: Bool,
        on channel: any Channel
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: url.hostHeader)
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Accept", value: accept)
        headers.add(name: "Content-Length", value: "\(payload.readableBytes)")
        if close { headers.add(name: "Connection", value: "close") }
        for (name, value) in extra { headers.add(name: name, value: value) }
        let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: url.target, headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(payload)), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }
}
