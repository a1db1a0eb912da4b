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
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                written += writeStaticString("\\u00")
                written += writeInteger(hex[Int(byte >> 4)])
                written += writeInteger(hex[Int(byte & 0xF)])
            default:
                written += writeInteger(byte)
            }
        }
        written += writeInteger(UInt8(ascii: "\""))
        return written
    }
}

/// Encodes `string` as a JSON string literal.
package func jsonString(_ string: String) -> String {
    var buffer = ByteBuffer()
    buffer.writeJSONString(string)
    return String(buffer: buffer)
}
