import JSONEnvelope
import NIOCore

/// Reading the daemon's local-protocol lines on their way to an endpoint client: the parts a
/// translation needs (type, id, the first error's code and message), without decoding the rest.
package struct LocalLine {
    package let bytes: ByteBuffer
    package let type: String
    package let id: String?
    package let payload: ByteBuffer?

    private static let nextPrefix = Array(#"{"type":"next","#.utf8)

    /// `{"type":"next",…`: the daemon's `next` lines all start so; read without a scan.
    package static func isNext(_ line: ByteBuffer) -> Bool {
        line.readableBytes > nextPrefix.count && line.readableBytesView.starts(with: nextPrefix)
    }

    package init?(_ line: ByteBuffer) {
        guard let envelope = try? Envelope(line) else { return nil }
        bytes = line
        type = envelope.type
        id = envelope.id
        payload = envelope.payload
    }

    /// The first GraphQL error of an `error` payload (`[{"message":…,"extensions":{"code":…}}]`).
    package var firstError: ByteBuffer? {
        guard let payload, let range = payload.withUnsafeReadableBytes({ Self.firstElement(of: $0) }) else { return nil }
        return payload.getSlice(at: payload.readerIndex + range.lowerBound, length: range.count)
    }

    /// `extensions.code` of the first error, as the daemon writes it.
    package var errorCode: String? {
        guard let error = firstError else { return nil }
        return error.withUnsafeReadableBytes { bytes -> String? in
            guard let members = try? JSONScanner.scanObject(bytes),
                let extensions = members.first(where: { $0.key == "extensions" && $0.kind == .object })
            else { return nil }
            let inner = UnsafeRawBufferPointer(rebasing: bytes[extensions.range])
            guard let code = (try? JSONScanner.scanObject(inner))?.first(where: { $0.key == "code" && $0.kind == .string }) else { return nil }
            return JSONScanner.decodeString(inner, code.range)
        }
    }

    /// `message` of the first error.
    package var errorMessage: String {
        guard let error = firstError else { return "" }
        return error.withUnsafeReadableBytes { bytes in
            guard let members = try? JSONScanner.scanObject(bytes),
                let message = members.first(where: { $0.key == "message" && $0.kind == .string })
            else { return "" }
            return JSONScanner.decodeString(bytes, message.range)
        }
    }

    /// The byte range of the first element of a JSON array (already validated).
    static func firstElement(of bytes: UnsafeRawBufferPointer) -> Range<Int>? {
        var index = 0
        func skipSpace() { while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 } }
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else { return nil }
        index += 1
        skipSpace()
        let start = index
        var depth = 0
        var inString = false
        while index < bytes.count {
            let byte = bytes[index]
            if inString {
                if byte == UInt8(ascii: "\\") {
                    index += 1
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else {
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 { return start < index ? start..<Self.trimEnd(bytes, start, index) : nil }
                    depth -= 1
                case UInt8(ascii: ","):
                    if depth == 0 { return start..<Self.trimEnd(bytes, start, index) }
                default: break
                }
            }
            index += 1
        }
        return nil
    }

    private static func trimEnd(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int {
        var end = end
        while end > start, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[end - 1]) { end -= 1 }
        return end
    }
}

/// Splits the daemon's outbound bytes into lines: a line may be written in pieces (a large
/// payload is passed by reference between its prefix and its suffix).
package struct LineSplitter {
    private var pending = ByteBuffer()

    package init() {}

    /// The complete lines in `bytes` (and what was pending before them), without the `\n`.
    package mutating func lines(in bytes: ByteBuffer) -> [ByteBuffer] {
        var bytes = bytes
        var lines: [ByteBuffer] = []
        while let newline = bytes.readableBytesView.firstIndex(of: 10) {
            let length = newline - bytes.readerIndex
            var line = bytes.readSlice(length: length)!
            bytes.moveReaderIndex(forwardBy: 1)
            if pending.readableBytes > 0 {
                pending.writeBuffer(&line)
                line = pending
                pending = ByteBuffer()
            }
            lines.append(line)
        }
        if bytes.readableBytes > 0 { pending.writeBuffer(&bytes) }
        return lines
    }
}
