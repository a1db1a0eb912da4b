import GQLMuxConfiguration
import LocalEndpoint
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

#if canImport(Glibc)
import Glibc
#endif

/// The local GraphQL endpoint (`[graphql_endpoint]`): WebSocket (graphql-transport-ws and
/// graphql-ws) and GraphQL over HTTP on a Unix socket and, when asked, a loopback TCP port.
/// Every connection is a ``ClientSession`` like a line-protocol client's, with a translator in
/// front of it, so limits, dedup, the memory budget and the slow-consumer cut are the same.
extension Daemon {
    /// Binds the endpoint's listeners (or adopts the Unix one from systemd).
    func bindEndpoint(_ configuration: DaemonConfiguration, adoptedFD: CInt?) async throws -> [any Channel] {
        let settings = configuration.graphqlEndpoint
        var channels: [any Channel] = []
        do {
            if let fd = adoptedFD {
                channels.append(try await endpointBootstrap(configuration, origin: .endpointSocket).withBoundSocket(fd).get())
            } else if let path = settings.socketPath(beside: configuration.socketPath) {
                try Self.prepareSocketPath(path)
                let channel = try await endpointBootstrap(configuration, origin: .endpointSocket)
                    .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true).get()
                channels.append(channel)
                guard chmod(path, mode_t(settings.mode)) == 0 else {
                    throw DaemonError("[graphql_endpoint] cannot set mode \(String(settings.mode, radix: 8)) on \(path): \(String(cString: strerror(errno)))")
                }
            }
            if let listen = settings.listen {
                let channel = try await endpointBootstrap(configuration, origin: .endpointTCP).bind(host: listen.host, port: listen.port).get()
                channels.append(channel)
            }
        } catch {
            for channel in channels { try? await channel.close() }
            throw error is DaemonError ? error : DaemonError("[graphql_endpoint]: cannot listen: \(error)")
        }
        return channels
    }

    private func endpointBootstrap(_ configuration: DaemonConfiguration, origin: ClientSession.Origin) -> ServerBootstrap {
        let limits = configuration.limits
        let path = configuration.graphqlEndpoint.path
        return ServerBootstrap(group: eventLoop)
            .acceptingLater()
            .serverChannelOption(.backlog, value: 1024)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: limits.clientBufferBytes / 2, high: limits.clientBufferBytes))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let makeSession: @Sendable (any Channel) -> ClientSession = { channel in self.makeSession(channel, origin: origin) }
                    let http = EndpointHTTPHandler(
                        path: path,
                        maxBodyBytes: limits.maxLineBytes,
                        documentLimits: limits.document,
                        makeSession: makeSession
                    )
                    let boundHTTP = NIOLoopBound(http, eventLoop: channel.eventLoop)
                    let upgrader = NIOWebSocketServerUpgrader(
                        maxFrameSize: limits.maxLineBytes,
                        automaticErrorHandling: true,
                        shouldUpgrade: { channel, head in
                            guard Self.target(head.uri) == path, let wire = Self.subprotocol(head) else {
                                return channel.eventLoop.makeSucceededFuture(nil)
                            }
                            var headers = HTTPHeaders()
                            if !head.headers["Sec-WebSocket-Protocol"].isEmpty { headers.add(name: "Sec-WebSocket-Protocol", value: wire.rawValue) }
                            return channel.eventLoop.makeSucceededFuture(headers)
                        },
                        upgradePipelineHandler: { channel, head in
                            let wire = Self.subprotocol(head) ?? .transportWS
                            let removed = channel.eventLoop.makePromise(of: Void.self)
                            channel.pipeline.syncOperations.removeHandler(boundHTTP.value, promise: removed)
                            return removed.futureResult.flatMapThrowing {
                                let sync = channel.pipeline.syncOperations
                                // Frames out are encoded by EndpointWebSocketHandler, a batch at a
                                // time, and written below NIO's frame encoder.
                                let writer = EncodedFrameWriter()
                                try sync.addHandler(writer, position: .first)
                                try sync.addHandler(
                                    NIOWebSocketFrameAggregator(
                                        minNonFinalFragmentSize: 0,
                                        maxAccumulatedFrameCount: 1 << 12,
                                        maxAccumulatedFrameSize: limits.maxLineBytes
                                    )
                                )
                                try sync.addHandler(EndpointWebSocketHandler(wire: wire, writer: writer))
                                try sync.addHandler(makeSession(channel))
                            }
                        }
                    )
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }),
                        withErrorHandling: true
                    )
                    try sync.addHandler(http)
                }
            }
    }

    private static func target(_ uri: String) -> String {
        String(uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// The subprotocol for an upgrade request: the client's first supported offer;
    /// graphql-transport-ws when it offers none; nil when it offers only others.
    private static func subprotocol(_ head: HTTPRequestHead) -> EndpointSubprotocol? {
        let offered = head.headers["Sec-WebSocket-Protocol"].flatMap { $0.split(separator: ",").map(String.init) }
        return offered.isEmpty ? .transportWS : EndpointSubprotocol.select(offered: offered)
    }
}
