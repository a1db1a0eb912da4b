import GQLMuxVocabulary
import NIOCore

/// A message the client sends on a graphql-transport-ws connection.
package enum ClientMessage: Sendable, Equatable {
    /// `payload` is omitted from the wire when nil (strawberry rejects `"payload": null`).
    case connectionInit(payload: ByteBuffer?)
    /// `payload` is the request object (`query`, `variables`, …), written as given.
    case subscribe(id: String, payload: ByteBuffer)
    case complete(id: String)
    case ping(payload: ByteBuffer?)
    case pong(payload: ByteBuffer?)
    /// graphql-ws only: the goodbye before the close (see ``WireProtocol/encode(_:)``).
    case connectionTerminate

    /// Encodes the message into one graphql-transport-ws text frame's bytes (for the legacy
    /// protocol, see ``WireProtocol/encode(_:)``).
    package func encode() -> ByteBuffer {
        var out = ByteBuffer()
        switch self {
        case .connectionInit(let payload): out.writeEnvelope(type: "connection_init", payload: payload)
        case .subscribe(let id, let payload): out.writeEnvelope(type: "subscribe", id: id, payload: payload)
        case .complete(let id): out.writeEnvelope(type: "complete", id: id)
        case .ping(let payload): out.writeEnvelope(type: "ping", payload: payload)
        case .pong(let payload): out.writeEnvelope(type: "pong", payload: payload)
        case .connectionTerminate: out.writeEnvelope(type: "connection_terminate")
        }
        return out
    }
}
