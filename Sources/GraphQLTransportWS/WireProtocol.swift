import GQLMuxVocabulary
import NIOCore

extension WireProtocol {
    /// The message's text frame in this protocol, or nil when it has no equivalent here
    /// (`ping`/`pong` in the legacy protocol, `connection_terminate` in the modern one).
    package func encode(_ message: ClientMessage) -> ByteBuffer? {
        switch self {
        case .transportWS:
            if case .connectionTerminate = message { return nil }
            return message.encode()
        case .legacyWS:
            var out = ByteBuffer()
            switch message {
            case .connectionInit(let payload): out.writeEnvelope(type: "connection_init", payload: payload)
            case .subscribe(let id, let payload): out.writeEnvelope(type: "start", id: id, payload: payload)
            case .complete(let id): out.writeEnvelope(type: "stop", id: id)
            case .connectionTerminate: out.writeEnvelope(type: "connection_terminate")
            case .ping, .pong: return nil
            }
            return out
        }
    }

    /// Parses one text frame of this protocol into the shared vocabulary.
    /// - Throws: ``ProtocolViolation`` for invalid JSON, a missing or mistyped field, or an
    ///   unknown or client-only message type.
    package func parse(_ frame: ByteBuffer) throws(ProtocolViolation) -> ServerMessage {
        switch self {
        case .transportWS: return try ServerMessage.parse(frame)
        case .legacyWS: return try ServerMessage.parseLegacy(frame)
        }
    }
}

extension ServerMessage {
    /// Parses one text frame of the legacy graphql-ws protocol.
    static func parseLegacy(_ frame: ByteBuffer) throws(ProtocolViolation) -> ServerMessage {
        let envelope = try Envelope.parsing(frame)
        switch envelope.type {
        case "connection_ack":
            return .connectionAck(payload: try envelope.optionalObjectPayload())
        case "ka":
            return .keepAlive
        case "connection_error":
            return .connectionError(payload: envelope.payload)
        case "data":
            return try next(envelope)
        case "error":
            return try error(envelope, singleObjectAllowed: true)
        case "complete":
            return .complete(id: try envelope.requiredID())
        default:
            throw ProtocolViolation("unexpected graphql-ws message type '\(envelope.type)'")
        }
    }
}
