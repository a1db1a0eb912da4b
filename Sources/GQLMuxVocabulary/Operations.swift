import NIOCore

/// The daemon's one name for an upstream operation, from the local line to the wire and back:
/// the multiplexer core assigns it, every carrier (a WebSocket connection, `http_url`, an HTTP
/// stream) is asked to open it under this id and reports its updates with it. On a WebSocket
/// with `operation_ids = "sequential"` it is also the wire id (`"7"`); with `"uuid"` the wire
/// id is a UUID the transport's state machine maps back to it.
package struct OperationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let value: Int
    package init(_ value: Int) { self.value = value }
    package var description: String { String(value) }
    package static func < (a: Self, b: Self) -> Bool { a.value < b.value }
}

/// Subscriptions survive reconnection; queries and mutations are sent once at most.
package enum OperationKind: Sendable, Equatable {
    case subscription
    case query
    case mutation

    package var survivesReconnect: Bool { self == .subscription }
}

/// Lifecycle of one operation while it is alive (finished states come as ``OperationUpdate/finished(_:)``).
package enum OperationState: String, Sendable, Equatable {
    case pending, active, reconnecting, paused
}

/// Why an operation ended.
package enum OperationFinish: Sendable, Equatable {
    case completed
    case cancelled
    case error(OperationError)
}

/// Why the transport (not the server) ended an operation. The layer above names these in its
/// own protocol (the daemon: `CONNECTION_LOST`, `UPSTREAM_CLOSED`, `SHUTTING_DOWN`).
package enum TransportFailure: Sendable, Equatable {
    /// The connection was lost (or paused) with the operation sent: it is never sent again.
    case connectionLost(reason: String)
    /// The upstream ended it: a close code that stops reconnection (4401, 4403, …), a
    /// graphql-ws `connection_error` (`closeCode` nil), or quarantine after repeated blame.
    case upstreamClosed(message: String, closeCode: CloseCode?, closeReason: String)
    /// The transport is shutting down.
    case shutDown
    /// A reload removed the operation's upstream from the table.
    case upstreamRemoved(name: String)
}

/// A terminal error of one operation.
package enum OperationError: Sendable, Equatable {
    /// The server's `error` payload (an array of GraphQL errors), exactly as received.
    case upstream(ByteBuffer)
    /// Made by the transport.
    case transport(TransportFailure)
}

/// What happened to one operation.
package enum OperationUpdate: Sendable, Equatable {
    case state(OperationState)
    case next(ByteBuffer)
    case finished(OperationFinish)
    /// The carrier's server refused the operation because the connection holds as many as it
    /// may (AppSync's `MaxSubscriptionsReachedError`); the carrier forgot it: it belongs on
    /// another connection.
    case carrierFull
}

/// The connection's state as operators see it (sd_notify STATUS, `status` verb).
package enum ConnectionState: Sendable, Equatable {
    case idle
    case connecting(attempt: Int)
    case awaitingAck(attempt: Int)
    case connected
    case reconnecting(attempt: Int, delay: Duration, cause: DisconnectCause)
    case paused
    case failed(closeCode: CloseCode?, reason: String)
    case shutDown

    /// The one-word name used on the local protocol, in STATUS and as a metrics label.
    package var name: ConnectionStateName {
        switch self {
        case .idle: .idle
        case .connecting: .connecting
        case .awaitingAck: .connecting
        case .connected: .connected
        case .reconnecting: .reconnecting
        case .paused: .paused
        case .failed: .failed
        case .shutDown: .stopped
        }
    }
}

/// The one-word names of ``ConnectionState``: every value a `state` label can take.
package enum ConnectionStateName: String, Sendable, CaseIterable {
    case idle, connecting, connected, reconnecting, paused, failed, stopped
}

/// Transport-level events for an observer (the daemon logs them to journald).
package enum TransportEvent: Sendable, Equatable {
    case stateChanged(ConnectionState)
    /// First ack of this transport's life.
    case connected
    /// An ack after an earlier connection was lost.
    case reconnected
    case disconnected(closeCode: CloseCode?, reason: String)
    case ping(received: Bool)
    case pong(received: Bool)
    /// The server's keep-alive (`ka` of graphql-ws and AppSync): it is there.
    case keepAlive
    /// Operation `id` was singled out by a client-blaming close (4400, 1007, 1009, 4409) and is
    /// never sent again.
    case quarantined(id: OperationID, closeCode: CloseCode)
    /// The server closed 1002 before its ack on `refused` (see ``ProtocolOffer``): later
    /// upgrades offer `next` alone.
    case protocolFallback(refused: WireProtocol, next: WireProtocol)
}
