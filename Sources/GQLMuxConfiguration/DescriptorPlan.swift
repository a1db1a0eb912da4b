import UpstreamSettings

/// How the process's open-file limit is shared: each listener's connection limit, and a reserve
/// for what gqlmuxd opens itself (upstream connections and streams, HTTP requests upstream,
/// files, the journal, the loop's own descriptors). A flood of one listener can then never
/// take descriptors from another listener or from the upstream. Pure.
package struct DescriptorPlan: Sendable, Equatable {
    /// Connections at once: the line socket (`[limits] max_clients`), the endpoint's Unix socket
    /// and its TCP port (`[graphql_endpoint] socket_max_connections`, `listen_max_connections`).
    package var lineSocket: Int
    package var endpointSocket: Int
    package var endpointTCP: Int
    /// Descriptors kept for gqlmuxd's own use.
    package var reserve: Int
    /// The open-file limit the plan was made for.
    package var openFiles: Int
    /// Whether the configured limits had to be lowered (in proportion) to fit `openFiles`.
    package var lowered: Bool

    /// Descriptors gqlmuxd needs besides its clients' connections, before the upstream's.
    package static let baseReserve = 64
    /// HTTP requests upstream (`http_url`) that may be open at once, reserved.
    package static let httpReserve = 64

    /// - Parameters:
    ///   - openFiles: the soft `RLIMIT_NOFILE` in force.
    ///   - configuration: the listeners' limits and the upstream's size.
    package init(openFiles: Int, configuration: DaemonConfiguration) {
        var reserve = Self.baseReserve
        for entry in configuration.upstreams {
            let upstream = entry.upstream
            reserve += entry.connections.maxConnections
            if upstream.streamsOverHTTP { reserve += upstream.maxStreams }
            if upstream.httpURL != nil { reserve += Self.httpReserve }
        }
        let endpoint = configuration.graphqlEndpoint
        let wanted = [
            configuration.limits.maxClients,
            endpoint.socketPath(beside: configuration.socketPath) == nil ? 0 : endpoint.socketMaxConnections,
            endpoint.listen == nil ? 0 : endpoint.listenMaxConnections,
        ]
        // What does not fit is taken from every listener in proportion to its limit (each keeps
        // at least one), so each keeps room of its own and a flood of one never takes another's.
        let available = max(0, openFiles - reserve)
        let total = wanted.reduce(0, +)
        let granted =
            total <= available
            ? wanted
            : wanted.map { limit in limit == 0 ? 0 : max(1, Int((Double(limit) * Double(available) / Double(total)).rounded(.down))) }
        lineSocket = granted[0]
        endpointSocket = granted[1]
        endpointTCP = granted[2]
        self.reserve = reserve
        self.openFiles = openFiles
        lowered = granted != wanted
    }
}
