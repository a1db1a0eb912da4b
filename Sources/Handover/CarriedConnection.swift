import LocalProtocol

/// A client connection's wire as the online restart sees it: each kind of client (the line
/// protocol, an endpoint WebSocket, an endpoint stream) says for itself whether it can be
/// carried to the next process as it is now, and what the record must say to rebuild it. The
/// handover asks this of every session's wire and knows no handler type.
package protocol CarriedConnection: AnyObject {
    /// What the record says of this connection, or nil when it cannot be carried as it is now
    /// (a half-read request, a close already under way, an HTTP exchange that is not a
    /// subscription's stream).
    var carriage: HandoverState.Carriage? { get }
    /// The connection goes to the next process: from now on this one writes nothing more on
    /// its own (no keep-alive, no heartbeat, no timeout's answer, no close frame).
    func handOver()
    /// What its client hears, in its own protocol, as it is handed over with subscriptions
    /// `ids`, after the results before it: the line protocol's `reconnecting` for each; the
    /// endpoint's protocols have no words for it.
    func farewell(subscriptions ids: [String]) -> [SessionMessage]
}

extension CarriedConnection {
    package func farewell(subscriptions ids: [String]) -> [SessionMessage] { [] }
}

extension HandoverState {
    /// What a wire says of itself for the record (``CarriedConnection``).
    package struct Carriage: Equatable, Sendable {
        package var kind: Kind
        /// A WebSocket client's `connection_init` was acknowledged.
        package var acknowledged: Bool
        /// The upstream an endpoint WebSocket's path names (nil: `default`).
        package var upstream: String?

        package init(_ kind: Kind, acknowledged: Bool = true, upstream: String? = nil) {
            self.kind = kind
            self.acknowledged = acknowledged
            self.upstream = upstream
        }
    }
}

/// How a client connection reaches this process: accepted now on one of its listeners, or
/// carried over a restart, as the previous process's record describes it.
package enum ConnectionArrival {
    case accepted
    case carried(HandoverState.Client)
}
