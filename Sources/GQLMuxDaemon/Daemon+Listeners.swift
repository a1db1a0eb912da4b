import GQLMuxConfiguration
import GQLMuxVocabulary
import LocalEndpoint
import LocalProtocol
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Each listener's own door: a connection limit of its own (so a flood of one never refuses
/// another's clients, and together they leave descriptors for the upstream: ``DescriptorPlan``),
/// a refusal its clients understand, and an accept that waits instead of spinning when the
/// process is out of descriptors.
extension Daemon {
    /// The soft open-file limit in force (`gqlmuxd` raises it to the hard limit at start).
    static func openFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(clamping: min(limit.rlim_cur, rlim_t(Int32.max)))
    }

    /// The most connections `origin` may hold at once, as planned.
    func connectionLimit(_ origin: ClientOrigin) -> Int {
        switch origin {
        case .lineSocket: listening.descriptorPlan.lineSocket
        case .endpointSocket: listening.descriptorPlan.endpointSocket
        case .endpointTCP: listening.descriptorPlan.endpointTCP
        }
    }

    /// Counts a new connection of `origin` in, if its listener has room; it is counted out
    /// when it closes. On the loop (a child channel initializer).
    func admitConnection(_ channel: any Channel, origin: ClientOrigin) -> Bool {
        eventLoop.assertInEventLoop()
        let open = listening.connectionCounts[origin, default: 0]
        guard open < connectionLimit(origin) else {
            metrics.refused(listener: origin.rawValue, reason: "listener_full")
            if let unlogged = listening.listenerFullLog.admit(origin, now: .loopNow) {
                let key = origin == .lineSocket ? "max_clients" : origin == .endpointSocket ? "socket_max_connections" : "listen_max_connections"
                events.emit(
                    .limitExceeded,
                    ["GQLMUX_LIMIT": key, "GQLMUX_LISTENER": listenerName(origin), "GQLMUX_UNLOGGED": "\(unlogged)"],
                    message:
                        "\(key) (\(connectionLimit(origin))) reached on \(listenerName(origin)); new connections refused (\(unlogged) more since the last entry; logged at most once a second)"
                )
            }
            return false
        }
        listening.connectionCounts[origin] = open + 1
        channel.closeFuture.whenComplete { _ in
            self.eventLoop.assertInEventLoop()
            self.listening.connectionCounts[origin, default: 1] -= 1
        }
        return true
    }

    /// What a refused connection is told before it is closed: the line protocol's error, or an
    /// HTTP 503 (the endpoint's clients speak HTTP first, WebSocket clients included).
    func refusal(for origin: ClientOrigin) -> ByteBuffer {
        switch origin {
        case .lineSocket:
            return LocalEncode.line(.error(id: nil, .local(code: .limitExceeded, message: "max_clients (\(connectionLimit(origin))) reached")))
        case .endpointSocket, .endpointTCP:
            return HTTPErrorResponse.raw(
                status: 503,
                reason: "Service Unavailable",
                message: "too many connections to this listener; try again later",
                headers: [("Retry-After", "1")]
            )
        }
    }

    /// The listener's name in the journal: its path or address.
    func listenerName(_ origin: ClientOrigin) -> String {
        switch origin {
        case .lineSocket: configuration.socketPath
        case .endpointSocket: listening.endpointAddresses.first { $0.hasPrefix("/") } ?? "graphql_endpoint socket"
        case .endpointTCP: listening.endpointAddresses.first { !$0.hasPrefix("/") } ?? "graphql_endpoint listen"
        }
    }

    /// Who may use each listener, one `listening` event each (at start).
    func logListeners(endpointSocket: Bool, endpointTCP: Bool) {
        let security = configuration.security
        let endpoint = configuration.graphqlEndpoint
        let restricted = !security.allowedUIDs.isEmpty || !security.allowedGIDs.isEmpty
        let peers =
            restricted
            ? "root, gqlmuxd's own user, allowed_uids \(security.allowedUIDs) and allowed_gids \(security.allowedGIDs) (checked with SO_PEERCRED and SO_PEERGROUPS: primary and supplementary groups)"
            : "every user who can open the socket file (no allowed_uids/allowed_gids)"
        var listeners: [(ClientOrigin, String, String)] = [
            (.lineSocket, "line protocol, Unix socket mode \(String(configuration.socketMode, radix: 8))", peers)
        ]
        if endpointSocket {
            listeners.append(
                (.endpointSocket, "GraphQL endpoint, Unix socket mode \(String(endpoint.mode, radix: 8))", peers + "; browser checks on Host and Origin")
            )
        }
        if endpointTCP {
            let who =
                endpoint.token != nil
                ? "every local user holding the token of \(endpoint.tokenFile ?? "token_file")"
                : "every local user, without a token" + (endpoint.allowAllLocalUsers ? " (allow_all_local_users)" : "")
            listeners.append((.endpointTCP, "GraphQL endpoint, loopback TCP", who + "; browser checks on Host and Origin"))
        }
        for (origin, kind, access) in listeners {
            events.emit(
                .listening,
                [
                    "GQLMUX_LISTENER": listenerName(origin), "GQLMUX_KIND": kind, "GQLMUX_ACCESS": access,
                    "GQLMUX_MAX_CONNECTIONS": "\(connectionLimit(origin))",
                ],
                message: "listening on \(listenerName(origin)) (\(kind)): \(access); at most \(connectionLimit(origin)) connections"
            )
        }
        if listening.descriptorPlan.lowered {
            events.emit(
                .limitExceeded,
                ["GQLMUX_LIMIT": "RLIMIT_NOFILE", "GQLMUX_NOFILE": "\(listening.descriptorPlan.openFiles)"],
                message:
                    "the open-file limit (\(listening.descriptorPlan.openFiles)) cannot hold every listener's connection limit and \(listening.descriptorPlan.reserve) descriptors for the upstream; lowered in proportion to \(listening.descriptorPlan.lineSocket) (line socket), \(listening.descriptorPlan.endpointSocket) (endpoint socket), \(listening.descriptorPlan.endpointTCP) (endpoint TCP); raise LimitNOFILE="
            )
        }
    }

    /// The accept back-off: when accept fails (EMFILE, ENFILE, ENOBUFS) the listener waits
    /// 100 ms before accepting again, instead of spinning on a socket that stays readable.
    func acceptBackoff(_ origin: ClientOrigin) -> AcceptBackoffHandler {
        AcceptBackoffHandler(shouldForwardIOErrorCaught: false) { [weak self] error in
            self?.acceptFailed(origin, error)
            return .milliseconds(100)
        }
    }

    private func acceptFailed(_ origin: ClientOrigin, _ error: IOError) {
        guard let unlogged = listening.acceptFailureLog.admit(origin, now: .loopNow) else { return }
        events.emit(
            .acceptFailed,
            [
                "GQLMUX_LISTENER": listenerName(origin), "GQLMUX_ERROR": "\(error)", "GQLMUX_NOFILE": "\(listening.descriptorPlan.openFiles)",
                "GQLMUX_UNLOGGED": "\(unlogged)",
            ],
            message:
                "accept failed on \(listenerName(origin)): \(error); retrying in 100 ms (\(unlogged) more since the last entry; logged at most once a second)"
        )
    }
}

/// Added instead of a session when a listener is full: writes the refusal and closes.
final class RefuseConnection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let answer: ByteBuffer

    init(_ answer: ByteBuffer) { self.answer = answer }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context) }
    }

    func channelActive(context: ChannelHandlerContext) { refuse(context) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    private func refuse(_ context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(NIOAny(answer)).whenComplete { _ in channel.close(promise: nil) }
    }
}

@available(*, unavailable)
extension RefuseConnection: Sendable {}
