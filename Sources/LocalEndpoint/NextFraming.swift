import GQLMuxVocabulary
import LocalProtocol
import NIOCore

/// What a client's writer hands an endpoint WebSocket client's wire: results already framed as
/// whole WebSocket messages, or a message as a value, which the wire writes in its protocol's
/// words.
package enum WebSocketOutput {
    /// Everything but a result framed on the hot path: an error, a complete, a state, a result
    /// gqlmuxd gives itself.
    case message(SessionMessage)
    /// Results framed by ``NextFraming``, each a whole WebSocket message: written as they are.
    case frames(ByteBuffer)
}

/// What a client's writer hands an endpoint HTTP client's wire: a stream's results already
/// framed, or a message as a value, which the wire turns into its exchange's answer.
package enum HTTPOutput {
    /// Everything but a result framed on the hot path: an error, a complete, a result a single
    /// answer collects.
    case message(SessionMessage)
    /// SSE events or multipart parts framed by ``NextFraming``: one part of the stream's body,
    /// chunked by the HTTP codec.
    case body(ByteBuffer)
    /// The same, sealed as one whole HTTP/1.1 chunk (``NextFraming/sealChunk(_:)``): written as
    /// it is, below the HTTP codec.
    case chunk(ByteBuffer)
}

/// How one kind of client receives a result: the fan-out writes `header + prefix + payload +
/// suffix + trailer` for it once, the payload's bytes copied as they came from upstream, and
/// nothing parses or re-frames them after.
///
/// | kind | prefix | suffix | header, trailer |
/// |---|---|---|---|
/// | line protocol | `{"type":"next","id":ID,"payload":` | `}\n` | none |
/// | graphql-transport-ws | `{"type":"next","id":ID,"payload":` | `}` | a WebSocket text frame header |
/// | graphql-ws | `{"type":"data","id":ID,"payload":` | `}` | a WebSocket text frame header |
/// | HTTP, SSE | `event: next\ndata: ` | `\n\n` | none (HTTP/1.1 chunks, one per batch) |
/// | HTTP, multipart | `\r\ncontent-type: application/json\r\n\r\n{"payload":` | `}\r\n--graphql` | none |
///
/// A single HTTP answer (a query or mutation answered as one JSON document) frames nothing:
/// its operation's results reach its wire as ``SessionMessage/next(id:payload:mark:)`` values.
package enum NextFraming: Sendable, Equatable {
    case line
    case webSocket(WireProtocol)
    case sse
    case multipart
    /// The results of operation `id`, for one JSON answer.
    case answer(id: String)

    /// The bytes before the payload of a result for local operation `id`.
    package func prefix(id: String) -> ByteBuffer {
        switch self {
        case .line, .webSocket(.transportWS):
            return LocalEncode.nextPrefix(id: id)
        case .webSocket(.legacyWS):
            var prefix = LocalEncode.nextPrefix(id: id)
            prefix.setString("data", at: prefix.readerIndex + 9)  // {"type":"next" → {"type":"data"
            return prefix
        case .sse:
            return ByteBuffer(string: "event: next\ndata: ")
        case .multipart:
            return ByteBuffer(string: "\r\ncontent-type: application/json\r\n\r\n{\"payload\":")
        case .answer:
            return ByteBuffer()
        }
    }

    /// The bytes after the payload.
    @inlinable
    package var suffix: StaticString {
        switch self {
        case .line: LocalEncode.nextSuffix
        case .webSocket: "}"
        case .sse: "\n\n"
        case .multipart: "}\r\n--graphql"
        case .answer: ""
        }
    }

    /// The longest header a result's message starts with: a WebSocket frame's (2, 4 or 10 bytes).
    @inlinable
    package static var maxHeaderBytes: Int { 10 }

    /// Whether results are sent as the chunks of an HTTP/1.1 body (SSE and multipart streams):
    /// a batch of them then starts with ``chunkHeaderRoom`` bytes for its chunk's size line,
    /// and ``sealChunk(_:)`` completes it.
    @inlinable
    package var isChunked: Bool { self == .sse || self == .multipart }

    /// Room at the start of a chunked batch for its size line: up to 8 hex digits and CRLF.
    @inlinable
    package static var chunkHeaderRoom: Int { 10 }

    /// Makes a batch that began with ``chunkHeaderRoom`` bytes of room one whole HTTP/1.1 chunk
    /// (RFC 9112 7.1): its size in hex and CRLF, written at the end of that room (the reader
    /// index moves to its start), then the bytes, then CRLF. A batch with nothing after the
    /// room becomes empty: an empty chunk would end the body.
    package static func sealChunk(_ batch: inout ByteBuffer) {
        let size = batch.readableBytes - chunkHeaderRoom
        precondition(size >= 0 && size <= 0xFFFF_FFFF, "a chunked batch starts with its header room")
        guard size > 0 else {
            batch.moveReaderIndex(forwardBy: chunkHeaderRoom)
            return
        }
        var digits = 1
        while size >> (4 * digits) > 0 { digits += 1 }
        let start = batch.readerIndex + chunkHeaderRoom - digits - 2
        let hex: StaticString = "0123456789abcdef"
        for index in 0..<digits {
            let nibble = (size >> (4 * (digits - 1 - index))) & 0xF
            batch.setInteger(hex.utf8Start[nibble], at: start + index)
        }
        batch.setInteger(UInt16(0x0D0A), at: start + digits)  // CRLF, big-endian
        batch.moveReaderIndex(to: start)
        batch.writeInteger(UInt16(0x0D0A))
    }

    /// Whether each result's message starts with a header: a WebSocket frame's, which the
    /// hot path writes in place (`FrameHeader`, in the ResultDelivery module), as
    /// ``writeWebSocketHeader(opcode:length:to:)`` writes it here.
    @inlinable
    package var hasHeader: Bool {
        if case .webSocket = self { true } else { false }
    }

    /// Appends an unmasked, final WebSocket frame's header (RFC 6455 5.2) for a message of
    /// `length` bytes to `out`: a text frame's unless `opcode` says otherwise. Every frame the
    /// endpoint sends but the hot path's results starts with one written here.
    package static func writeWebSocketHeader(opcode: UInt8 = 0x1, length: Int, to out: inout ByteBuffer) {
        out.writeInteger(0x80 | opcode)  // FIN, opcode
        if length < 126 {
            out.writeInteger(UInt8(length))
        } else if length <= Int(UInt16.max) {
            out.writeInteger(UInt8(126))
            out.writeInteger(UInt16(length))  // big-endian
        } else {
            out.writeInteger(UInt8(127))
            out.writeInteger(UInt64(length))
        }
    }
}
