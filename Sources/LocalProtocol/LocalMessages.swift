import JSONEnvelope
import NIOCore

/// Local protocol v1 (docs/protocol.md): one JSON object per line.
package enum LocalProtocol {
    package static let version = 1
    /// The release of gqlmux (daemon, CLI and client library), shown by `--version`.
    package static let release = "0.1.0"
    package static let defaultSocketPath = "/run/gqlmux/gqlmux.sock"
}

/// The error codes of the local protocol (docs/protocol.md), in `extensions.code`. The
/// daemon maps the transport's failures onto them; nothing below this layer knows them.
package enum LocalErrorCode: String, Sendable, CaseIterable {
    case badRequest = "BAD_REQUEST"
    case invalidDocument = "INVALID_DOCUMENT"
    case duplicateID = "DUPLICATE_ID"
    case limitExceeded = "LIMIT_EXCEEDED"
    case forbidden = "FORBIDDEN"
    case connectionLost = "CONNECTION_LOST"
    case upstreamClosed = "UPSTREAM_CLOSED"
    case slowConsumer = "SLOW_CONSUMER"
    case shuttingDown = "SHUTTING_DOWN"
    case unknownUpstream = "UNKNOWN_UPSTREAM"
}

extension LocalErrorCode {
    /// The limits a `LIMIT_EXCEEDED` can name (their configuration keys): its message names the
    /// one it hit, and `extensions.limit` carries that name for programs.
    package static let limits: Set<String> = [
        "max_clients", "max_operations_per_client", "max_streams", "max_connections", "max_identities",
        "max_identities_per_uid", "max_credential_bytes", "total_buffer_bytes", "max_document_tokens", "max_document_depth",
    ]

    /// The limit `message` names: its first word that is one of ``limits``.
    package static func limit(namedIn message: String) -> String? {
        message.split(whereSeparator: { !($0.isLetter || $0 == "_") }).lazy.map(String.init).first(where: limits.contains)
    }
}

/// Every message type of the local protocol, both directions (docs/protocol.md).
package enum LocalMessageType: String, Sendable, CaseIterable {
    // Client → daemon.
    case connectionInit = "connection_init"
    case subscribe
    case ping
    case pause, resume, reload, restart
    // Daemon → client.
    case connectionAck = "connection_ack"
    case next
    case error
    case state
    case pong
    case ok
    // Both: `complete` stops (client) or ends (daemon) an operation; `status`, `metrics`,
    // `clients` and `operations` ask (client) and answer (daemon).
    case complete
    case status
    case metrics
    case clients
    case operations
}

/// The lifecycle words of a `state` message (docs/protocol.md), owned by the local protocol:
/// the daemon maps its upstream operation states onto them.
package enum LocalOperationState: String, Sendable, CaseIterable {
    case pending, active, reconnecting, paused
}

/// The line protocol's encoder: every daemon → client line, each a complete line ending in `\n`.
package enum LocalEncode {
    /// `{"type":"next","id":ID,"payload":` — the per-subscriber prefix; the upstream
    /// payload bytes and ``nextSuffix`` follow.
    package static func nextPrefix(id: String) -> ByteBuffer {
        var b = ByteBuffer()
        b.writeStaticString(#"{"type":"next","id":"#)
        b.writeJSONString(id)
        b.writeStaticString(#","payload":"#)
        return b
    }

    package static let nextSuffix: StaticString = "}\n"

    /// `message` as one line of the local protocol (docs/protocol.md).
    package static func line(_ message: SessionMessage) -> ByteBuffer {
        switch message {
        case .connectionAck(let upstreamState):
            var payload = JSONObjectWriter()
            payload.field("protocol", LocalProtocol.version)
            payload.field("server", "gqlmuxd/\(LocalProtocol.release)")
            payload.field("upstream", upstreamState)
            return envelope(.connectionAck, payload: payload.finish())
        case .next(let id, var payload, let mark):
            // `{"type":"next","id":ID,"payload":PAYLOAD,MARK:true}` for a marked one.
            var b = nextPrefix(id: id)
            b.writeBuffer(&payload)
            if let mark {
                b.writeStaticString(",\"")
                b.writeStaticString(mark.name)
                b.writeStaticString("\":true")
            }
            b.writeStaticString(nextSuffix)
            return b
        case .state(let id, let state, let gapMs):
            var b = ByteBuffer()
            b.writeStaticString(#"{"type":"state","id":"#)
            b.writeJSONString(id)
            b.writeStaticString(#","state":"#)
            b.writeJSONString(state.rawValue)
            if let gapMs {
                b.writeStaticString(#","gapMs":"#)
                b.writeString(String(gapMs))
            }
            b.writeStaticString("}\n")
            return b
        case .error(let id, let error):
            return envelope(.error, id: id, payload: error.errors)
        case .complete(let id):
            return envelope(.complete, id: id)
        case .pong(let payload):
            return envelope(.pong, payload: payload)
        case .ok(let id):
            return envelope(.ok, id: id)
        case .status(let id, let payload):
            return envelope(.status, id: id, payload: payload)
        case .table(let type, let id, let payload):
            return envelope(type, id: id, payload: payload)
        case .metrics(let id, let text):
            // The exposition text as one JSON string.
            var payload = ByteBuffer()
            payload.writeJSONString(text)
            return envelope(.metrics, id: id, payload: payload)
        }
    }

    /// `type` with an optional id and raw JSON payload, as one line: the daemon's messages
    /// above, and the client library's requests.
    package static func envelope(_ type: LocalMessageType, id: String? = nil, payload: ByteBuffer? = nil, upstream: String? = nil) -> ByteBuffer {
        var b = ByteBuffer()
        b.writeEnvelope(type: type.rawValue, id: id, payload: payload, upstream: upstream)
        b.writeStaticString("\n")
        return b
    }
}
