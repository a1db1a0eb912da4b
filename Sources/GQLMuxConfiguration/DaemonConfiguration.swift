import GQLMuxVocabulary
import GraphQLTransportWS
import LocalEndpoint
import RequestValidation
import UpstreamSettings

/// The daemon's whole configuration; `DaemonConfiguration+TOML.swift` reads it from a file.
package struct DaemonConfiguration: Sendable {
    package struct Limits: Sendable, Equatable {
        package var maxClients = 1024
        package var maxOperationsPerClient = 1000
        package var maxLineBytes = 1 << 20
        package var clientBufferBytes = 8 << 20
        /// Bytes buffered for all local clients together; over it the client furthest behind is cut.
        package var totalBufferBytes = 256 << 20
        /// `max_document_tokens` and `max_document_depth`, checked before parsing.
        package var document = SubscribeRequest.Limits()
        /// Identities (`identity = "client"` or `"peer"`) with connections at once, over every upstream.
        package var maxIdentities = 256
        /// The largest credential one client may present (payload and headers together).
        package var maxCredentialBytes = 16_384
        /// Identity lanes the clients of one local uid may hold at once (TCP clients: one peer).
        package var maxIdentitiesPerUID = 16
        /// The most the credentials of every client together may take in an online restart's
        /// record (escaped: twice their size): half of what the next process reads.
        package static let credentialRecordBytes = 128 << 20
        package init() {}
    }

    package struct Security: Sendable, Equatable {
        /// Peers allowed to connect; both empty means anyone who can open the socket.
        package var allowedUIDs: [UInt32] = []
        package var allowedGIDs: [UInt32] = []
        /// Peers allowed to use pause, resume and reload (besides root and the daemon's uid).
        package var adminUIDs: [UInt32] = []
        package var adminGIDs: [UInt32] = []
        package init() {}
    }

    /// `[upstream] max_operations_per_connection` and `max_connections` (see `ConnectionPool`).
    package struct ConnectionLimits: Sendable, Equatable {
        /// 0: unlimited, one connection carries everything.
        package var maxOperationsPerConnection = 0
        package var maxConnections = 4
        package init() {}
    }

    package enum LogTarget: String, Sendable, Equatable {
        case auto, journal, stderr
    }

    /// Every upstream: `[upstream]` (named `default`) first, then `[upstreams.NAME]` by name.
    package var upstreams: [NamedUpstream]
    /// The upstream named `default` (`[upstream]`).
    package var upstream: UpstreamConfiguration {
        get { upstreams[0].upstream }
        set { upstreams[0].upstream = newValue }
    }
    /// The default upstream's pool limits.
    package var connections: ConnectionLimits {
        get { upstreams[0].connections }
        set { upstreams[0].connections = newValue }
    }
    package var socketPath: String = "/run/gqlmux/gqlmux.sock"
    package var socketMode: UInt32 = 0o660
    package var limits = Limits()
    package var security = Security()
    package var logLevel = "info"
    package var logTarget = LogTarget.auto
    /// `[metrics] listen`: where `GET /metrics` is served; nil (the default) serves none.
    package var metricsListen: MetricsListenAddress?
    package var graphqlEndpoint = GraphQLEndpointSettings()
    /// `[subscriptions] replay_last`: whether a subscriber joining a shared subscription gets
    /// its latest result at once, when its own `extensions.gqlmux.replayLast` does not say.
    package var replayLast = false

    package init(upstream: UpstreamConfiguration) {
        self.upstreams = [NamedUpstream(name: NamedUpstream.defaultName, upstream: upstream)]
    }

    /// The upstream named `name`, if the table has one.
    package func upstream(named name: String) -> NamedUpstream? { upstreams.first { $0.name == name } }
}

/// `[metrics] listen = "HOST:PORT"`: a numeric IPv4 address, `[IPv6]`, or `localhost`, and a port.
package struct MetricsListenAddress: Sendable, Equatable, CustomStringConvertible {
    package var host: String
    package var port: Int

    package init(_ text: String) throws(ConfigurationError) {
        guard let colon = text.lastIndex(of: ":") else {
            throw ConfigurationError("'\(text)' is not HOST:PORT (for example \"127.0.0.1:9464\")")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw ConfigurationError("'\(text)' is not HOST:PORT with a port from 0 (any free port) to 65535")
        }
        self.host = host
        self.port = port
    }

    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// `[graphql_endpoint]`: the local GraphQL endpoint (WebSocket and HTTP) for apps that keep
/// their own GraphQL client.
package struct GraphQLEndpointSettings: Sendable, Equatable {
    /// The Unix socket; nil: `graphql.sock` beside the line socket; "" turns it off.
    package var socket: String?
    package var mode: UInt32 = 0o660
    /// `HOST:PORT` on a loopback address; nil (the default) listens on no TCP port.
    package var listen: MetricsListenAddress?
    package var path = "/graphql"
    /// `allowed_hosts` and `allowed_origins`: the browser checks of every request.
    package var access = EndpointAccess()
    /// `token_file`: where the TCP port's token is read from (at start and at each reload).
    package var tokenFile: String?
    /// The token read from `tokenFile`; TCP clients must present it.
    package var token: EndpointToken?
    /// `allow_all_local_users`: the operator accepts that `listen` serves every local user
    /// although `[security] allowed_uids`/`allowed_gids` restrict the Unix sockets.
    package var allowAllLocalUsers = false
    /// `socket_max_connections`: connections to the Unix socket at once.
    package var socketMaxConnections = 1024
    /// `listen_max_connections`: connections to the TCP port at once.
    package var listenMaxConnections = 256
    package init() {}

    /// The socket path to serve, given the line socket's; nil when off.
    package func socketPath(beside lineSocket: String) -> String? {
        if let socket { return socket.isEmpty ? nil : socket }
        let directory = lineSocket.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return (directory.isEmpty ? "" : directory + "/") + "graphql.sock"
    }

    /// Whether `host` is a loopback address: 127.0.0.0/8, `::1` or `localhost`.
    package static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ UInt8($0) != nil }) else { return false }
        return parts[0] == "127"
    }
}

extension DaemonConfiguration {
    /// What the default upstream offers the multiplexer core to place operations on.
    package var upstreamLayout: UpstreamLayout { upstreams[0].layout }

    /// The endpoint's own token (`token_file`) is presented in the `Authorization` header; an
    /// upstream that forwards that header to its server could not be given the app's own
    /// credential there, and must not be given the endpoint's: refused.
    package func checkForwardedHeaders() throws(ConfigurationError) {
        guard graphqlEndpoint.tokenFile != nil else { return }
        for entry in upstreams {
            guard case .client(let headers) = entry.identity, headers.contains("authorization") else { continue }
            let section = entry.name == NamedUpstream.defaultName ? "[upstream]" : "[upstreams.\(entry.name)]"
            throw ConfigurationError(
                "[graphql_endpoint] token_file and \(section) forward_headers: both use the Authorization header; forward another header (forward_headers = [\"x-upstream-authorization\"]) or drop token_file"
            )
        }
    }
}
