/// One text for JSON values that mean the same to a reader of the members: object members
/// sorted by their decoded keys (members with the same key keep their order), strings
/// decoded and written again with the fewest escapes, no white space. Numbers are kept as
/// written (`1` and `1.0` stay different), which only ever keeps apart what could be equal.
package enum JSONCanonical {
    /// The canonical text of the JSON value in `bytes`.
    /// - Throws: ``JSONScanError`` if `bytes` is not exactly one valid JSON value.
    package static func text(_ bytes: UnsafeRawBufferPointer) throws(JSONScanError) -> String {
        _ = try JSONScanner.validate(bytes)
        var writer = Writer(bytes: bytes)
        writer.value()
        return String(decoding: writer.out, as: UTF8.self)
    }

    /// Walks text the scanner has validated (so it never meets a malformed byte) and writes
    /// the canonical form; recursion is bounded by the scanner's depth limit.
    private struct Writer {
        let bytes: UnsafeRawBufferPointer
        var index = 0
        var out: [UInt8] = []

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value() {
            skipWhitespace()
            switch bytes[index] {
            case UInt8(ascii: "{"): object()
            case UInt8(ascii: "["): array()
            case UInt8(ascii: "\""): out.append(contentsOf: jsonString(string()).utf8)
            default:  // a number or a literal: copied up to the next delimiter
                let start = index
                while index < bytes.count, !",]} \t\r\n".utf8.contains(bytes[index]) { index += 1 }
                out.append(contentsOf: bytes[start..<index])
            }
        }

        /// The decoded string literal at `index`.
        mutating func string() -> String {
            let start = index
            index += 1
            while bytes[index] != UInt8(ascii: "\"") { index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1 }
            index += 1
            return JSONScanner.decodeString(bytes, start..<index)
        }

        mutating func array() {
            index += 1
            out.append(UInt8(ascii: "["))
            skipWhitespace()
            var first = true
            while bytes[index] != UInt8(ascii: "]") {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                value()
                skipWhitespace()
                if bytes[index] == UInt8(ascii: ",") { index += 1 }
            }
            index += 1
            out.append(UInt8(ascii: "]"))
        }

        mutating func object() {
            index += 1
            var members: [(key: String, value: [UInt8])] = []
            skipWhitespace()
            while bytes[index] != UInt8(ascii: "}") {
                skipWhitespace()
                let key = string()
                skipWhitespace()
                index += 1  // :
                let outer = out
                out = []
                value()
                members.append((key, out))
                out = outer
                skipWhitespace()
                if bytes[index] == UInt8(ascii: ",") { index += 1 }
            }
            index += 1
            // Stable: members with equal keys keep their order.
            let sorted = members.enumerated().sorted { ($0.element.key, $0.offset) < ($1.element.key, $1.offset) }
            out.append(UInt8(ascii: "{"))
            for (n, member) in sorted.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: jsonString(member.element.key).utf8)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: member.element.value)
            }
            out.append(UInt8(ascii: "}"))
        }
    }
}
