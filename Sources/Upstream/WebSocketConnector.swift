import GQLMuxVocabulary
import GraphQLTransportWS
import HTTPFields
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// Opens one WebSocket connection: TCP, optional TLS, HTTP upgrade offering the configured
/// subprotocols (`[upstream] protocol`), modern first. The returned future succeeds once frames
/// can flow, with the subprotocol the server selected.
package enum WebSocketConnector {
    struct UpgradeFailure: Error, CustomStringConvertible {
        var description: String
        /// The HTTP status of a refused upgrade.
        var status: Int?
    }

    /// A connection frames can flow on, and the subprotocol the server selected.
    package struct Opened {
        package var channel: any Channel
        package var wire: WireProtocol

        package init(channel: any Channel, wire: WireProtocol) {
            self.channel = channel
            self.wire = wire
        }
    }

    /// The `Sec-WebSocket-Protocol` request value: the offered protocols in order of preference.
    static func offer(_ protocols: [WireProtocol]) -> String {
        protocols.map(\.subprotocol).joined(separator: ", ")
    }

    /// The protocol the server selected, if it is one we offered.
    static func selected(_ header: String?, offered: [WireProtocol]) -> WireProtocol? {
        guard let header = header?.trimming(" \t") else { return nil }
        return offered.first { $0.subprotocol == header }
    }

    /// - Parameters:
    ///   - frameHandler: installed after a successful upgrade; receives whole messages.
    static func connect(
        configuration: UpstreamConfiguration,
        sslContext: NIOSSLContext?,
        on eventLoop: any EventLoop,
        frameHandler: @escaping @Sendable () -> any ChannelHandler
    ) -> EventLoopFuture<Opened> {
        let url = configuration.url
        let offered = configuration.protocols
        let upgraded = eventLoop.makePromise(of: Opened.self)
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(.nanoseconds(configuration.transport.connectTimeout.nanoseconds))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
        UpstreamDialer.connect(bootstrap, on: eventLoop, host: url.host, port: url.port, proxy: configuration.websocketProxy) { channel in
            do {
                let sync = channel.pipeline.syncOperations
                if url.secure, let sslContext {
                    let sniHost = isIPAddress(url.host) ? nil : url.host
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: sniHost))
                }
                let requestHandler = UpgradeRequestHandler(configuration: configuration, promise: upgraded)
                let upgrader = UpstreamWebSocketUpgrader { channel, response in
                    let header = response.headers["Sec-WebSocket-Protocol"].first
                    guard let wire = selected(header, offered: offered) else {
                        let failure = UpgradeFailure(
                            description: "server did not select a subprotocol we offered (\(offer(offered)))"
                                + (header.map { "; it chose '\($0)'" } ?? "")
                        )
                        upgraded.fail(failure)
                        return channel.close()
                    }
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(frameHandler())
                        upgraded.succeed(Opened(channel: channel, wire: wire))
                    }
                }
                try sync.addHTTPClientHandlers(
                    leftOverBytesStrategy: .forwardBytes,
                    withClientUpgrade: (
                        upgraders: [upgrader],
                        completionHandler: { context in
                            context.channel.pipeline.removeHandler(requestHandler, promise: nil)
                        }
                    )
                )
                try sync.addHandler(requestHandler)
                return channel.eventLoop.makeSucceededVoidFuture()
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
        }
        .whenComplete { result in
            switch result {
            case .success(let channel):
                channel.closeFuture.whenComplete { _ in
                    upgraded.fail(UpgradeFailure(description: "connection closed during the WebSocket upgrade"))
                }
            case .failure(let error):
                upgraded.fail(error)
            }
        }
        return upgraded.futureResult
    }

    static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}

/// Sends the upgrade request and turns a refused upgrade into a clear error.
private final class UpgradeRequestHandler: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let configuration: UpstreamConfiguration
    private let promise: EventLoopPromise<WebSocketConnector.Opened>

    init(configuration: UpstreamConfiguration, promise: EventLoopPromise<WebSocketConnector.Opened>) {
        self.configuration = configuration
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: configuration.url.hostHeader)
        headers.add(name: "Sec-WebSocket-Protocol", value: WebSocketConnector.offer(configuration.protocols))
        // A GET carries no body, so no body header: some servers (Python's `websockets`) refuse
        // an upgrade that has one, even `Content-Length: 0`. NIO's encoder adds none to a GET.
        for (name, value) in configuration.upgradeHeaders where !Self.isBodyHeader(name) {
            headers.add(name: name, value: value)
        }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: configuration.url.target, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    static func isBodyHeader(_ name: String) -> Bool {
        name.lowercased() == "content-length" || name.lowercased() == "transfer-encoding"
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            promise.fail(
                WebSocketConnector.UpgradeFailure(
                    description: "WebSocket upgrade refused: HTTP \(head.status.code) \(head.status.reasonPhrase)",
                    status: Int(head.status.code)
                )
            )
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
}
