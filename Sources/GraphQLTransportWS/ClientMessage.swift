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

    /// Encodes the message into one text frame's bytes.
    package func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out: ByteBuffer
        switch self {
        case .connectionInit(let payload):
            out = allocator.buffer(capacity: 32 + (payload?.readableBytes ?? 0))
            out.writeStaticString(#"{"type":"connection_init""#)
            Self.writePayload(payload, into: &out)
        case .subscribe(let id, let payload):
            out = allocator.buffer(capacity: 40 + id.utf8.count + payload.readableBytes)
            out.writeStaticString(#"{"type":"subscribe","id":"#)
            out.writeJSONString(id)
            Self.writePayload(payload, into: &out)
        case .complete(let id):
            out = allocator.buffer(capacity: 32 + id.utf8.count)
            out.writeStaticString(#"{"type":"complete","id":"#)
            out.writeJSONString(id)
        case .ping(let payload):
            out = allocator.buffer(capacity: 24 + (payload?.readableBytes ?? 0))
            out.writeStaticString(#"{"type":"ping""#)
            Self.writePayload(payload, into: &out)
        case .pong(let payload):
            out = allocator.buffer(capacity: 24 + (payload?.readableBytes ?? 0))
            out.writeStaticString(#"{"type":"pong""#)
            Self.writePayload(payload, into: &out)
        }
        out.writeStaticString("}")
        return out
    }

    private static func writePayload(_ payload: ByteBuffer?, into out: inout ByteBuffer) {
        guard var payload else { return }
        out.writeStaticString(#","payload":"#)
        out.writeBuffer(&payload)
    }
}
