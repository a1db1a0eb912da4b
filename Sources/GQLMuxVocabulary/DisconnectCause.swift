/// Why a connection attempt failed or an acknowledged connection was lost: one typed value from
/// the state machine to every reader (STATUS line, journal, metrics labels), so nobody parses
/// the English text.
package enum DisconnectCause: Sendable, Equatable, CustomStringConvertible {
    /// The server sent a close frame.
    case closed(code: CloseCode, reason: String)
    /// Below the protocol: a refused or reset connection, DNS, TLS, a TCP connection gone
    /// without a close frame, an unreadable connecting payload file. The text says which.
    case network(String)
    /// No frame within the liveness window: `silence` after a client ping (graphql-transport-ws),
    /// or after the last keep-alive (graphql-ws, `afterKeepAlive`).
    case deadPeer(silence: Duration, afterKeepAlive: Bool)
    case connectTimeout(Duration)
    case ackTimeout(Duration)
    /// The server broke the protocol (malformed, binary, oversized or not UTF-8); we closed.
    case protocolViolation(String)
    /// An HTTP streaming upstream answered a stream's request with this status (5xx).
    case httpStatus(code: Int, reason: String)

    /// The operator-readable text (STATUS, journal `GQLMUX_CAUSE`).
    package var description: String {
        switch self {
        case .closed(let code, let reason): "upstream closed \(code)" + (reason.isEmpty ? "" : " \(reason)")
        case .network(let text): text
        case .deadPeer(let silence, let afterKeepAlive):
            afterKeepAlive ? "peer silent for \(silence.seconds)s after its last keep-alive" : "peer silent for \(silence.seconds)s after ping"
        case .connectTimeout(let timeout): "connect timeout after \(timeout.seconds)s"
        case .ackTimeout(let timeout): "no connection_ack within \(timeout.seconds)s"
        case .protocolViolation(let reason): "protocol violation: \(reason)"
        case .httpStatus(let code, let reason): "HTTP \(code) \(reason)"
        }
    }

    /// The text without what the server wrote in words (a close reason, an HTTP reason phrase):
    /// for those who must not read one identity's server messages (``description`` otherwise).
    package var withoutServerText: String {
        switch self {
        case .closed(let code, _): "upstream closed \(code)"
        case .httpStatus(let code, _): "HTTP \(code)"
        default: description
        }
    }

    /// The bounded `cause` label of `gqlmux_reconnects_total`.
    package var metricLabel: String {
        switch self {
        case .closed: "closed"
        case .network: "network"
        case .deadPeer: "dead_peer"
        case .connectTimeout: "connect_timeout"
        case .ackTimeout: "ack_timeout"
        case .protocolViolation: "protocol_violation"
        case .httpStatus: "http_status"
        }
    }

    /// The server's close code, when it sent a close frame.
    package var closeCode: CloseCode? {
        if case .closed(let code, _) = self { return code }
        return nil
    }
}
