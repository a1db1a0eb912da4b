import JSONEnvelope
import NIOCore

/// What a client session tells its client, besides the results the fan-out frames on the hot
/// path: one value per message, which each wire writes in its own words (the line protocol
/// with ``LocalEncode/line(_:)``, the endpoint's WebSocket and HTTP wires with theirs). Nothing
/// is serialized to be parsed again on the way.
package enum SessionMessage: Sendable, Equatable {
    /// The answer to a line client's `connection_init`, with the upstream's state as of now.
    case connectionAck(upstreamState: String)
    /// A result gqlmuxd gives one subscriber itself, marked (a replay, a snapshot), or one a
    /// single answer collects (`mark` nil: the upstream's own result).
    case next(id: String, payload: ByteBuffer, mark: ResultMark?)
    /// An operation's lifecycle; an `active` after an outage says how long it was down.
    case state(id: String, LocalOperationState, gapMs: Int?)
    /// An operation failed (`id`), or the connection is ended (`id` nil).
    case error(id: String?, SessionError)
    /// An operation ended.
    case complete(id: String)
    case pong(payload: ByteBuffer?)
    /// An admin verb was done.
    case ok(id: String?)
    case status(id: String?, payload: ByteBuffer)
    /// The answer to `clients` or `operations` (`type`): a JSON array, one object per row.
    case table(LocalMessageType, id: String?, payload: ByteBuffer)
    case metrics(id: String?, text: String)
}

/// How a result gqlmuxd gives itself is marked for its subscriber (docs/protocol.md).
package enum ResultMark: Sendable, Equatable {
    /// A shared subscription's latest result, to a subscriber that joined after it.
    case replayed
    /// The result of the query a subscriber named for its stream's resumes.
    case snapshot

    /// The mark's name: `"replayed": true` on a line, `extensions.gqlmux.replayed` elsewhere.
    package var name: StaticString {
        switch self {
        case .replayed: "replayed"
        case .snapshot: "snapshot"
        }
    }
}

/// Why an operation or a connection failed: gqlmuxd's own reason, or the upstream's `errors`
/// passed through untouched.
package enum SessionError: Sendable, Equatable {
    /// - Parameter extra: more members of `extensions` (name, raw JSON), as an upstream close's
    ///   code and reason.
    case local(code: LocalErrorCode, message: String, extra: [Extension] = [])
    /// The upstream's own `errors` array (raw JSON).
    case upstream(errors: ByteBuffer)

    /// A member of an error's `extensions` beside `code`: its name and raw JSON value.
    package struct Extension: Sendable, Equatable {
        package var name: String
        package var json: String
        package init(_ name: String, json: String) {
            self.name = name
            self.json = json
        }
    }

    /// gqlmuxd's own code; nil for the upstream's errors.
    package var code: LocalErrorCode? {
        if case .local(let code, _, _) = self { code } else { nil }
    }

    /// The GraphQL `errors` array: `[{"message":…,"extensions":{"code":…}}]`; a
    /// `LIMIT_EXCEEDED` adds `"limit"`, the configuration key of the limit it hit.
    package var errors: ByteBuffer {
        switch self {
        case .upstream(let errors):
            return errors
        case .local:
            var out = ByteBuffer()
            out.writeStaticString("[")
            var first = firstError
            out.writeBuffer(&first)
            out.writeStaticString("]")
            return out
        }
    }

    /// The first error of ``errors`` (what graphql-ws's legacy protocol sends as its `error`
    /// payload); `{}` when the upstream sent none.
    package var firstError: ByteBuffer {
        switch self {
        case .upstream(let errors):
            guard let range = errors.withUnsafeReadableBytes({ JSONScanner.firstElement(ofArray: $0) }) else { return ByteBuffer(string: "{}") }
            return errors.getSlice(at: errors.readerIndex + range.lowerBound, length: range.count)!
        case .local(let code, let message, let extra):
            var out = ByteBuffer()
            out.writeStaticString(#"{"message":"#)
            out.writeJSONString(message)
            out.writeStaticString(#","extensions":{"code":"#)
            out.writeJSONString(code.rawValue)
            if code == .limitExceeded, !extra.contains(where: { $0.name == "limit" }), let limit = LocalErrorCode.limit(namedIn: message) {
                out.writeStaticString(#","limit":"#)
                out.writeJSONString(limit)
            }
            for member in extra {
                out.writeStaticString(",")
                out.writeJSONString(member.name)
                out.writeStaticString(":")
                out.writeString(member.json)
            }
            out.writeStaticString("}}")
            return out
        }
    }

    /// The first error's `message`: a WebSocket close reason.
    package var message: String {
        switch self {
        case .local(_, let message, _): return message
        case .upstream:
            let first = firstError
            return first.withUnsafeReadableBytes { bytes in
                guard let members = try? JSONScanner.scanObject(bytes),
                    let message = members.first(where: { $0.key == "message" && $0.kind == .string })
                else { return "" }
                return JSONScanner.decodeString(bytes, message.range)
            }
        }
    }
}
