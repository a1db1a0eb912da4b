import NIOCore

extension ByteBuffer {
    /// Writes `string` as a JSON string literal, quotes included, escaping what RFC 8259 requires.
    @discardableResult
    package mutating func writeJSONString(_ string: String) -> Int {
        var written = writeInteger(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): written += writeStaticString("\\\"")
            case UInt8(ascii: "\\"): written += writeStaticString("\\\\")
            case 0x0A: written += writeStaticString("\\n")
            case 0x0D: written += writeStaticString("\\r")
            case 0x09: written += writeStaticString("\\t")
            case 0x00..<0x20:
                let low = byte & 0xF
                written += writeStaticString("\\u00")
                written += writeInteger(UInt8(ascii: "0") + byte >> 4)
                written += writeInteger(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10)
            default:
                written += writeInteger(byte)
            }
        }
        written += writeInteger(UInt8(ascii: "\""))
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
