import GraphQLTransportWS
import NIOCore

/// Local protocol v1 (DESIGN.md section 4): one JSON object per line.
package enum LocalProtocol {
    package static let version = 1
    /// The release of gqlmux (daemon, CLI and client library), shown by `--version`.
    package static let release = "0.1.0"
    package static let defaultSocketPath = "/run/gqlmux/gqlmux.sock"
}

/// Error codes the daemon makes (DESIGN.md section 4); defined with the transport, which
/// makes some of them.
package typealias LocalErrorCode = ErrorCode

/// Encoders for daemon → client lines. Each returns a complete line ending in `\n`.
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

    package static func error(id: String?, code: String, message: String, extra: [(String, String)] = []) -> ByteBuffer {
        var b = ByteBuffer()
        b.writeStaticString(#"{"type":"error""#)
        if let id {
            b.writeStaticString(#","id":"#)
            b.writeJSONString(id)
        }
        b.writeStaticString(#","payload":[{"message":"#)
        b.writeJSONString(message)
        b.writeStaticString(#","extensions":{"code":"#)
        b.writeJSONString(code)
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
        message(type: "complete", id: id)
    }

    package static func state(id: String, _ state: String) -> ByteBuffer {
        var b = ByteBuffer()
        b.writeStaticString(#"{"type":"state","id":"#)
        b.writeJSONString(id)
        b.writeStaticString(#","state":"#)
        b.writeJSONString(state)
        b.writeStaticString("}\n")
        return b
    }

    /// `{"type":"ok","id":ID}` (no `id` when the request had none)
    package static func ok(id: String?) -> ByteBuffer {
        message(type: "ok", id: id)
    }

    /// `type` with an optional id and raw JSON payload: pong, status, connection_ack, an
    /// upstream `error` passed through unchanged, and the client library's requests.
    package static func message(type: String, id: String? = nil, payload: ByteBuffer? = nil) -> ByteBuffer {
        var b = ByteBuffer()
        b.writeEnvelope(type: type, id: id, payload: payload)
        b.writeStaticString("\n")
        return b
    }
}
