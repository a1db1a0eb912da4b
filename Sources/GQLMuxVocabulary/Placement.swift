/// Where one upstream operation lives. The multiplexer core decides it (``Multiplexer``'s
/// `place`) from the ``UpstreamLayout``, keeps it with the operation, and names it in the
/// `open` and `close` actions, so the I/O layer keeps no table of its own.
package enum Placement: Hashable, Sendable {
    /// The pool's WebSocket connection of this index (0 is the first; a higher one is made
    /// when the core first places an operation on it).
    case connection(Int)
    /// `http_url`: one POST per query or mutation.
    case http
    /// A stream of its own on the HTTP streaming upstream (`transport = "multipart"` or `"sse"`).
    case stream
}

/// What the configured upstream offers to place operations on.
package struct UpstreamLayout: Equatable, Sendable {
    package enum Subscriptions: Equatable, Sendable {
        /// On the pool's WebSocket connections.
        case pool
        /// Each on an HTTP stream of its own, at most `max` at once (`max_streams`).
        case streams(max: Int)
    }

    package var subscriptions: Subscriptions
    /// Queries and mutations go to `http_url`; otherwise where subscriptions go (the pool).
    package var singlesOverHTTP: Bool
    /// `max_connections`: pool connections at most.
    package var maxConnections: Int
    /// `max_operations_per_connection`; 0: no cap, everything on the first connection.
    package var maxOperationsPerConnection: Int

    package init(subscriptions: Subscriptions = .pool, singlesOverHTTP: Bool = false, maxConnections: Int = 1, maxOperationsPerConnection: Int = 0) {
        self.subscriptions = subscriptions
        self.singlesOverHTTP = singlesOverHTTP
        self.maxConnections = maxConnections
        self.maxOperationsPerConnection = maxOperationsPerConnection
    }
}

/// One upstream connection set: an upstream of the table, with one identity's credentials
/// (every client's for `identity = "host"`). Operations of different lanes never share a
/// connection, a dedup key or a replayed result. The registry of upstreams names them; the
/// multiplexer core places each operation within its own.
package struct LaneID: Hashable, Sendable, CustomStringConvertible {
    package let value: Int

    package init(_ value: Int) { self.value = value }

    /// The default upstream's lane with the host's credentials, made first.
    package static let primary = LaneID(0)

    package var description: String { "\(value)" }
}
