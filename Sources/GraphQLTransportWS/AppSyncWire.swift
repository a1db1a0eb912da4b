import GQLMuxVocabulary
import NIOCore

/// AWS AppSync's real-time dialect of the legacy graphql-ws protocol (subprotocol `graphql-ws`),
/// in the machine's one vocabulary. Where it differs from subscriptions-transport-ws:
///
/// | meaning | graphql-ws | AppSync |
/// |---|---|---|
/// | init | `connection_init` with a payload | `connection_init`, no payload; the credentials ride in the URL |
/// | run an operation | `start` with the request object | `start` with `{"data": "<the request as a JSON string>", "extensions": {"authorization": {…}}}` |
/// | started | nothing | `start_ack` |
/// | liveness | `ka` | `ka`, and silence longer than the ack's `connectionTimeoutMs` means a dead peer |
/// | an operation's error | `error` with the error (or errors) as payload | `error` with `{"errors": […]}`; an `error` without an id is the connection's |
/// | goodbye | `connection_terminate` | none: the close |
///
/// Queries and mutations are not accepted on the socket: they go over HTTP.
/// Authorizes one `start`: given its `data` (the request as the JSON string it is sent as),
/// the JSON object of headers for its `extensions.authorization` (for IAM, a signature over
/// exactly that string).
package typealias AppSyncAuthorizer = @Sendable (String) -> ByteBuffer

package enum AppSyncWire {
    /// The message's text frame, or nil when the dialect has no such message (`ping`, `pong`,
    /// `connection_terminate`). `authorize` gives each `start` its authorization (the
    /// credentials the connection was opened with).
    package static func encode(_ message: ClientMessage, authorize: AppSyncAuthorizer?) -> ByteBuffer? {
        var out = ByteBuffer()
        switch message {
        case .connectionInit: out.writeEnvelope(type: "connection_init")
        case .subscribe(let id, let payload):
            out.writeStaticString(#"{"id":"#)
            out.writeJSONString(id)
            out.writeStaticString(#","type":"start","payload":{"data":"#)
            let data = String(buffer: payload)
            out.writeJSONString(data)
            out.writeStaticString(#","extensions":{"authorization":"#)
            if let authorize { out.writeImmutableBuffer(authorize(data)) } else { out.writeStaticString("{}") }
            out.writeStaticString("}}}")
        case .complete(let id): out.writeEnvelope(type: "stop", id: id)
        case .connectionTerminate, .ping, .pong: return nil
        }
        return out
    }

    /// Parses one text frame of the dialect.
    /// - Throws: ``ProtocolViolation`` for invalid JSON, a missing or mistyped field, or an
    ///   unknown message type.
    package static func parse(_ frame: ByteBuffer) throws(ProtocolViolation) -> ServerMessage {
        let envelope = try Envelope.parsing(frame)
        switch envelope.type {
        case "connection_ack":
            return .connectionAck(payload: try envelope.optionalObjectPayload())
        case "ka":
            return .keepAlive
        case "start_ack":
            return .started(id: try envelope.requiredID())
        case "data":
            return try ServerMessage.next(envelope)
        case "error":
            let errors = try errorsArray(envelope)
            guard let id = envelope.id, !id.isEmpty else { return .connectionNotice(payload: errors) }
            return .error(id: id, payload: errors ?? ByteBuffer(string: #"[{"message":"AppSync error without details"}]"#))
        case "complete":
            return .complete(id: try envelope.requiredID())
        case "connection_error":
            return .connectionError(payload: try errorsArray(envelope).map(firstError))
        default:
            throw ProtocolViolation("unexpected AppSync message type '\(envelope.type)'")
        }
    }

    /// Whether an operation's errors say its connection holds as many subscriptions as AppSync
    /// allows (`MaxSubscriptionsReachedError`).
    package static func isSubscriptionCap(_ errors: ByteBuffer) -> Bool {
        errors.withUnsafeReadableBytes { bytes in
            guard let first = JSONScanner.firstElement(ofArray: bytes),
                let members = try? JSONScanner.scanObject(UnsafeRawBufferPointer(rebasing: bytes[first])),
                let type = members.first(where: { $0.key == "errorType" && $0.kind == .string })
            else { return false }
            return JSONScanner.decodeString(UnsafeRawBufferPointer(rebasing: bytes[first]), type.range) == "MaxSubscriptionsReachedError"
        }
    }

    /// `connectionTimeoutMs` of a `connection_ack` payload: how long the server may stay
    /// silent (it sends `ka` more often), at most a day (a server's huge number must not wrap
    /// a deadline). Nil when absent or not a positive integer.
    package static func connectionTimeout(_ ackPayload: ByteBuffer?) -> Duration? {
        guard let ackPayload else { return nil }
        return ackPayload.withUnsafeReadableBytes { bytes -> Duration? in
            guard let members = try? JSONScanner.scanObject(bytes),
                let member = members.first(where: { $0.key == "connectionTimeoutMs" && $0.kind == .number }),
                let ms = Int(String(decoding: bytes[member.range], as: UTF8.self)), ms > 0
            else { return nil }
            return .milliseconds(Swift.min(ms, 86_400_000))
        }
    }

    /// An `error` or `connection_error` payload's `errors` array (`{"errors": […]}`), or the
    /// payload itself when it is already an array or a single error object (wrapped).
    private static func errorsArray(_ envelope: Envelope) throws(ProtocolViolation) -> ByteBuffer? {
        guard let payload = envelope.payload else { return nil }
        switch envelope.payloadKind {
        case .array:
            return payload
        case .object:
            let inner = payload.withUnsafeReadableBytes { bytes -> Range<Int>? in
                guard let members = try? JSONScanner.scanObject(bytes) else { return nil }
                return members.first(where: { $0.key == "errors" && $0.kind == .array })?.range
            }
            if let inner { return payload.getSlice(at: payload.readerIndex + inner.lowerBound, length: inner.count) }
            var wrapped = ByteBuffer()
            wrapped.writeStaticString("[")
            wrapped.writeImmutableBuffer(payload)
            wrapped.writeStaticString("]")
            return wrapped
        case .null, nil:
            return nil
        default:
            throw ProtocolViolation("'\(envelope.type)' payload must be an object or an array of errors")
        }
    }

    /// The first error object of an array, for a connection's refusal (its `message`,
    /// `errorType` and `errorCode` say why).
    private static func firstError(_ errors: ByteBuffer) -> ByteBuffer {
        errors.withUnsafeReadableBytes { bytes in
            guard let range = JSONScanner.firstElement(ofArray: bytes) else { return errors }
            return errors.getSlice(at: errors.readerIndex + range.lowerBound, length: range.count) ?? errors
        }
    }
}
