import GQLMuxVocabulary
import NIOCore

/// Options of the transport that the state machine needs (the I/O options live in `Upstream`).
package struct TransportOptions: Sendable, Equatable {
    /// Connect on first subscribe instead of at start.
    package var lazy: Bool = false
    /// How long a lazy transport keeps an idle connection open.
    package var lazyCloseTimeout: Duration = .zero
    package var backoff: Backoff = Backoff()
    /// TCP + TLS + WebSocket upgrade.
    package var connectTimeout: Duration = .seconds(10)
    package var ackTimeout: Duration = .seconds(10)
    /// Zero disables client pings.
    package var pingInterval: Duration = .seconds(20)
    /// Time without any inbound frame after a ping before the peer is declared dead.
    package var pongTimeout: Duration = .seconds(10)
    package var operationIDs: OperationIDStyle = .sequential
    /// A close this soon after a (re)subscribe may be blamed on it (see `Quarantine`).
    package var blameWindow: Duration = .seconds(1)
    /// How long an acknowledged connection must stay up before the reconnect attempt counter
    /// (and any blame charged to its operations) is cleared: an upstream that acks and fails
    /// at once keeps growing the backoff.
    package var healthyAfter: Duration = .seconds(10)
    /// How long a query or mutation may wait for its result (including any time spent waiting
    /// for a connection) before it ends with `CONNECTION_LOST`.
    package var operationTimeout: Duration = .seconds(30)
    /// Which dialect the connection speaks besides its subprotocol: AWS AppSync's real-time
    /// endpoint speaks its own over `graphql-ws` (``AppSyncWire``).
    package var dialect: UpstreamDialect = .standard

    package init() {}
}

/// The words a connection speaks: the subprotocol's own, or AWS AppSync's.
package enum UpstreamDialect: String, Sendable, Equatable {
    case standard
    case appSync
}

package enum OperationIDStyle: String, Sendable, Equatable {
    case sequential, uuid
}

/// What the I/O layer must do after an event.
package enum TransportAction: Sendable, Equatable {
    /// Open connection number `generation` (TCP, TLS, upgrade), then report back.
    case connect(generation: Int)
    case send(generation: Int, ByteBuffer)
    /// Send a WebSocket ping frame: graphql-ws has no ping of its own, and the server's pong
    /// frame gives the round trip (it is not a liveness check: graphql-ws's is the `ka`).
    case pingFrame(generation: Int)
    /// Close with a close frame; the machine has already forgotten this connection.
    case close(generation: Int, code: CloseCode, reason: String)
    /// Drop the TCP connection at once (dead peer, connect timeout).
    case abort(generation: Int)
    case event(TransportEvent)
    case operation(id: OperationID, OperationUpdate)
}
