import GQLMuxVocabulary
import UpstreamSettings

/// One upstream of the table: `[upstream]`, named `default`, or `[upstreams.NAME]`. Each has its
/// own carriers, pool limits and identity.
package struct NamedUpstream: Sendable {
    /// The name of the upstream `[upstream]` configures.
    package static let defaultName = "default"

    package var name: String
    package var upstream: UpstreamConfiguration
    package var connections = DaemonConfiguration.ConnectionLimits()
    /// Whose credentials its connections carry.
    package var identity = UpstreamIdentity.host

    package init(name: String, upstream: UpstreamConfiguration) {
        self.name = name
        self.upstream = upstream
    }

    /// Whether `name` may name an upstream: 1 to 32 of `a-z`, `0-9`, `_` and `-`.
    package static func isValidName(_ name: Substring) -> Bool {
        (1...32).contains(name.utf8.count)
            && name.utf8.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_")
                    || $0 == UInt8(ascii: "-")
            }
    }

    package static func isValidName(_ name: String) -> Bool { isValidName(Substring(name)) }

    /// What it offers the multiplexer core to place operations on.
    package var layout: UpstreamLayout {
        UpstreamLayout(
            subscriptions: upstream.streamsOverHTTP ? .streams(max: upstream.maxStreams) : .pool,
            singlesOverHTTP: upstream.httpURL != nil,
            maxConnections: connections.maxConnections,
            maxOperationsPerConnection: connections.maxOperationsPerConnection
        )
    }
}

/// `identity`: whose credentials an upstream's connections carry.
package enum UpstreamIdentity: Sendable, Equatable {
    /// The configured credentials, for every client (the default).
    case host
    /// What each client presents: its WebSocket `connection_init` payload, and the request
    /// headers named here (lowercased), go upstream; equal credentials share connections.
    case client(forwardHeaders: [String])
    /// The local peer's uid or gid picks a connecting payload file.
    case peer(PeerPayloads)

    package var name: String {
        switch self {
        case .host: "host"
        case .client: "client"
        case .peer: "peer"
        }
    }
}

/// `[upstreams.NAME.peers]`: `"uid:1001" = "/etc/gqlmux/alice.json"`, `"gid:1002" = …`.
package struct PeerPayloads: Sendable, Equatable {
    package var byUID: [UInt32: String] = [:]
    package var byGID: [UInt32: String] = [:]

    package init(byUID: [UInt32: String] = [:], byGID: [UInt32: String] = [:]) {
        self.byUID = byUID
        self.byGID = byGID
    }

    /// The payload file of a peer: its uid's entry, else its group's; nil: it has none.
    package func payloadFile(uid: UInt32, gid: UInt32) -> String? { byUID[uid] ?? byGID[gid] }
}
