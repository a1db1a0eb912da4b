import EndpointServer
import GQLMuxConfiguration
import GQLMuxVocabulary
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
    /// `adoptedTCP`: this process's TCP listener from before a restart, used when `listen` is
    /// still set (closed otherwise).
    func bindEndpoint(_ configuration: DaemonConfiguration, adoptedFD: CInt?, adoptedTCP: CInt? = nil) async throws -> [any Channel] {
        let settings = configuration.graphqlEndpoint
        var channels: [any Channel] = []
        do {
            if let fd = adoptedFD {
                channels.append(try await endpointBootstrap(configuration, origin: .endpointSocket).withBoundSocket(fd).get())
            } else if let path = settings.socketPath(beside: configuration.socketPath) {
                try Self.prepareSocketPath(path)
                let channel = try await endpointBootstrap(configuration, origin: .endpointSocket)
                    .withBoundSocket(Self.listeningUnixSocket(path)).get()
                channels.append(channel)
                guard chmod(path, mode_t(settings.mode)) == 0 else {
                    throw DaemonError("[graphql_endpoint] cannot set mode \(String(settings.mode, radix: 8)) on \(path): \(String(cString: strerror(errno)))")
                }
            }
            if let listen = settings.listen {
                let bootstrap = endpointBootstrap(configuration, origin: .endpointTCP)
                let channel = try await (adoptedTCP.map { bootstrap.withBoundSocket($0) } ?? bootstrap.bind(host: listen.host, port: listen.port)).get()
                channels.append(channel)
            } else if let adoptedTCP {
                close(adoptedTCP)
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
            // The TCP port is bound again at once after a stop or a crash: the connections the
            // previous process closed itself sit in TIME-WAIT for a minute, and without
            // SO_REUSEADDR they would hold the port (Linux still refuses a second listener).
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(self.acceptBackoff(origin)) }
            }
            .childChannelOption(.writeBufferWaterMark, value: .init(low: limits.clientBufferBytes / 2, high: limits.clientBufferBytes))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    guard self.admitConnection(channel, origin: origin) else {
                        return try sync.addHandler(RefuseConnection(self.refusal(for: origin)))
                    }
                    let reservation = InboundReservation(fanout: self.fanout)
                    let makeSession: (any Channel) -> ClientSession = { channel in self.makeSession(channel, origin: origin) }
                    let writer = EncodedFrameWriter()
                    let http = EndpointHTTPHandler(
                        path: path,
                        maxBodyBytes: limits.maxLineBytes,
                        listener: origin,
                        host: self,
                        reservation: reservation,
                        writer: writer,
                        makeSession: makeSession
                    )
                    let activity = HTTPActivity(http: http)
                    let bound = NIOLoopBound((http, activity, writer, reservation), eventLoop: channel.eventLoop)
                    let upgrader = NIOWebSocketServerUpgrader(
                        maxFrameSize: limits.maxLineBytes,
                        automaticErrorHandling: true,
                        shouldUpgrade: { channel, head in
                            // A refused upgrade goes on as a plain request: the HTTP handler
                            // answers it (403, 401) and logs why.
                            guard Self.target(head.uri) == path, let wire = Self.subprotocol(head), self.mayUpgrade(head, origin: origin) else {
                                return channel.eventLoop.makeSucceededFuture(nil)
                            }
                            var headers = HTTPHeaders()
                            if !head.headers["Sec-WebSocket-Protocol"].isEmpty { headers.add(name: "Sec-WebSocket-Protocol", value: wire.rawValue) }
                            return channel.eventLoop.makeSucceededFuture(headers)
                        },
                        upgradePipelineHandler: { channel, head in
                            let wire = Self.subprotocol(head) ?? .transportWS
                            let http = bound.value.0
                            let token = self.tokenAfterUpgrade(head, origin: origin)
                            let removed = channel.eventLoop.makePromise(of: Void.self)
                            channel.pipeline.syncOperations.removeHandler(http, promise: removed)
                            return removed.futureResult.flatMapThrowing {
                                let (_, activity, writer, reservation) = bound.value
                                channel.pipeline.syncOperations.removeHandler(activity, promise: nil)
                                channel.pipeline.syncOperations.removeHandler(writer, promise: nil)
                                _ = try self.addWebSocketHandlers(channel, wire: wire, token: token, origin: origin, reservation: reservation)
                            }
                        }
                    )
                    try sync.addHandler(writer)
                    try sync.addHandler(activity)
                    try sync.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }),
                        withErrorHandling: true
                    )
                    try sync.addHandler(http)
                }
            }
    }

    /// An endpoint WebSocket client's handlers, its session last: after its upgrade, or carried
    /// over a restart (`acknowledged`: its `connection_init` was answered before). On the
    /// channel's loop.
    func addWebSocketHandlers(
        _ channel: any Channel,
        wire: EndpointSubprotocol,
        token: EndpointToken?,
        origin: ClientSession.Origin,
        reservation: InboundReservation,
        acknowledged: Bool = false
    ) throws -> ClientSession {
        let limits = configuration.limits
        let sync = channel.pipeline.syncOperations
        // Frames out are encoded by EndpointWebSocketHandler, a batch at a time, and written
        // below NIO's frame encoder.
        let writer = EncodedFrameWriter()
        try sync.addHandler(writer, position: .first)
        let meter = WebSocketInboundMeter(reservation: reservation) {
            var reason = ByteBuffer()
            reason.writeInteger(UInt16(1008))
            reason.writeString("gqlmuxd's memory budget (total_buffer_bytes) cannot hold this message")
            writer.write(EndpointWebSocketHandler.frame(.connectionClose, reason), flush: true, promise: nil)
            channel.close(promise: nil)
        }
        try sync.addHandler(WebSocketInboundMeter.RawBytes(meter), position: .first)
        try sync.addHandler(WebSocketInboundMeter.Frames(meter))
        try sync.addHandler(
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0,
                maxAccumulatedFrameCount: 1 << 12,
                maxAccumulatedFrameSize: limits.maxLineBytes
            )
        )
        try sync.addHandler(
            EndpointWebSocketHandler(wire: wire, writer: writer, token: token, acknowledged: acknowledged) {
                self.endpointRefused(
                    .unauthorized,
                    listener: origin,
                    fields: ["GQLMUX_REASON": "connection_init_token"],
                    message: "WebSocket client without a valid token closed (4403)"
                )
            }
        )
        let session = makeSession(channel, origin: origin)
        session.framing = .webSocket(wire)  // results framed once, by the fan-out
        session.inbound = reservation
        try sync.addHandler(session)
        return session
    }

    /// Whether an upgrade passes the browser checks and carries no wrong token (a missing one
    /// may still come in `connection_init`).
    private func mayUpgrade(_ head: HTTPRequestHead, origin: ClientSession.Origin) -> Bool {
        eventLoop.assertInEventLoop()
        guard case .allow = endpointAccess.check(EndpointHTTPHandler.accessHeaders(head)) else { return false }
        guard origin == .endpointTCP, let token = endpointToken else { return true }
        return token.check(authorization: head.headers["authorization"]) != .invalid
    }

    /// The token a WebSocket client must still present in `connection_init`: on the TCP port,
    /// when one is configured and the upgrade did not carry it.
    private func tokenAfterUpgrade(_ head: HTTPRequestHead, origin: ClientSession.Origin) -> EndpointToken? {
        guard origin == .endpointTCP, let token = endpointToken else { return nil }
        return token.check(authorization: head.headers["authorization"]) == .valid ? nil : token
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
