import NIOCore

/// A WebSocket server's messages, read from the bytes of its connection (RFC 6455 §5.2): each
/// frame's header parsed in place, its payload a slice of the bytes read (never copied unless
/// the server masked it, or sent it in fragments), fragments joined into one message, and
/// control frames between fragments passed on at once. Pure: no channel, no clock.
///
/// One reader per upstream connection, in its handler (the Upstream module's). Done here rather than by NIO's frame
/// decoder and aggregator, which cost two pipeline hops and an allocation per message: with a
/// server sending small results, a sixth of gqlmuxd's time went to them.
package struct WebSocketMessageReader {
    /// One whole message.
    package enum Message: Equatable, Sendable {
        case text(ByteBuffer)
        /// A binary message (its bytes are not kept: the GraphQL protocols are text only).
        case binary
        case ping(ByteBuffer)
        case pong
        /// A close frame's payload: a status code and a reason, or nothing.
        case close(ByteBuffer)
    }

    /// Why the connection cannot go on.
    package enum Failure: Error, Equatable, CustomStringConvertible {
        /// A frame, or the message its fragments make, is over the limit (close code 1009).
        case tooLarge
        /// The frames break RFC 6455's rules.
        case malformed(String)

        package var description: String {
            switch self {
            case .tooLarge: "message larger than max_message_bytes"
            case .malformed(let reason): "WebSocket protocol error: \(reason)"
            }
        }
    }

    /// The most a message may hold, joined fragments included.
    package let maxMessageBytes: Int
    /// At most this many fragments make one message.
    package static let maxFragments = 1 << 16

    /// The message whose first fragments have come, not its last.
    private var assembling: (text: Bool, bytes: ByteBuffer, fragments: Int)?

    package init(maxMessageBytes: Int) {
        self.maxMessageBytes = maxMessageBytes
    }

    /// The beginning of a frame the last read ended in, copied out of it.
    private var unread: ByteBuffer?

    /// Reads one read's bytes: each whole message in them goes to `receive`, in order, and the
    /// beginning of a frame they end in is kept for the next read. Only that frame's bytes are
    /// ever copied (from the front of the next read, just as many as it lacks): every other
    /// message is a slice of the bytes read, and no read is appended to another.
    package mutating func read(_ bytes: ByteBuffer, _ receive: (Message) -> Void) throws(Failure) {
        var bytes = bytes
        if var kept = unread {
            unread = nil
            while true {
                let missing = Self.bytesMissing(from: kept, limit: maxMessageBytes)
                guard missing > 0 else { break }
                guard bytes.readableBytes > 0 else {
                    unread = kept
                    return
                }
                var part = bytes.readSlice(length: Swift.min(missing, bytes.readableBytes))!
                kept.writeBuffer(&part)
            }
            if let message = try next(from: &kept) { receive(message) }
        }
        while let message = try next(from: &bytes) { receive(message) }
        if bytes.readableBytes > 0 {
            var kept = ByteBuffer()
            kept.reserveCapacity(Swift.max(bytes.readableBytes, 256))
            kept.writeBuffer(&bytes)
            unread = kept
        }
    }

    /// The next whole message at the front of `buffer`, its frames consumed; nil when the
    /// rest of `buffer` holds no whole message yet (a frame's beginning, or the first
    /// fragments of one: those are consumed and kept). Frames of reserved opcodes are skipped.
    package mutating func next(from buffer: inout ByteBuffer) throws(Failure) -> Message? {
        while let frame = try Self.frame(from: &buffer, limit: maxMessageBytes) {
            if let message = try join(frame) { return message }
        }
        return nil
    }

    /// How many more bytes the frame at the front of `buffer` needs to be whole, as far as its
    /// header tells so far (0 when it is whole, or when its length is over `limit`: reading it
    /// fails at once).
    private static func bytesMissing(from buffer: ByteBuffer, limit: Int) -> Int {
        let start = buffer.readerIndex
        guard let second = buffer.getInteger(at: start + 1, as: UInt8.self) else { return 2 - buffer.readableBytes }
        let short = second & 0x7F
        // The length is known, and checked, before the mask key has come (as `frame` does).
        let lengthEnd = 2 + (short == 126 ? 2 : short == 127 ? 8 : 0)
        guard buffer.readableBytes >= lengthEnd else { return lengthEnd - buffer.readableBytes }
        let length: UInt64 =
            switch short {
            case 126: UInt64(buffer.getInteger(at: start + 2, as: UInt16.self)!)
            case 127: buffer.getInteger(at: start + 2, as: UInt64.self)!
            default: UInt64(short)
            }
        guard length <= UInt64(limit) else { return 0 }
        let header = lengthEnd + (second & 0x80 != 0 ? 4 : 0)
        return Swift.max(0, header + Int(length) - buffer.readableBytes)
    }

    /// One frame as it came: its opcode, whether it is final, its payload unmasked.
    private struct Frame {
        var opcode: UInt8
        var fin: Bool
        var payload: ByteBuffer
    }

    /// The frame at the front of `buffer`, consumed; nil (nothing consumed) when not all of it
    /// has come. A frame longer than `limit` fails at its header, before its bytes arrive.
    private static func frame(from buffer: inout ByteBuffer, limit: Int) throws(Failure) -> Frame? {
        let start = buffer.readerIndex
        guard let first = buffer.getInteger(at: start, as: UInt8.self), let second = buffer.getInteger(at: start + 1, as: UInt8.self) else {
            return nil
        }
        var header = 2
        var length = UInt64(second & 0x7F)
        if length == 126 {
            guard let extended = buffer.getInteger(at: start + 2, as: UInt16.self) else { return nil }
            length = UInt64(extended)
            header += 2
        } else if length == 127 {
            guard let extended = buffer.getInteger(at: start + 2, as: UInt64.self) else { return nil }
            length = extended
            header += 8
        }
        guard length <= UInt64(limit) else { throw .tooLarge }
        let masked = second & 0x80 != 0
        let maskAt = start + header
        if masked { header += 4 }
        let count = Int(length)
        guard buffer.readableBytes >= header + count, var payload = buffer.getSlice(at: start + header, length: count) else { return nil }
        if masked, let key = buffer.getBytes(at: maskAt, length: 4) {
            // A server must not mask (RFC 6455 §5.1); one that does is read anyway, as before.
            var unmasked = ByteBuffer()
            unmasked.writeImmutableBuffer(payload)
            unmasked.withUnsafeMutableReadableBytes { bytes in
                for index in bytes.indices { bytes[index] ^= key[index & 3] }
            }
            payload = unmasked
        }
        buffer.moveReaderIndex(forwardBy: header + count)
        return Frame(opcode: first & 0x0F, fin: first & 0x80 != 0, payload: payload)
    }

    /// A frame's part in a message: a whole message when it completes one (or is a control
    /// frame), nil when it begins or continues one, or is of a reserved opcode.
    private mutating func join(_ frame: Frame) throws(Failure) -> Message? {
        switch frame.opcode {
        case 0x8, 0x9, 0xA, 0xB...0xF:
            guard frame.fin else { throw .malformed("fragmented control frame") }
            guard frame.payload.readableBytes <= 125 else { throw .malformed("control frame longer than 125 bytes") }
            switch frame.opcode {
            case 0x8: return .close(frame.payload)
            case 0x9: return .ping(frame.payload)
            case 0xA: return .pong
            default: return nil
            }
        case 0x1, 0x2:
            guard assembling == nil else { throw .malformed("a message began before the last one's final fragment") }
            let text = frame.opcode == 0x1
            guard !frame.fin else { return text ? .text(frame.payload) : .binary }
            var bytes = ByteBuffer()
            bytes.reserveCapacity(Swift.min(maxMessageBytes, 2 * frame.payload.readableBytes))
            bytes.writeImmutableBuffer(frame.payload)
            assembling = (text, bytes, 1)
            return nil
        case 0x0:
            guard var message = assembling else { throw .malformed("continuation frame without a message to continue") }
            assembling = nil  // the buffer, uniquely held, grows in place
            guard message.bytes.readableBytes + frame.payload.readableBytes <= maxMessageBytes else { throw .tooLarge }
            message.fragments += 1
            guard message.fragments <= Self.maxFragments else { throw .malformed("more than \(Self.maxFragments) fragments in one message") }
            message.bytes.writeImmutableBuffer(frame.payload)
            guard frame.fin else {
                assembling = message
                return nil
            }
            return message.text ? .text(message.bytes) : .binary
        default:
            return nil  // 0x3-0x7: reserved, not for us
        }
    }
}
