import GQLMuxVocabulary
import NIOCore

/// A message the server sends on a graphql-transport-ws connection.
///
/// Payloads are slices of the received frame (no copy, no decode), so a `next` payload can
/// be forwarded to local clients byte for byte.
package enum ServerMessage: Sendable, Equatable {
    case connectionAck(payload: ByteBuffer?)
    case next(id: String, payload: ByteBuffer)
    case error(id: String, payload: ByteBuffer)
    case complete(id: String)
    case ping(payload: ByteBuffer?)
    case pong(payload: ByteBuffer?)
    /// graphql-ws only: the server's keep-alive (`ka`).
    case keepAlive
    /// graphql-ws only: the server refused `connection_init` (its payload, if any, says why).
    case connectionError(payload: ByteBuffer?)
    /// AppSync only: the server accepted a `start` (`start_ack`).
    case started(id: String)
    /// AppSync only: an `error` without an id, about the connection or a message it could not
    /// read (its errors, if any); the connection stays open.
    case connectionNotice(payload: ByteBuffer?)
}

/// The server broke the protocol; the client answers by closing with 4400.
package struct ProtocolViolation: Error, Equatable, Sendable, CustomStringConvertible {
    package var reason: String
    /// 4400 for a malformed message; 1007 for text that is not valid UTF-8 (RFC 6455 section 8.1).
    package var closeCode: CloseCode
    package init(_ reason: String, closeCode: CloseCode = 4400) {
        self.reason = reason
        self.closeCode = closeCode
    }
    package var description: String { reason }
}

extension ServerMessage {
    /// Parses one text frame.
    /// - Parameter frame: the complete message as received.
    /// - Throws: ``ProtocolViolation`` for invalid JSON, a missing or mistyped field, or an
    ///   unknown or client-only message type.
    package static func parse(_ frame: ByteBuffer) throws(ProtocolViolation) -> ServerMessage {
        let envelope = try Envelope.parsing(frame)
        switch envelope.type {
        case "connection_ack":
            return .connectionAck(payload: try envelope.optionalObjectPayload())
        case "next":
            return try next(envelope)
        case "error":
            return try error(envelope, singleObjectAllowed: false)
        case "complete":
            return .complete(id: try envelope.requiredID())
        case "ping":
            return .ping(payload: try envelope.optionalObjectPayload())
        case "pong":
            return .pong(payload: try envelope.optionalObjectPayload())
        default:
            throw ProtocolViolation("unexpected message type '\(envelope.type)'")
        }
    }
}

extension ServerMessage {
    /// A result (`next`, graphql-ws `data`): an id and an object payload, kept as a slice.
    static func next(_ envelope: Envelope) throws(ProtocolViolation) -> ServerMessage {
        let id = try envelope.requiredID()
        guard envelope.payloadKind == .object, let body = envelope.payload else {
            throw ProtocolViolation("'\(envelope.type)' payload must be an object")
        }
        return .next(id: id, payload: body)
    }

    /// An operation's error: an array of GraphQL errors. graphql-ws servers may send one error
    /// object (`singleObjectAllowed`); it is wrapped, so clients always get an array.
    static func error(_ envelope: Envelope, singleObjectAllowed: Bool) throws(ProtocolViolation) -> ServerMessage {
        let id = try envelope.requiredID()
        switch (envelope.payloadKind, envelope.payload) {
        case (.array, let body?):
            return .error(id: id, payload: body)
        case (.object, let body?) where singleObjectAllowed:
            var wrapped = ByteBuffer()
            wrapped.writeStaticString("[")
            wrapped.writeImmutableBuffer(body)
            wrapped.writeStaticString("]")
            return .error(id: id, payload: wrapped)
        default:
            throw ProtocolViolation(
                singleObjectAllowed
                    ? "'error' payload must be an error object or an array of errors" : "'error' payload must be an array of errors"
            )
        }
    }
}

extension Envelope {
    /// Scans a server message; a scan error is a ``ProtocolViolation`` (1007 for bad UTF-8).
    static func parsing(_ frame: ByteBuffer) throws(ProtocolViolation) -> Envelope {
        do {
            return try Envelope(frame)
        } catch {
            throw ProtocolViolation("invalid message: \(error)", closeCode: error.isEncodingError ? 1007 : 4400)
        }
    }

    func requiredID() throws(ProtocolViolation) -> String {
        guard let id, !id.isEmpty else {
            throw ProtocolViolation("'\(type)' message without a non-empty string 'id'")
        }
        return id
    }

    func optionalObjectPayload() throws(ProtocolViolation) -> ByteBuffer? {
        switch payloadKind {
        case nil, .null: return nil
        case .object: return payload
        default: throw ProtocolViolation("'\(type)' payload must be an object")
        }
    }
}
