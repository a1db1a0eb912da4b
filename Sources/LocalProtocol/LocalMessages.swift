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
    // Both: `complete` stops (client) or ends (daemon) an operation; `status` and `metrics`
    // ask (client) and answer (daemon).
    case complete
    case status
    case metrics
}

/// Encoders for daemon → client lines. Each returns a complete line ending in `\n`.
/// The lifecycle words of a `state` message (docs/protocol.md), owned by the local protocol:
/// the daemon maps its upstream operation states onto them.
package enum LocalOperationState: String, Sendable, CaseIterable {
    case pending, active, reconnecting, paused
}

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

    package static func error(id: String?, code: LocalErrorCode, message: String, extra: [(String, String)] = []) -> ByteBuffer {
        var b = ByteBuffer()
        b.writeStaticString(#"{"type":"error""#)  // LocalMessageType.error
        if let id {
            b.writeStaticString(#","id":"#)
            b.writeJSONString(id)
        }
        b.writeStaticString(#","payload":[{"message":"#)
        b.writeJSONString(message)
        b.writeStaticString(#","extensions":{"code":"#)
        b.writeJSONString(code.rawValue)
        for (key, rawJSON) in extra {
            b.writeStaticString(",")
            b.writeJSONString(key)
            b.writeStaticString(":")
            b.writeString(rawJSON)
        }
        b.writeStaticString("}}]}\n")
        return b
    }

    /// `{"type":"complete","id":ID}`
    package static func complete(id: String) -> ByteBuffer {
        message(.complete, id: id)
    }

    /// `{"type":"state","id":ID,"state":STATE}`; an `active` after an outage carries
    /// `"gapMs":N`, how long the stream was down.
    package static func state(id: String, _ state: LocalOperationState, gapMs: Int? = nil) -> ByteBuffer {
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
    }

    /// `{"type":"next","id":ID,"payload":PAYLOAD,MARK:true}`: a result gqlmuxd itself gives,
    /// marked `replayed` (a shared subscription's latest result, to a subscriber that joined
    /// after it) or `snapshot` (the query a subscriber named for its stream's resumes).
    package static func markedNext(id: String, payload: ByteBuffer, mark: StaticString) -> ByteBuffer {
        var b = nextPrefix(id: id)
        var payload = payload
        b.writeBuffer(&payload)
        b.writeStaticString(",\"")
        b.writeStaticString(mark)
        b.writeStaticString("\":true}\n")
        return b
    }

    /// `{"type":"ok","id":ID}` (no `id` when the request had none)
    package static func ok(id: String?) -> ByteBuffer {
        message(.ok, id: id)
    }

    /// `type` with an optional id and raw JSON payload: pong, status, metrics, an upstream
    /// `error` passed through unchanged, and the client library's requests.
    package static func message(_ type: LocalMessageType, id: String? = nil, payload: ByteBuffer? = nil) -> ByteBuffer {
        var b = ByteBuffer()
        b.writeEnvelope(type: type.rawValue, id: id, payload: payload)
        b.writeStaticString("\n")
        return b
    }

    /// `connection_ack` with `{"protocol":1,"server":"gqlmuxd/VERSION","upstream":STATE}`.
    package static func connectionAck(upstreamState: String) -> ByteBuffer {
        var payload = JSONObjectWriter()
        payload.field("protocol", LocalProtocol.version)
        payload.field("server", "gqlmuxd/\(LocalProtocol.release)")
        payload.field("upstream", upstreamState)
        return message(.connectionAck, payload: payload.finish())
    }

    /// The `metrics` answer: the exposition text as one JSON string.
    package static func metrics(id: String?, text: String) -> ByteBuffer {
        var payload = ByteBuffer()
        payload.writeJSONString(text)
        return message(.metrics, id: id, payload: payload)
    }
}
