import EndpointServer
import GQLMuxConfiguration
import GQLMuxVocabulary
import Handover
import NIOCore
import NIOPosix

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

    private func endpointBootstrap(_ configuration: DaemonConfiguration, origin: ClientOrigin) -> ServerBootstrap {
        let limits = configuration.limits
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
            .clientSocketOptions(limits, origin: origin)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard self.admitConnection(channel, origin: origin) else {
                        return try channel.pipeline.syncOperations.addHandler(RefuseConnection(self.refusal(for: origin)))
                    }
                    try self.configureClient(channel, listener: origin, arrival: .accepted)
                }
            }
    }
}
