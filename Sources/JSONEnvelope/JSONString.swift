import NIOCore

extension ByteBuffer {
    /// Writes `string` as a JSON string literal, quotes included, escaping what RFC 8259 requires.
    /// Runs of bytes that need no escape are written whole (a credential or a document of many
    /// kilobytes is one copy, not a write per byte).
    @discardableResult
    package mutating func writeJSONString(_ string: String) -> Int {
        var written = writeInteger(UInt8(ascii: "\""))
        var string = string
        written += string.withUTF8 { writeEscapedJSON($0) }
        written += writeInteger(UInt8(ascii: "\""))
        return written
    }

    /// The bytes of a JSON string's content, escaped.
    private mutating func writeEscapedJSON(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var written = 0
        var run = 0
        for index in bytes.indices {
            let byte = bytes[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            written += writeBytes(UnsafeBufferPointer(rebasing: bytes[run..<index]))
            run = index + 1
            switch byte {
            case UInt8(ascii: "\""): written += writeStaticString("\\\"")
            case UInt8(ascii: "\\"): written += writeStaticString("\\\\")
            case 0x0A: written += writeStaticString("\\n")
            case 0x0D: written += writeStaticString("\\r")
            case 0x09: written += writeStaticString("\\t")
            default:
                let low = byte & 0xF
                written += writeStaticString("\\u00")
                written += writeInteger(UInt8(ascii: "0") + byte >> 4)
                written += writeInteger(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10)
            }
        }
        written += writeBytes(UnsafeBufferPointer(rebasing: bytes[run...]))
        return written
    }
}

extension ByteBuffer {
    /// Writes `{"type":TYPE,"id":ID,"payload":PAYLOAD}`, leaving out `id` and `payload` when nil:
    /// the envelope graphql-transport-ws and the local protocol share. The payload bytes are
    /// written as given (raw JSON, never re-encoded).
    package mutating func writeEnvelope(type: String, id: String? = nil, payload: ByteBuffer? = nil, upstream: String? = nil) {
        writeStaticString(#"{"type":"#)
        writeJSONString(type)
        if let id {
            writeStaticString(#","id":"#)
            writeJSONString(id)
        }
        if let upstream {
            writeStaticString(#","upstream":"#)
            writeJSONString(upstream)
        }
        if let payload {
            writeStaticString(#","payload":"#)
            writeImmutableBuffer(payload)
        }
        writeStaticString("}")
    }
}

/// Encodes `string` as a JSON string literal.
package func jsonString(_ string: String) -> String {
    var buffer = ByteBuffer()
    buffer.writeJSONString(string)
    return String(buffer: buffer)
}
